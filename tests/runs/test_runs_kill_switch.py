"""The kill switch: checked at every command boundary, halts and never authorizes."""

from __future__ import annotations

import json
import os
import subprocess
from pathlib import Path

import pytest

from loopstate_protocol import runs as proto
from loopstate_protocol.errors import ErrorCode

from loopstate.core.errors import LoopstateError
from tests.runs.conftest import AGENT, USER, lease_args, write_json
from tests.runs.schemas import THE_LOOP
from tests.conftest import needs_conformance

pytestmark = pytest.mark.both_stores  # docs/storage.md, *Which tests run on PostgreSQL*

INTEND = {"completion_event_type": "stage_started", "completion_data": {"stage": "build"},
          "action": "local_write", "destination": "repository"}


def refused(h, command, code: ErrorCode) -> LoopstateError:
    with pytest.raises(LoopstateError) as info:
        h.run(command)
    assert info.value.code == code, info.value
    return info.value


def stop_file(root: Path) -> Path:
    return root / ".loopstate" / "STOP"


def test_stop_file_created_by_another_process_halts_an_active_run_at_its_next_command(h, root):
    run_id, lease = h.leased()
    stop_file(root).parent.mkdir()
    subprocess.run(["touch", str(stop_file(root))], check=True)
    error = refused(h, proto.Heartbeat(run_id=run_id, **lease_args(lease)), ErrorCode.KILL_SWITCH)
    assert ".loopstate/STOP" in error.message
    assert [e["type"] for e in error.details["events"]] == ["kill_switch_detected"]
    status = h.status(run_id)
    assert status.run["status"] == "halted_kill_switch" and status.run["terminal_reason"]["code"] == "kill_switch"
    assert h.events(run_id)[-1]["data"] == {"path": ".loopstate/STOP"}


def test_halted_run_sends_halted_kill_switch_to_a_status_view_listener(h, root):
    run_id, lease = h.leased()
    seen = []
    h.service.add_listener(lambda project, stream, news: seen.extend(
        (stream, r.event["projection"]["run"]["status"]) for r in news.records))
    stop_file(root).parent.mkdir()
    stop_file(root).touch()
    h.run(proto.Sync(run_id=run_id))
    assert seen == [(f"runs.{run_id}", "halted_kill_switch")]
    _, view = h.service.view(h.root, "runs", "status", run_id)
    assert view.run["status"] == "halted_kill_switch"


def test_kill_switch_is_lease_independent_and_reduces_every_recoverable_state(h, root):
    runs = {}
    for target in ("waiting_approval", "waiting_external", "blocked", "failed"):
        run_id, lease = h.leased()
        h.run(proto.Transition(run_id=run_id, to=target, reason="x", **lease_args(lease)))
        runs[run_id] = target
    ready = h.create()
    h.clock.advance(1000)  # every lease has long expired: the halt needs none
    stop_file(root).parent.mkdir()
    stop_file(root).touch()
    for run_id in [*runs, ready]:
        events = h.run(proto.Sync(run_id=run_id)).events
        assert [e["type"] for e in events] == ["kill_switch_detected"]
        assert events[0]["lease_id"] is None and events[0]["projection"]["run"]["status"] == "halted_kill_switch"


def test_kill_switch_never_authorizes_resume_or_acquire(h, root):
    run_id, lease = h.leased()
    stop_file(root).parent.mkdir()
    stop_file(root).touch()
    h.run(proto.Sync(run_id=run_id))
    error = refused(h, proto.Resume(run_id=run_id, owner=AGENT, reason="go", **lease_args(lease)), ErrorCode.KILL_SWITCH)
    assert "remove it yourself" in error.message
    with pytest.raises(LoopstateError) as info:
        h.create()
    assert info.value.code == ErrorCode.KILL_SWITCH
    stop_file(root).unlink()
    assert h.run(proto.Resume(run_id=run_id, owner=AGENT, reason="go", **lease_args(lease))).events[-1]["type"] == "recovery_started"


def test_unreadable_kill_switch_halts(h, root):
    run_id, lease = h.leased()
    (root / ".loopstate").write_text("a file where the switch folder should be")
    error = refused(h, proto.Heartbeat(run_id=run_id, **lease_args(lease)), ErrorCode.KILL_SWITCH)
    assert "unreadable" in error.message


def test_kill_switch_as_a_symlink_or_folder_still_halts(h, root):
    run_id, lease = h.leased()
    (root / ".loopstate").mkdir()
    os.symlink("/nonexistent/target", stop_file(root))
    refused(h, proto.StageStart(run_id=run_id, stage="build", **lease_args(lease)), ErrorCode.KILL_SWITCH)


