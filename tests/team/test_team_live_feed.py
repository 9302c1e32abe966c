"""Issue 26: the live-follow engine (service/live.py) follows a shared PostgreSQL store through its change feed.

A real Live over a real Service in this process, following a project whose store is a real
PostgreSQL (LOOPSTATE_STORE); the appends come from another process with its own connection
and data dir (tests/store/store_child.py: another machine). Each append wakes one catch-up of
the followed stream, no file is watched, and after the feed's LISTEN connection is killed the
next append still wakes it (the feed reconnects and wakes once): a lost notification costs
nothing, since the catch-up reads after the last sequence it folded.

What is counted is the catch-ups the engine runs (``Live.catch_ups``); the events are the
store suite's test events, which the intent domain does not fold (its refusal is logged):
folding is the service's part, tested with the domains.
"""

from __future__ import annotations

import asyncio
import subprocess
import sys
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from urllib.parse import urlsplit

import psycopg
import pytest

from loopstate.core.postgres.events import client_name
from loopstate.service.engine import Service
from loopstate.service.live import Live
from tests.conftest import REPO
from tests.pg.pg_cluster import shared_cluster

CHILD = REPO / "tests" / "store" / "store_child.py"


def run_until(loop: asyncio.AbstractEventLoop, done, timeout: float = 20.0) -> None:
    async def wait() -> None:
        deadline = time.monotonic() + timeout
        while not done():
            assert time.monotonic() < deadline, "timed out"
            await asyncio.sleep(0.01)
    loop.run_until_complete(wait())


def other_machine_appends(url: str, root: Path, data_dir: Path, stream: str) -> None:
    done = subprocess.run([sys.executable, str(CHILD), url, str(root), str(data_dir), stream, "1"],
                          capture_output=True, text=True, timeout=60)
    assert done.returncode == 0, done.stderr


@pytest.mark.slow
def test_appends_on_another_connection_wake_one_catch_up_of_the_followed_stream(
        root, data_dir, tmp_path, pg_url, monkeypatch, request):
    monkeypatch.setenv("LOOPSTATE_STORE", pg_url)
    service = Service(data_dir=data_dir)
    project, domain = service.project(str(root)), service.domains["intent"]
    loop = asyncio.new_event_loop()
    with ThreadPoolExecutor(1) as worker:
        live = Live(service, worker, loop)
        live.follow(project, domain, "intent")
        run_until(loop, lambda: live.catch_ups >= 1)  # the follow's own first catch-up
        assert live.watcher.targets == {}  # a shared store: no folder is watched
        (feed,) = live._feeds.values()

        for expected in (2, 3):
            other_machine_appends(pg_url, root, tmp_path / "machine-b", "intent")
            run_until(loop, lambda: live.catch_ups >= expected)
        loop.run_until_complete(asyncio.sleep(0.3))
        assert live.catch_ups == 3  # one per append
        other_machine_appends(pg_url, root, tmp_path / "machine-b", "goals.g1")  # another stream: not followed
        loop.run_until_complete(asyncio.sleep(0.5))
        assert live.catch_ups == 3

        # The feed's LISTEN connection dies: it reconnects and wakes once, and the next append is seen.
        cluster = shared_cluster(request.config)
        dbname = urlsplit(pg_url).path.lstrip("/")
        connects = feed.feed.connects
        with psycopg.connect(cluster.dsn(), autocommit=True) as admin:  # every connection of this process
            killed = admin.execute("SELECT pg_terminate_backend(pid) FROM pg_stat_activity WHERE datname = %s "
                                   "AND application_name IN (%s, %s)",
                                   (dbname, client_name(), f"{client_name()} feed"[:63])).fetchall()
        assert killed
        other_machine_appends(pg_url, root, tmp_path / "machine-b", "intent")
        run_until(loop, lambda: live.catch_ups >= 4)
        run_until(loop, lambda: feed.feed.connects > connects)

        live.unfollow(project, "intent")
        assert live._feeds == {}
        live.close()
    loop.close()
