"""Property: whatever sequence of commands a harness, a user and the clock produce, the audit log keeps its invariants.

Hypothesis draws command sequences (with time passing, kill switches appearing
and disappearing, revocations, intents left open, budgets running out) against
a real store. Refusals are fine; what is written must always satisfy the seed.
"""

from __future__ import annotations

import pytest
import tempfile
from decimal import Decimal
from pathlib import Path

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from loopstate_protocol import runs as proto
from loopstate_protocol.errors import ErrorCode

from loopstate.core.errors import LoopstateError
from loopstate.core.clock import parse_time
from loopstate.domains.runs import budgets
from tests.runs.conftest import AGENT, OTHER, USER, Harness, check_store_against_schemas

STAGES = ("strategize", "spec_pack", "build", "test", "resolve", "close")
TIGHT = {"max_duration_seconds": 400, "max_stage_attempts": 2, "max_mutations": 3, "max_external_actions": 1,
         "max_cost_usd": "0.5"}
WIDE = {"assets": ["*"], "actions": ["*"], "destinations": ["*"], "exclusions": ["forbidden"]}
EXPECTED_REFUSALS = {
    ErrorCode.LEASE_HELD, ErrorCode.LEASE_EXPIRED, ErrorCode.LEASE_MISMATCH, ErrorCode.KILL_SWITCH,
    ErrorCode.AUTHORITY_DENIED, ErrorCode.BUDGET_EXHAUSTED, ErrorCode.INVALID_TRANSITION, ErrorCode.RULE_VIOLATION,
    ErrorCode.NOT_FOUND,
}

common = [
    st.tuples(st.just("advance"), st.sampled_from([0, 0.000001, 0.5, 5, 60, 130, 301])),
    st.tuples(st.just("heartbeat"), st.booleans()),
    st.tuples(st.just("stage_start"), st.sampled_from(STAGES)),
    st.tuples(st.just("stage_complete"), st.sampled_from(STAGES)),
    st.tuples(st.just("intend"), st.sampled_from(STAGES), st.sampled_from(["repository", "registry", "forbidden"]),
              st.sampled_from(["0", "0.1", "0.25"])),
    st.tuples(st.just("complete"), st.booleans()),
    st.tuples(st.just("reconcile"), st.sampled_from(["unknown", "known_not_started"])),
    st.tuples(st.just("resume"), st.booleans()),
    st.tuples(st.just("issue"), st.booleans()),
]
rare = [
    st.tuples(st.just("transition"), st.sampled_from(["waiting_approval", "blocked", "failed", "complete", "cancelled"])),
    st.tuples(st.just("switch"), st.booleans()),
    st.tuples(st.just("cancel"), st.just(None)),
    st.tuples(st.just("revoke"), st.just(None)),
    st.tuples(st.just("sync"), st.just(None)),
]
# common actions are drawn about four times as often as the ones that end or halt a run
actions = st.one_of(*common, *common, *common, *common, *rare)


def play(h: Harness, run_id: str, grant_id: str, script) -> None:
    stop = Path(h.root) / ".loopstate" / "STOP"
    stop.parent.mkdir(exist_ok=True)
    for action, arg, *more in script:
        status = h.status(run_id)
        lease = status.lease or {"lease_id": "00000000-0000-4000-8000-000000000000", "generation": 0}
        held = {"lease_id": lease["lease_id"], "generation": lease["generation"]}
        stale = {"lease_id": lease["lease_id"], "generation": max(0, lease["generation"] - 1)}
        pending = status.pending_operation
        command = None
        if action == "advance":
            h.clock.advance(arg)
        elif action == "heartbeat":
            command = proto.Heartbeat(run_id=run_id, **(held if arg else stale))
        elif action == "stage_start":
            command = proto.StageStart(run_id=run_id, stage=arg, **held)
        elif action == "stage_complete":
            command = proto.StageComplete(run_id=run_id, stage=arg, outcome="passed", **held)
        elif action == "intend":
            command = proto.Intend(run_id=run_id, completion_event_type="stage_started", completion_data={"stage": arg},
                                   action="local_write", destination=more[0], cost_usd=more[1], **held)
        elif action == "complete" and pending is not None:
            data = pending["completion_data"] if arg else {"stage": "close"}
            command = proto.Complete(run_id=run_id, operation_id=pending["operation_id"],
                                     completion_event_type=pending["completion_event_type"], completion_data=data, **held)
        elif action == "reconcile" and pending is not None:
            command = proto.Reconcile(run_id=run_id, operation_id=pending["operation_id"], outcome=arg, actor=AGENT, **held)
        elif action == "transition":
            command = proto.Transition(run_id=run_id, to=arg, reason="drawn", **held)
        elif action == "resume":
            command = proto.Resume(run_id=run_id, owner=AGENT if arg else OTHER, reason="drawn", **(held if arg else {}))
        elif action == "switch":
            if arg:
                stop.touch()
            elif stop.exists():
                stop.unlink()
        elif action == "cancel":
            command = proto.Stop(run_id=run_id, actor=USER, cancel=True)
        elif action == "revoke":
            command = proto.AuthorityRevoke(grant_id=grant_id, revoked_by="synthetic-user")
        elif action == "issue":
            command = proto.IssueOpen(run_id=run_id, title="t", severity="low", blocking=arg, **held)
        elif action == "sync":
            command = proto.Sync(run_id=run_id)
        if command is not None:
            try:
                h.run(command)
            except LoopstateError as error:
                assert error.code in EXPECTED_REFUSALS, error


