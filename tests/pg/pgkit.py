"""Helpers of the PostgreSQL tests: stores on the test cluster, sealed events, server-side faults."""

from __future__ import annotations

import json
import time
from pathlib import Path

import psycopg

from loopstate.core.backend import Head, Store, StoredEvent, seal_batch
from loopstate.core.project import Project
from loopstate.core.stores import open_store
from tests.core.corekit import TEST_LAYOUT

STREAM = "core"


def open_pg(url: str, root: Path, data_dir: Path, lock_timeout: float = 5) -> Store:
    """A store on ``url`` for the project at ``root``, as a process of its own would open it."""
    return open_store(Project(str(root), data_dir=data_dir, lock_timeout=lock_timeout), url)


def lines_after(head: Head, *names: str, start: int = 0) -> list[StoredEvent]:
    return seal_batch([{"n": name, "schema_version": 1} for name in names], TEST_LAYOUT, head, start=start)


def append(store: Store, *names: str, stream: str = STREAM) -> Head:
    head = store.head(stream, TEST_LAYOUT)
    return store.append(stream, TEST_LAYOUT, lines_after(head, *names), expected=head)


def names_in(store: Store, stream: str = STREAM) -> list[object]:
    return [json.loads(item.line)["n"] for item in store.read(stream, TEST_LAYOUT)]


def backends(url: str, like: str) -> list[int]:
    """Server pids of the connections whose application_name matches ``like`` (SQL LIKE)."""
    with psycopg.connect(url, autocommit=True) as conn:
        rows = conn.execute(
            "SELECT pid FROM pg_stat_activity WHERE application_name LIKE %s AND pid <> pg_backend_pid()", (like,),
        ).fetchall()
    return [row[0] for row in rows]


def terminate(url: str, pids: list[int]) -> None:
    """End those server processes (what a crashed backend or a DBA's kill looks like to the client)."""
    with psycopg.connect(url, autocommit=True) as conn:
        for pid in pids:
            conn.execute("SELECT pg_terminate_backend(%s)", (pid,))


def wait_for(predicate, timeout: float = 30, what: str = "a condition"):
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        value = predicate()
        if value:
            return value
        time.sleep(0.02)
    raise AssertionError(f"timed out after {timeout}s waiting for {what}")


def waiting_on_a_lock(url: str) -> list[int]:
    """Server pids of loopstate connections now waiting for an advisory lock."""
    with psycopg.connect(url, autocommit=True) as conn:
        rows = conn.execute(
            "SELECT pid FROM pg_stat_activity WHERE wait_event_type = 'Lock' AND wait_event = 'advisory' "
            "AND application_name LIKE 'loopstate %%'",
        ).fetchall()
    return [row[0] for row in rows]
