"""The PostgreSQL event table on a real server: appends at the head, reads, heads, the schema."""

from __future__ import annotations

import psycopg
import pytest

from loopstate_protocol.errors import ErrorCode

from loopstate.core.errors import LoopstateError
from loopstate.core.postgres import schema
from loopstate.core.postgres.store import PostgresEvents
from pgkit import PROJECT, check_chain, sealed


@pytest.fixture
def store(pg_url):
    events = PostgresEvents(pg_url)
    yield events
    events.close()


def test_appends_at_the_head_are_read_back_byte_for_byte_and_verify_as_one_chain(store):
    first = sealed((0, None), 3, request_id="r1")
    done = store.append(PROJECT, "intent", (0, None), first, request_id="r1", fingerprint="f1")
    assert (done.first, done.last, done.duplicate) == (1, 3, False)
    second = sealed((3, first[-1][1]), 2, request_id="r2")
    store.append(PROJECT, "intent", (3, first[-1][1]), second, request_id="r2", fingerprint="f2")
    read = store.read(PROJECT, "intent")
    assert [e.line for e in read] == [line for line, _, _ in first + second]
    check_chain(read)
    assert store.head(PROJECT, "intent") == (5, second[-1][1])
    assert [e.sequence for e in store.read(PROJECT, "intent", after=3)] == [4, 5]
    assert store.read(PROJECT, "intent", after=5) == []


def test_an_append_at_a_stale_head_is_a_conflict_that_writes_nothing(store):
    one = sealed((0, None))
    store.append(PROJECT, "intent", (0, None), one)
    stale = sealed((0, None), 1, other="x")
    with pytest.raises(LoopstateError) as caught:
        store.append(PROJECT, "intent", (0, None), stale)
    assert caught.value.code is ErrorCode.CONFLICT
    assert caught.value.details["head"] == 1
    wrong_hash = sealed((1, "0" * 64))
    with pytest.raises(LoopstateError) as caught:
        store.append(PROJECT, "intent", (1, "0" * 64), wrong_hash)
    assert caught.value.code is ErrorCode.CONFLICT
    assert [e.line for e in store.read(PROJECT, "intent")] == [one[0][0]]


def test_an_exact_retry_by_request_id_returns_the_first_place_and_a_changed_one_is_refused(store):
    batch = sealed((0, None), 2, request_id="r1")
    store.append(PROJECT, "runs.x", (0, None), batch, request_id="r1", fingerprint="f1")
    again = store.append(PROJECT, "runs.x", (0, None), batch, request_id="r1", fingerprint="f1")
    assert (again.first, again.last, again.duplicate) == (1, 2, True)
    with pytest.raises(LoopstateError) as caught:
        store.append(PROJECT, "runs.x", (2, batch[-1][1]), sealed((2, batch[-1][1]), request_id="r1"),
                     request_id="r1", fingerprint="changed")
    assert caught.value.code is ErrorCode.REQUEST_ID_REUSED
    assert len(store.read(PROJECT, "runs.x")) == 2


def test_a_batch_that_does_not_link_up_is_refused_whole(store):
    batch = sealed((0, None), 3)
    broken = [batch[0], batch[2], batch[1]]
    with pytest.raises(LoopstateError) as caught:
        store.append(PROJECT, "intent", (0, None), broken)
    assert caught.value.code is ErrorCode.INVALID_PARAMS
    assert "does not link" in caught.value.message
    assert store.read(PROJECT, "intent") == []


def test_streams_and_heads_list_the_projects_streams_and_nothing_of_other_projects(store):
    for name in ("intent", "runs.r1", "goals.g1"):
        store.append(PROJECT, name, (0, None), sealed((0, None), 2))
    store.append("b" * 64, "intent", (0, None), sealed((0, None)))
    assert store.streams(PROJECT) == ["goals.g1", "intent", "runs.r1"]
    assert {name: head[0] for name, head in store.heads(PROJECT).items()} == {"goals.g1": 2, "intent": 2, "runs.r1": 2}
    assert store.streams("c" * 64) == [] and store.head("c" * 64, "intent") == (0, None)


def test_reads_page_through_a_long_stream(store):
    head = (0, None)
    for _ in range(5):
        batch = sealed(head, 1000)
        store.append(PROJECT, "intent", head, batch)
        head = (head[0] + 1000, batch[-1][1])
    pages = list(store.pages(PROJECT, "intent", size=1500))
    assert [len(p) for p in pages] == [1500, 1500, 1500, 500]
    check_chain([e for p in pages for e in p])


def test_the_schema_is_created_once_and_a_newer_one_is_refused_untouched(pg_url, store):
    store.head(PROJECT, "intent")  # connects: creates it
    PostgresEvents(pg_url).head(PROJECT, "intent")  # a second connect finds it as it is
    with psycopg.connect(pg_url, autocommit=True) as conn:
        assert conn.execute("SELECT value FROM loopstate.meta WHERE key='schema_version'").fetchone()[0] == "1"
        conn.execute("UPDATE loopstate.meta SET value = %s WHERE key='schema_version'", (str(schema.SCHEMA_VERSION + 1),))
    with pytest.raises(LoopstateError) as caught:
        PostgresEvents(pg_url).head(PROJECT, "intent")
    assert caught.value.code is ErrorCode.FUTURE_SCHEMA
    assert "upgrade loopstate" in caught.value.message


def test_a_fresh_database_opened_by_many_processes_at_once_gets_one_schema(pg_url):
    import subprocess
    import sys

    code = ("import sys; from loopstate.core.postgres.store import PostgresEvents; "
            "PostgresEvents(sys.argv[1]).head('p', 'intent')")
    children = [subprocess.Popen([sys.executable, "-c", code, pg_url]) for _ in range(6)]
    assert [child.wait(timeout=60) for child in children] == [0] * 6
    with psycopg.connect(pg_url) as conn:
        assert conn.execute("SELECT count(*) FROM loopstate.meta").fetchone()[0] == 1