@needs_conformance
def test_configured_external_kill_switch_is_checked(h, root, tmp_path):
    config = json.loads((THE_LOOP / "fixtures/valid/config.json").read_text())
    external = tmp_path / "elsewhere" / "HALT"
    write_json(root / ".loopstate" / "config.json", {**config, "kill_switches": [".loopstate/STOP", str(external)]})
    run_id, lease = h.leased()
    external.parent.mkdir()
    external.touch()
    refused(h, proto.Heartbeat(run_id=run_id, **lease_args(lease)), ErrorCode.KILL_SWITCH)
    assert h.events(run_id)[-1]["data"] == {"path": str(external)}


@needs_conformance
def test_invalid_config_refuses_run_mutation(h, root):
    run_id, lease = h.leased()
    config = json.loads((THE_LOOP / "fixtures/valid/config.json").read_text())
    write_json(root / ".loopstate" / "config.json", {**config, "telemetry": True})
    error = refused(h, proto.Heartbeat(run_id=run_id, **lease_args(lease)), ErrorCode.VALIDATION_FAILED)
    assert error.details["field"] == "$.telemetry"


def test_run_stop_creates_the_switch_and_halts(h, root):
    run_id, _ = h.leased()
    events = h.run(proto.Stop(run_id=run_id, actor=USER)).events
    assert [e["type"] for e in events] == ["kill_switch_detected"]
    assert stop_file(root).is_file() and oct(stop_file(root).stat().st_mode & 0o777) == "0o600"


def test_run_stop_cancel_cancels_without_a_lease(h):
    run_id, _ = h.leased()
    h.clock.advance(1000)
    events = h.run(proto.Stop(run_id=run_id, actor=USER, cancel=True, reason="not needed")).events
    assert [e["type"] for e in events] == ["run_failed", "run_cancelled"]  # the expired run's truth first
    assert events[1]["projection"]["run"]["terminal_reason"] == {"code": "cancelled", "explanation": "not needed"}


def test_kill_switch_after_an_intent_reconciles_it_as_unknown_then_halts(h, root):
    run_id, lease = h.leased()
    h.run(proto.Intend(run_id=run_id, **INTEND, **lease_args(lease)))
    stop_file(root).parent.mkdir()
    stop_file(root).touch()
    events = h.run(proto.Sync(run_id=run_id)).events
    assert [e["type"] for e in events] == ["operation_reconciled", "kill_switch_detected"]
    assert events[0]["data"]["outcome"] == "unknown"
    assert events[1]["projection"]["run"]["status"] == "halted_kill_switch"


def test_completion_reported_while_the_switch_stands_is_recorded_then_the_run_halts(h, root):
    run_id, lease = h.leased()
    pending = h.run(proto.Intend(run_id=run_id, **INTEND, **lease_args(lease))).events[0]["data"]
    stop_file(root).parent.mkdir()
    stop_file(root).touch()
    events = h.run(proto.Complete(run_id=run_id, operation_id=pending["operation_id"], completion_event_type="stage_started",
                                  completion_data={"stage": "build"}, **lease_args(lease))).events
    assert [e["type"] for e in events] == ["stage_started", "kill_switch_detected"]


def test_exact_retry_of_a_halted_command_reports_the_same_refusal(h, root):
    run_id, lease = h.leased()
    stop_file(root).parent.mkdir()
    stop_file(root).touch()
    command = proto.StageStart(run_id=run_id, stage="build", **lease_args(lease))
    with pytest.raises(LoopstateError) as first:
        h.run(command, request_id="start-1")
    with pytest.raises(LoopstateError) as again:
        h.run(command, request_id="start-1")
    assert first.value.code == again.value.code == ErrorCode.KILL_SWITCH
    assert first.value.details["events"] == again.value.details["events"]
    assert [e["type"] for e in h.events(run_id)].count("kill_switch_detected") == 1


def test_stop_naming_a_missing_run_sets_no_switch(h, root):
    refused(h, proto.Stop(run_id="00000000-0000-4000-8000-00000000abcd", actor=USER), ErrorCode.NOT_FOUND)
    assert not stop_file(root).exists()


WORKER_COMMANDS = {
    "heartbeat": lambda run_id, held: proto.Heartbeat(run_id=run_id, **held),
    "transition": lambda run_id, held: proto.Transition(run_id=run_id, to="blocked", reason="x", **held),
    "stage_start": lambda run_id, held: proto.StageStart(run_id=run_id, stage="build", **held),
    "stage_complete": lambda run_id, held: proto.StageComplete(run_id=run_id, stage="strategize", outcome="passed", **held),
    "issue_open": lambda run_id, held: proto.IssueOpen(run_id=run_id, title="t", severity="low", blocking=False, **held),
    "evidence_add": lambda run_id, held: proto.EvidenceAdd(run_id=run_id, evidence={}, **held),
    "intend": lambda run_id, held: proto.Intend(run_id=run_id, **INTEND, **held),
    "resume": lambda run_id, held: proto.Resume(run_id=run_id, owner=AGENT, reason="x", **held),
}


