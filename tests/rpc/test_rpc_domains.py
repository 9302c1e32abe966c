"""End to end with the runs and goals domains: what an editor subscribed to them sees."""

from __future__ import annotations

import datetime as dt
import subprocess
import uuid
from pathlib import Path

import pytest

from rpckit import servers, Servers, stream_log  # noqa: F401 (fixtures)

from loopstate_protocol.client import LoopstateClient
from loopstate_protocol.messages import ChangedNotification

pytestmark = pytest.mark.both_stores  # docs/storage.md, *Which tests run on PostgreSQL*

AGENT = {"harness": "codex", "actor": "synthetic-agent", "session_id": "session-1"}
USER = {"harness": "manual", "actor": "synthetic-user", "session_id": "terminal"}
ASSET = {"name": "synthetic-asset", "root": ".", "track": "code", "boundaries": ["repository-local files"]}
SCOPE = {"assets": ["synthetic-asset"], "actions": ["local_write"], "destinations": ["repository"], "exclusions": []}


def active_run(harness: LoopstateClient, root: str) -> str:
    grant_id, run_id = str(uuid.uuid4()), str(uuid.uuid4())
    expires = (dt.datetime.now(dt.timezone.utc) + dt.timedelta(hours=2)).strftime("%Y-%m-%dT%H:%M:%SZ")
    harness.execute(root, {"kind": "runs.authority_grant", "grant_id": grant_id, "level": "bounded",
                           "actor": "synthetic-user", "scope": SCOPE, "risks_shown": ["Local files may change."],
                           "confirmation_text": "CONFIRM", "expires_at": expires})
    harness.execute(root, {"kind": "runs.create", "run_id": run_id, "asset": ASSET, "objective": "One artifact.",
                           "done_gate": ["The check passes."], "authority_grant_id": grant_id, "actor": USER})
    harness.execute(root, {"kind": "runs.acquire", "run_id": run_id, "owner": AGENT})
    return run_id


def next_changed(client: LoopstateClient, subscription_id: str) -> ChangedNotification:
    while True:
        change = client.next_change(30)
        if isinstance(change, ChangedNotification) and change.subscription_id == subscription_id:
            return change


def test_a_stop_file_created_by_another_process_halts_the_run_and_the_editor_sees_it(
        servers: Servers, root: Path, data_dir: Path) -> None:
    harness, editor = servers.start(), servers.start()
    run_id = active_run(harness, str(root))
    sub = editor.subscribe(str(root), f"runs/status/{run_id}")
    assert sub.snapshot["run"]["status"] == "active"

    subprocess.run(["sh", "-c", "mkdir -p .loopstate && touch .loopstate/STOP"], cwd=root, check=True)

    change = next_changed(editor, sub.subscription_id)
    while change.snapshot["run"]["status"] != "halted_kill_switch":
        change = next_changed(editor, sub.subscription_id)
    log = stream_log(data_dir, root, f"runs.{run_id}")
    assert change.head.sequence == log["head"]["sequence"]
    assert "kill_switch_detected" in [e["type"] for e in log["events"]]
    assert harness.query(str(root), {"kind": "runs.status", "run_id": run_id})["run"]["status"] == "halted_kill_switch"


@pytest.mark.slow
def test_a_run_subscribed_while_the_stop_file_stands_is_halted_at_once(servers: Servers, root: Path) -> None:
    harness, editor = servers.start(), servers.start()
    run_id = active_run(harness, str(root))
    (root / ".loopstate").mkdir(exist_ok=True)
    (root / ".loopstate" / "STOP").touch()
    sub = editor.subscribe(str(root), f"runs/status/{run_id}")
    change = next_changed(editor, sub.subscription_id)
    assert change.snapshot["run"]["status"] == "halted_kill_switch"


@pytest.mark.slow
def test_a_goal_board_subscriber_receives_each_change_with_its_last_append_sequence(
        servers: Servers, root: Path, data_dir: Path) -> None:
    editor, harness = servers.start(), servers.start()
    sub = editor.subscribe(str(root), "goals/board/demo-goal")
    assert sub.snapshot["meta"]["last_append_sequence"] == 0
    steps = [
        {"kind": "goals.add", "goal_id": "demo-goal", "title": "Write the parser", "todo_id": "t1"},
        {"kind": "goals.add", "goal_id": "demo-goal", "title": "Test the parser", "todo_id": "t2"},
        {"kind": "goals.claim", "goal_id": "demo-goal", "todo_id": "t1", "claimed_by": "agent"},
        {"kind": "goals.complete", "goal_id": "demo-goal", "todo_id": "t1", "rationale": "The parser tests pass."},
    ]
    for n, command in enumerate(steps, start=1):
        outcome = harness.execute(str(root), command)
        change = next_changed(editor, sub.subscription_id)
        assert change.head == outcome.head
        assert change.previous_sequence == outcome.head.sequence - 1
        assert change.snapshot["meta"]["last_append_sequence"] == n
    log = stream_log(data_dir, root, "goals.demo-goal")
    assert change.head.hash == log["head"]["hash"]
