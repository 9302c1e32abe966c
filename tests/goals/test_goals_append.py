"""`goals.append`: a lifecycle event in the seed's own shape, held to the typed commands' rules."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import msgspec
import pytest
from goalkit import Harness

from loopstate_protocol import goals as g
from loopstate_protocol.errors import ErrorCode

from loopstate.core.errors import LoopstateError

pytestmark = pytest.mark.both_stores  # docs/storage.md, *Which tests run on PostgreSQL*


def _append(h: Harness, event_type: str, payload: dict, **envelope):
    return h.run(g.AppendEvent(goal_id="g", event_type=event_type, payload=payload, **envelope))


def test_seed_shaped_events_replay_into_the_same_board_as_typed_commands(h: Harness) -> None:
    typed = [
        g.AddTodo(goal_id="t", todo_id="T1", title="first", priority="P0", planner_order=1),
        g.AddGate(goal_id="t", gate_id="G1", title="approve", gate_kind="owner", todo_id="T1"),
        g.BlockTodo(goal_id="t", todo_id="T1", reason="waiting", gate_ids=["G1"]),
        g.ResolveGate(goal_id="t", gate_id="G1", decision="approve"),
        g.RecordRun(goal_id="t", run_id="run-1", status="succeeded"),
        g.CompleteTodo(goal_id="t", todo_id="T1", rationale="merged", evidence_ids=["E9"]),
        g.SpendQuota(goal_id="t", amount=2.5, unit="usd"),
    ]
    for command in typed:
        h.run(command)
    for event in h.events("t"):
        _append(h, event["event_type"], event["payload"])
    def board(goal: str) -> dict:
        return {k: v for k, v in msgspec.to_builtins(h.ask(g.GetBoard(goal_id=goal))).items() if k != "meta"}

    assert board("g") == board("t")
    assert [e["payload"] for e in h.events("g")] == [e["payload"] for e in h.events("t")]


def test_appending_the_same_event_id_and_body_is_a_no_op_and_a_different_body_a_conflict(h: Harness) -> None:
    payload = {"todo_id": "T1", "title": "first"}
    first = _append(h, "todo_added", payload, event_id="loopx-1", producer="loopx.todo",
                    recorded_at="2026-03-02T13:00:00+01:00")
    assert first.events[0]["recorded_at"] == "2026-03-02T12:00:00Z" and first.events[0]["producer"] == "loopx.todo"
    assert _append(h, "todo_added", dict(payload), event_id="loopx-1", producer="loopx.todo",
                   recorded_at="2026-03-02T12:00:00Z").events == []
    with pytest.raises(LoopstateError) as conflict:
        _append(h, "todo_added", {**payload, "title": "other"}, event_id="loopx-1", producer="loopx.todo")
    assert conflict.value.code is ErrorCode.EVENT_ID_CONFLICT
    assert len(h.events("g")) == 1


@pytest.mark.parametrize("event_type, payload, code, says", [
    ("todo_added", {"todo_id": "T1", "title": "x", "colour": "red"}, ErrorCode.VALIDATION_FAILED, "takes: todo_id"),
    ("todo_added", {"title": "x"}, ErrorCode.VALIDATION_FAILED, "todo_id"),
    ("todo_claimed", {"todo_id": "T404", "claimed_by": "a"}, ErrorCode.NOT_FOUND, "T404"),
    ("todo_claimed", {"todo_id": "T1", "claimed_by": "a", "lease_expires_at": "tomorrow"}, ErrorCode.VALIDATION_FAILED,
     "lease_expires_at"),
    ("todo_added", {"todo_id": "T1", "title": "again"}, ErrorCode.RULE_VIOLATION, "already exists"),
    ("refresh_recorded", {"refresh_kind": "progress", "summary": "see /home/alice/x"}, ErrorCode.PRIVACY_VIOLATION,
     "local path"),
    ("quota_spent", {"amount": -1, "unit": "usd"}, ErrorCode.VALIDATION_FAILED, "amount"),
])
def test_seed_shaped_events_are_refused_like_typed_ones(h: Harness, event_type, payload, code, says) -> None:
    _append(h, "todo_added", {"todo_id": "T1", "title": "first"})
    with pytest.raises(LoopstateError) as refused:
        _append(h, event_type, payload)
    assert refused.value.code is code and says in refused.value.message
    assert len(h.events("g")) == 1


def test_bookkeeping_events_cannot_be_appended_raw(h: Harness) -> None:
    for event_type in ("projection_rendered", "snapshot_compacted"):
        with pytest.raises(LoopstateError) as refused:
            h.run(g.AppendEvent(goal_id="g", event_type=event_type, payload={}))  # type: ignore[arg-type]
        assert refused.value.code is ErrorCode.INVALID_PARAMS and "event_type" in refused.value.message
    assert not h.stream_path("g").exists()


def test_the_cli_appends_a_json_payload_from_an_argument_or_stdin(data_dir: Path, root: Path) -> None:
    env = {**os.environ, "LOOPSTATE_DATA_DIR": str(data_dir)}

    def cli(*args: str, stdin: str | None = None) -> subprocess.CompletedProcess:
        return subprocess.run([sys.executable, "-m", "loopstate.cli.main", "goals", "append", "g", *args,
                               "--root", str(root), "--json"], input=stdin, capture_output=True, text=True,
                              env=env, timeout=60)

    done = cli("todo_added", '{"todo_id": "T1", "title": "first"}', "--event-id", "loopx-1")
    assert done.returncode == 0 and json.loads(done.stdout)["events"][0]["event_id"] == "loopx-1"
    piped = cli("todo_claimed", "-", stdin='{"todo_id": "T1", "claimed_by": "codex"}')
    assert piped.returncode == 0 and json.loads(piped.stdout)["events"][0]["event_type"] == "todo_claimed"
    bad = cli("todo_added", "[1, 2]")
    assert bad.returncode == 1 and json.loads(bad.stdout)["error"]["code"] == "INVALID_PARAMS"