@pytest.mark.parametrize("name", sorted(WORKER_COMMANDS))
def test_every_run_command_checks_the_kill_switch_at_its_boundary(h, root, name):
    run_id, lease = h.leased()
    stop_file(root).parent.mkdir()
    stop_file(root).touch()
    error = refused(h, WORKER_COMMANDS[name](run_id, lease_args(lease)), ErrorCode.KILL_SWITCH)
    assert [e["type"] for e in error.details["events"]] == ["kill_switch_detected"]
    assert h.status(run_id).run["status"] == "halted_kill_switch"


def test_a_halted_run_refuses_acquire_saying_to_remove_the_switch_then_resume(h, root):
    run_id = h.create()
    stop_file(root).parent.mkdir()
    stop_file(root).touch()
    error = refused(h, proto.Acquire(run_id=run_id, owner=AGENT), ErrorCode.KILL_SWITCH)
    assert "remove it yourself, then recover with `loopstate run resume`" in error.message
    stop_file(root).unlink()
    error = refused(h, proto.Acquire(run_id=run_id, owner=AGENT), ErrorCode.INVALID_TRANSITION)
    assert "recover it with `loopstate run resume`" in error.message
    event = h.run(proto.Resume(run_id=run_id, owner=AGENT, reason="switch cleared")).events[-1]
    assert event["type"] == "recovery_started"
    assert event["data"] == {"previous_generation": None, "new_generation": 0, "reason": "switch cleared"}


@needs_conformance
def test_a_state_root_that_leads_out_of_the_project_through_a_link_is_refused(h, root, tmp_path):
    run_id, lease = h.leased()
    outside = tmp_path / "elsewhere"
    outside.mkdir()
    (root / "state").symlink_to(outside)
    config = json.loads((THE_LOOP / "fixtures/valid/config.json").read_text())
    write_json(root / ".loopstate" / "config.json", {**config, "state_root": "state"})
    error = refused(h, proto.Heartbeat(run_id=run_id, **lease_args(lease)), ErrorCode.VALIDATION_FAILED)
    assert (error.details["field"], error.details["rule"]) == ("$.state_root", "path_inside_project")
    assert "outside the project" in error.message
    write_json(root / ".loopstate" / "config.json", {**config, "state_root": ".the-loop"})
    h.run(proto.Heartbeat(run_id=run_id, **lease_args(lease)))


def test_the_seeds_default_stop_path_halts_too(h, root):
    run_id, lease = h.leased()
    (root / ".the-loop").mkdir()
    (root / ".the-loop" / "STOP").touch()
    error = refused(h, proto.Heartbeat(run_id=run_id, **lease_args(lease)), ErrorCode.KILL_SWITCH)
    assert error.details["path"] == ".the-loop/STOP"
    assert h.status(run_id).run["status"] == "halted_kill_switch"


def test_a_stop_refused_for_a_bad_actor_leaves_no_switch_behind(h, root):
    run_id, _ = h.leased()
    with pytest.raises(LoopstateError) as info:
        h.run(proto.Stop(run_id=run_id, actor={"harness": "codex"}))
    assert info.value.details["field"] == "$.actor"
    assert not stop_file(root).exists()
    assert h.status(run_id).run["status"] == "active"


def test_a_run_failed_on_its_budget_keeps_its_reason_under_a_later_kill_switch(h, root):
    """A terminal reason never changes: the budget failure cannot be recovered, so the switch has nothing to halt."""
    run_id, lease = h.leased(budgets={"max_duration_seconds": 7200, "max_stage_attempts": 3, "max_mutations": 1,
                                      "max_external_actions": 0, "max_cost_usd": None})
    pending = h.run(proto.Intend(run_id=run_id, **INTEND, **lease_args(lease))).events[0]["data"]
    h.run(proto.Complete(run_id=run_id, operation_id=pending["operation_id"], completion_event_type="stage_started",
                         completion_data={"stage": "build"}, **lease_args(lease)))
    failed = h.status(run_id).run
    assert failed["status"] == "failed" and failed["terminal_reason"]["code"].startswith("budget_reached")
    # the control: a run failed for a reason recovery can lift is halted by the same switch
    other, other_lease = h.leased()
    h.run(proto.Transition(run_id=other, to="failed", reason="x", **lease_args(other_lease)))
    stop_file(root).parent.mkdir()
    stop_file(root).touch()
    assert h.run(proto.Sync(run_id=run_id)).events == []
    assert h.status(run_id).run["terminal_reason"] == failed["terminal_reason"]
    assert [e["type"] for e in h.run(proto.Sync(run_id=other)).events] == ["kill_switch_detected"]
