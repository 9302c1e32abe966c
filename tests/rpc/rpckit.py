"""Helpers for the sidecar tests: real `loopstate serve` processes over real stdio."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path
from contextlib import contextmanager
from typing import Any, Iterator

import msgspec
import pytest

from loopstate_protocol.client import LoopstateClient

SERVE = [sys.executable, "-m", "loopstate.cli.main", "serve", *os.environ.get("LOOPSTATE_TEST_SERVE_ARGS", "").split()]
CLI = [sys.executable, "-m", "loopstate.cli.main"]


def frame(payload: object) -> bytes:
    return msgspec.json.encode(payload)


class Servers:
    """Starts servers on one data dir and closes them all at the end of the test."""

    def __init__(self, data_dir: Path, logs: Path) -> None:
        self.data_dir = data_dir
        self.logs = logs
        self.started: list[LoopstateClient] = []

    def env(self) -> dict[str, str]:
        return dict(os.environ, LOOPSTATE_DATA_DIR=str(self.data_dir))

    def start(self, *, initialize: bool = True) -> LoopstateClient:
        log = open(self.logs / f"serve-{len(self.started)}.log", "wb")
        client = LoopstateClient(SERVE, env=self.env(), stderr=log).start()
        log.close()
        self.started.append(client)
        if initialize:
            client.initialize()
        return client

    def close(self) -> None:
        for client in self.started:
            client.close()


@contextmanager
def module_server(factory: pytest.TempPathFactory, name: str, **options: Any) -> Iterator[tuple[LoopstateClient, Path]]:
    """One initialized server on its own data dir, for a module's worth of tests.

    Yields the client and the folder holding ``workspace/`` (a project root),
    ``data/`` and ``serve.log`` (the server's stderr); ``options`` go to LoopstateClient.
    """
    base = factory.mktemp(name)
    (base / "workspace").mkdir()
    env = dict(os.environ, LOOPSTATE_DATA_DIR=str(base / "data"))
    with open(base / "serve.log", "wb") as log:
        client = LoopstateClient(SERVE, env=env, stderr=log, **options).start()
    client.initialize()
    yield client, base


def run_cli(data_dir: Path, *args: str) -> subprocess.CompletedProcess[str]:
    env = dict(os.environ, LOOPSTATE_DATA_DIR=str(data_dir))
    return subprocess.run([*CLI, *args], env=env, capture_output=True, text=True, timeout=60)


def task_start(label: str = "demo") -> dict:
    return {"kind": "intent.task_start", "label": label}


def claim_add(task_id: str, statement: str) -> dict:
    return {"kind": "intent.claim_add", "task_id": task_id, "claim": {
        "statement": statement, "role": "user", "epistemic_status": "explicit", "facets": ["outcome"],
    }}


WRITER = str(Path(__file__).with_name("rpc_writer.py"))


def start_writer(data_dir: Path, root: Path, count: int, prefix: str, pause: float = 0.0) -> subprocess.Popen[bytes]:
    """Another process appending ``count`` intent commands through its own Service."""
    env = dict(os.environ, LOOPSTATE_DATA_DIR=str(data_dir))
    return subprocess.Popen([sys.executable, WRITER, str(root), str(count), prefix, str(pause)], env=env)


def stream_log(data_dir: Path, root: Path, stream: str = "intent") -> dict:
    """`loopstate log --json` for one stream: its head and every event."""
    done = run_cli(data_dir, "log", "--json", "--root", str(root), "--stream", stream)
    assert done.returncode == 0, done.stderr
    (only,) = msgspec.json.decode(done.stdout)["streams"]
    return only


def changes_until(client: LoopstateClient, subscription_id: str, sequence: int, timeout: float = 30.0) -> list:
    """This subscription's loopstate/changed notifications, in order, up to head ``sequence``.

    Notifications for the client's other subscriptions are kept, in order, for later calls.
    """
    from loopstate_protocol.messages import ChangedNotification

    stash: dict[str, list] = client.__dict__.setdefault("stash", {})
    out: list[ChangedNotification] = []
    while not out or out[-1].head.sequence < sequence:
        mine = stash.get(subscription_id)
        if mine:
            params = mine.pop(0)
        else:
            method, params = client.next_notification(timeout)
            if method != "loopstate/changed":
                stash.setdefault(method, []).append(params)
                continue
            if params["subscription_id"] != subscription_id:
                stash.setdefault(params["subscription_id"], []).append(params)
                continue
        out.append(msgspec.convert(params, ChangedNotification))
    return out


# Fixtures live here, not in a tests/rpc/conftest.py: another module named
# `conftest` would shadow tests/conftest.py for `from conftest import ...`.
# Test modules import the ones they use.

@pytest.fixture
def servers(data_dir: Path, tmp_path: Path) -> Iterator[Servers]:
    """A pool of real `loopstate serve` processes on the test's data dir, closed at the end."""
    logs = tmp_path / "logs"
    logs.mkdir()
    pool = Servers(data_dir, logs)
    yield pool
    pool.close()


@pytest.fixture
def client(servers: Servers) -> LoopstateClient:
    """One initialized server."""
    return servers.start()
