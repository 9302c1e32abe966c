"""Issue 26: two "machines" on one PostgreSQL: two data dirs, two clones, two `loopstate serve` sidecars over
real stdio, one real server. A claim made through one reaches the other's subscriber; `run stop` on one halts
a run leased on the other, and the other's `loopstate hook` PreToolUse denies with no STOP file of its own."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from pathlib import Path

import pytest

from loopstate_protocol.client import LoopstateClient
from tests.hooks.hookkit import claude_input, denial_of, hook


SERVE = [sys.executable, "-m", "loopstate.cli.main", "serve"]
ACTOR = {"harness": "manual", "actor": "tester", "session_id": "s-1"}


class Machine:
    """One machine: its clone of the project, its data dir, its sidecar."""

    def __init__(self, name: str, base: Path, origin: Path, pg_user: str) -> None:
        self.root = base / name / "work"
        self.data_dir = base / name / "data"
        self.root.parent.mkdir(parents=True)
        subprocess.run(["git", "clone", "-q", str(origin), str(self.root)], check=True, capture_output=True, timeout=60)
        self.env = {k: v for k, v in os.environ.items() if k != "LOOPSTATE_STORE"}
        self.env.update(LOOPSTATE_DATA_DIR=str(self.data_dir), PGUSER=pg_user)
        self.log = open(base / f"{name}-serve.log", "wb")
        self.client = LoopstateClient(SERVE, env=self.env, stderr=self.log, cwd=str(self.root)).start()
        self.client.initialize()

    def cli(self, *args: str) -> dict:
        done = subprocess.run([sys.executable, "-m", "loopstate.cli.main", *args, "--root", str(self.root), "--json"],
                              capture_output=True, text=True, env=self.env, timeout=60)
        assert done.returncode == 0, f"{args}: {done.stderr}{done.stdout}"
        return json.loads(done.stdout)

    def close(self) -> None:
        self.client.close()
        self.log.close()


def next_change(client: LoopstateClient, sub_id: str, until, timeout: float = 30.0):
    deadline = time.monotonic() + timeout
    while True:
        note = client.next_change(max(0.1, deadline - time.monotonic()))
        if note.subscription_id == sub_id and until(note):
            return note


@pytest.fixture
def machines(tmp_path: Path, team_url: str, pg_user: str):
    origin = tmp_path / "origin"
    origin.mkdir()
    git = ["git", "-c", "user.name=t", "-c", "user.email=t@example.org"]
    subprocess.run(["git", "init", "-q"], cwd=origin, check=True, timeout=60)
    subprocess.run([sys.executable, "-m", "loopstate.cli.main", "init", "--store", team_url, "--root", str(origin)],
                   check=True, capture_output=True, timeout=60, env={**os.environ, "LOOPSTATE_DATA_DIR": str(tmp_path / "o")})
    subprocess.run([*git, "add", ".gitignore", ".loopstate/store.json"], cwd=origin, check=True, timeout=60)
    subprocess.run([*git, "commit", "-q", "-m", "the team's store"], cwd=origin, check=True, timeout=60)
    pair = [Machine("a", tmp_path, origin, pg_user), Machine("b", tmp_path, origin, pg_user)]
    yield pair
    for machine in pair:
        machine.close()


@pytest.mark.slow
def test_a_claim_on_one_machine_reaches_the_others_subscriber(machines):
    a, b = machines
    sub = b.client.subscribe(str(b.root), "intent/snapshot")
    task_id = a.client.execute(str(a.root), {"kind": "intent.task_start", "label": "shared"}, "start-1").events[0]["task_id"]
    added = a.client.execute(str(a.root), {"kind": "intent.claim_add", "task_id": task_id, "claim": {
        "statement": "one history for the team", "role": "user", "epistemic_status": "explicit",
        "facets": ["outcome"]}}, "claim-1")
    head = added.head.sequence
    note = next_change(b.client, sub.subscription_id, lambda n: n.head.sequence >= head)
    assert "one history for the team" in json.dumps(note.snapshot)
    assert not list(b.data_dir.rglob("*.jsonl")) and not list(a.data_dir.rglob("*.jsonl"))  # all in PostgreSQL


@pytest.mark.slow
def test_run_stop_on_one_machine_halts_the_others_run_and_its_hook_denies(machines):
    a, b = machines
    run_id = b.cli("run", "create", "--objective", "work on b", "--done-gate", "tests pass", "--asset", "app")["run_id"]
    b.cli("run", "acquire", run_id, "--harness", "codex", "--actor", "bot-b")
    pre = claude_input("PreToolUse", b.root, "session-b")
    assert denial_of(hook("claude", "PreToolUse", pre, data_dir=b.data_dir, cwd=b.root, env=b.env)) is None
    runs = b.client.subscribe(str(b.root), "project/runs")

    stopped = a.client.execute(str(a.root), {"kind": "project.stop", "actor": ACTOR}, "stop-1")
    assert stopped.project.halted == [run_id] and stopped.project.state.set
    next_change(b.client, runs.subscription_id, lambda n: n.snapshot["runs"][0]["status"] == "halted_kill_switch")
    assert not (b.root / ".loopstate" / "STOP").exists()  # machine b has no switch file of its own
    denied = denial_of(hook("claude", "PreToolUse", pre, data_dir=b.data_dir, cwd=b.root, env=b.env))
    assert denied is not None and "shared store" in denied

    a.client.execute(str(a.root), {"kind": "project.resume", "actor": ACTOR}, "resume-1")
    assert denial_of(hook("claude", "PreToolUse", pre, data_dir=b.data_dir, cwd=b.root, env=b.env)) is None