def check_invariants(events: list[dict], started_at: str, ended_at: str) -> None:
    types = [e["type"] for e in events]
    assert types[0] == "run_created" and types.count("run_created") == 1
    assert types.count("lease_acquired") <= 1
    assert [e["sequence"] for e in events] == list(range(1, len(events) + 1))
    frozen = events[0]["projection"]["run"]["budgets"]
    elapsed = (parse_time(ended_at) - parse_time(started_at)).total_seconds()
    generation = None
    for index, event in enumerate(events):
        run = event["projection"]["run"]
        assert run["budgets"] == frozen
        assert budgets.duration_micros(run["usage"]) <= round(elapsed * 1_000_000)
        if index:
            before = events[index - 1]
            previous = before["projection"]["run"]
            assert parse_time(event["at"]) >= parse_time(before["at"])
            rollback = event["type"] == "operation_reconciled" and event["data"]["outcome"] == "known_not_started"
            if not rollback:
                assert budgets.usage_monotonic(previous["usage"], run["usage"]), event["type"]
            if previous["status"] in ("complete", "cancelled"):
                assert run["status"] == previous["status"], "terminal states stay terminal"
            if before["type"] == "operation_intended":
                assert event["type"] in (before["data"]["completion_event_type"], "operation_reconciled"), \
                    "nothing interleaves between an intent and its closure"
            if event["type"] == "budget_reached":
                assert event["projection"] == before["projection"] and event["at"] == before["at"]
        cost = run["usage"]["cost_usd"]
        assert cost is None or Decimal(cost) <= Decimal(frozen["max_cost_usd"])
        assert run["usage"]["mutations"] <= frozen["max_mutations"]
        assert run["usage"]["external_actions"] <= frozen["max_external_actions"]
        if run["status"] == "active":
            assert event["projection"]["lease"] is not None and run["owner"] == event["projection"]["lease"]["owner"]
        if event["type"] in ("lease_acquired", "recovery_started"):
            new = event["projection"]["lease"]["generation"]
            assert new == (0 if generation is None else generation + 1)
            generation = new
        if event["type"] == "recovery_started":
            assert event["data"]["previous_generation"] == (None if new == 0 and index and
                                                            events[index - 1]["projection"]["lease"] is None else new - 1)
    # every marker sequence is complete: its source is followed by one marker per exhausted key, in order
    for index, event in enumerate(events):
        keys = budgets.exhausted_keys(frozen, event["projection"]["run"]["usage"])
        if not keys or event["type"] in ("budget_reached", "operation_intended"):
            continue
        before = events[index - 1]
        before_keys = budgets.exhausted_keys(frozen, before["projection"]["run"]["usage"])
        if before_keys and before["type"] != "operation_intended":
            continue
        markers = events[index + 1:index + 1 + len(keys)]
        assert [(m["data"]["budget"], m["data"]["stage"]) for m in markers] == keys


@pytest.mark.slow
@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(script=st.lists(actions, min_size=5, max_size=40))
def test_any_command_sequence_keeps_the_audit_invariants(script):
    with tempfile.TemporaryDirectory() as tmp:
        root = Path(tmp) / "workspace"
        root.mkdir()
        h = Harness(root, Path(tmp) / "data")
        grant_id = h.grant(scope=WIDE)
        run_id = h.create(grant_id, budgets=TIGHT)
        started = h.clock.now
        h.run(proto.Acquire(run_id=run_id, owner=AGENT))
        play(h, run_id, grant_id, script)
        h.clock.advance(1)
        (root / ".loopstate" / "STOP").unlink(missing_ok=True)
        try:
            h.run(proto.Sync(run_id=run_id))
        except LoopstateError as error:
            assert error.code in EXPECTED_REFUSALS
        assert h.status(run_id).missing_markers == 0
        from loopstate.core.clock import format_time

        check_invariants(h.events(run_id), format_time(started), format_time(h.clock.now))
        check_store_against_schemas(h)
