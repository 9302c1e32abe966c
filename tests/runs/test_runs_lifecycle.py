"""The run state machine, run creation, leases and heartbeats, through a real Service and store."""

from __future__ import annotations

import json

import pytest

from loopstate_protocol import runs as proto
from loopstate_protocol.errors import ErrorCode

from loopstate.core.errors import LoopstateError
from loopstate.domains.runs.machine import KILLABLE, RECOVERABLE, TERMINAL, TRANSITIONS, allowed
from tests.runs.conftest import AGENT, OTHER, USER, as_json, lease_args, spawn, write_json
from tests.runs.schemas import THE_LOOP
from tests.conftest import needs_conformance

pytestmark = pytest.mark.both_stores  # docs/storage.md, *Which tests run on PostgreSQL*


def refused(h, command, code: ErrorCode) -> LoopstateError:
    with pytest.raises(LoopstateError) as info:
        h.run(command)
    assert info.value.code == code, info.value
    return info.value


# the transition table ------------------------------------------------------------------------

def test_transition_table_is_the_seeds():
    assert TRANSITIONS["draft"] == {"ready", "cancelled"}
    assert TRANSITIONS["ready"] == {"active", "cancelled"}
    assert TRANSITIONS["active"] == {"waiting_approval", "waiting_external", "blocked", "failed", "halted_kill_switch",
                                     "complete", "cancelled"}
    for recoverable in ("waiting_approval", "waiting_external", "blocked", "failed", "halted_kill_switch"):
        assert TRANSITIONS[recoverable] == {"ready", "cancelled"}
    assert TRANSITIONS["complete"] == TRANSITIONS["cancelled"] == frozenset()
    assert KILLABLE == {"ready", "active", "waiting_approval", "waiting_external", "blocked", "failed"}
    assert RECOVERABLE == {"waiting_approval", "waiting_external", "blocked", "failed", "halted_kill_switch"}
    assert not any(allowed(t, s) for t in TERMINAL for s in TRANSITIONS)


@pytest.mark.parametrize("target", ["waiting_approval", "waiting_external", "blocked"])
def test_active_run_moves_to_waiting_or_blocked_with_a_heartbeat_event(h, target):
    run_id, lease = h.leased()
    events = h.run(proto.Transition(run_id=run_id, to=target, reason="needs a human", **lease_args(lease))).events
    assert [e["type"] for e in events] == ["heartbeat"]
    assert events[0]["data"] == {"stage": "strategize", "status": target}
    assert h.status(run_id).run["terminal_reason"] == {"code": target, "explanation": "needs a human"}


@pytest.mark.parametrize("target,event", [("complete", "run_completed"), ("failed", "run_failed"), ("cancelled", "run_cancelled")])
def test_terminal_run_events_project_their_matching_state(h, target, event):
    run_id, lease = h.leased()
    assert h.types(proto.Transition(run_id=run_id, to=target, reason="done", **lease_args(lease))) == [event]
    assert h.status(run_id).run["status"] == target


def test_terminal_states_stay_terminal(h, root):
    run_id, lease = h.leased()
    h.run(proto.Transition(run_id=run_id, to="complete", reason="done", **lease_args(lease)))
    refused(h, proto.Transition(run_id=run_id, to="cancelled", reason="x", **lease_args(lease)), ErrorCode.INVALID_TRANSITION)
    refused(h, proto.Resume(run_id=run_id, owner=AGENT, reason="again"), ErrorCode.INVALID_TRANSITION)
    refused(h, proto.Stop(run_id=run_id, actor=USER, cancel=True), ErrorCode.INVALID_TRANSITION)
    (root / ".loopstate").mkdir()
    (root / ".loopstate" / "STOP").touch()
    assert h.run(proto.Sync(run_id=run_id)).events == []  # the kill switch cannot reduce a complete run
    assert h.status(run_id).run["status"] == "complete"


def test_transition_to_ready_or_active_needs_explicit_recovery(h):
    run_id, lease = h.leased()
    h.run(proto.Transition(run_id=run_id, to="blocked", reason="stuck", **lease_args(lease)))
    error = refused(h, proto.Transition(run_id=run_id, to="ready", reason="x", **lease_args(lease)), ErrorCode.INVALID_TRANSITION)
    assert "resume" in error.message


def test_transition_not_in_the_table_is_refused_naming_the_allowed_moves(h):
    run_id, lease = h.leased()
    h.run(proto.Transition(run_id=run_id, to="blocked", reason="stuck", **lease_args(lease)))
    error = refused(h, proto.Transition(run_id=run_id, to="complete", reason="x", **lease_args(lease)), ErrorCode.INVALID_TRANSITION)
    assert "allowed next states: cancelled, ready" in error.message


# run creation ---------------------------------------------------------------------------------

def test_run_created_is_first_and_carries_the_complete_initial_run(h):
    run_id = h.create()
    events = h.events(run_id)
    assert [e["type"] for e in events] == ["run_created", "authority_granted"]
    assert events[0]["sequence"] == 1 and events[0]["previous_event_digest"] is None
    run = events[0]["projection"]["run"]
    assert run["status"] == "ready" and run["owner"] is None and run["usage"]["duration_seconds"] == 0
    assert events[0]["projection"]["lease"] is None and events[0]["projection"]["pending_operation"] is None


def test_run_created_exactly_once(h):
    run_id = h.create()
    grant_id = h.status(run_id).run["authority_grant_id"]
    error = refused(h, proto.Create(run_id=run_id, asset=h.status(run_id).run["asset"], objective="again",
                                    done_gate=["x"], authority_grant_id=grant_id, actor=USER), ErrorCode.CONFLICT)
    assert "exactly once" in error.message


def test_run_create_refuses_a_grant_that_does_not_cover_the_asset(h):
    grant_id = h.grant(scope={"assets": ["other"], "actions": ["local_write"], "destinations": ["repository"], "exclusions": []})
    with pytest.raises(LoopstateError) as info:
        h.create(grant_id)
    assert info.value.code == ErrorCode.AUTHORITY_DENIED


def test_run_create_refuses_bad_budgets_naming_the_field(h):
    with pytest.raises(LoopstateError) as info:
        h.create(budgets={"max_duration_seconds": 0, "max_stage_attempts": 3, "max_mutations": 1,
                          "max_external_actions": 0, "max_cost_usd": None})
    assert info.value.details["field"] == "$.max_duration_seconds"


def test_commands_on_a_missing_run_are_not_found(h):
    refused(h, proto.Acquire(run_id="00000000-0000-4000-8000-00000000abcd", owner=AGENT), ErrorCode.NOT_FOUND)


def test_run_ids_must_be_uuid_v4(h):
    refused(h, proto.Acquire(run_id="../../etc", owner=AGENT), ErrorCode.INVALID_PARAMS)


# leases ----------------------------------------------------------------------------------------

def test_acquire_activates_a_ready_run_with_generation_zero(h):
    run_id = h.create()
    events = h.run(proto.Acquire(run_id=run_id, owner=AGENT)).events
    assert [e["type"] for e in events] == ["lease_acquired"]
    lease = events[0]["projection"]["lease"]
    assert lease["generation"] == 0 and lease["expires_at"] == "2026-08-16T08:05:00Z"
    assert events[0]["lease_id"] == lease["lease_id"] and events[0]["lease_generation"] == 0
    assert events[0]["projection"]["run"]["owner"] == AGENT == lease["owner"]


def test_a_live_lease_cannot_be_replaced_and_the_refusal_names_the_holder(h):
    run_id, lease = h.leased()
    error = refused(h, proto.Acquire(run_id=run_id, owner=OTHER), ErrorCode.LEASE_HELD)
    assert error.details["holder"] == AGENT and "synthetic-agent" in error.message


def test_lease_acquired_is_written_once_even_after_expiry(h):
    run_id, lease = h.leased()
    h.clock.advance(300)
    error = refused(h, proto.Acquire(run_id=run_id, owner=OTHER), ErrorCode.LEASE_EXPIRED)
    assert [e["type"] for e in error.details["events"]] == ["run_failed"]  # the truthful expired-run reduction
    error = refused(h, proto.Acquire(run_id=run_id, owner=OTHER), ErrorCode.RULE_VIOLATION)
    assert "written once" in error.message and "resume" in error.message
    assert [e["type"] for e in h.events(run_id)].count("lease_acquired") == 1


@pytest.mark.slow
def test_two_processes_acquiring_one_run_get_one_winner_and_one_precise_conflict(h):
    run_id = h.create()
    children = [spawn(h, "exec", h.root, "2026-08-16T08:00:01Z", as_json(proto.Acquire(run_id=run_id, owner=who)), "go")
                for who in (AGENT, OTHER)]
    for child in children:
        assert child.stdout.readline().strip() == "ready"
    for child in children:
        child.stdin.write("go\n")
        child.stdin.flush()
    results = [json.loads(child.communicate(timeout=60)[0]) for child in children]
    winners = [r for r in results if "ok" in r]
    losers = [r for r in results if "error" in r]
    assert len(winners) == 1 and winners[0]["ok"] == ["lease_acquired"]
    assert len(losers) == 1 and losers[0]["error"] == "LEASE_HELD" and "leased to" in losers[0]["message"]
    assert [e["type"] for e in h.events(run_id)].count("lease_acquired") == 1


def test_lease_expires_exactly_at_expires_at(h):
    run_id, lease = h.leased()
    h.clock.set("2026-08-16T08:04:59.999999Z")
    h.run(proto.StageStart(run_id=run_id, stage="build", **lease_args(lease)))
    h.clock.set("2026-08-16T08:05:00Z")
    refused(h, proto.Heartbeat(run_id=run_id, **lease_args(lease)), ErrorCode.LEASE_EXPIRED)
    refused(h, proto.StageStart(run_id=run_id, stage="test", **lease_args(lease)), ErrorCode.LEASE_EXPIRED)


def test_expired_holders_heartbeat_and_mutation_are_refused(h):
    run_id, lease = h.leased()
    h.clock.advance(301)
    error = refused(h, proto.Heartbeat(run_id=run_id, **lease_args(lease)), ErrorCode.LEASE_EXPIRED)
    assert error.details["events"][0]["projection"]["run"]["terminal_reason"]["code"] == "lease_expired"
    assert error.details["events"][0]["projection"]["run"]["usage"]["duration_seconds"] == 300  # up to the expiry
    refused(h, proto.IssueOpen(run_id=run_id, title="t", severity="low", blocking=False, **lease_args(lease)),
            ErrorCode.LEASE_EXPIRED)
    refused(h, proto.Intend(run_id=run_id, completion_event_type="stage_started", completion_data={"stage": "build"},
                            action="local_write", destination="repository", **lease_args(lease)), ErrorCode.LEASE_EXPIRED)
    assert [e["type"] for e in h.events(run_id)][-2:] == ["lease_acquired", "run_failed"]


def test_a_stale_generation_is_fenced_out(h):
    run_id, lease = h.leased()
    h.run(proto.Transition(run_id=run_id, to="blocked", reason="stuck", **lease_args(lease)))
    h.clock.advance(301)
    h.run(proto.Resume(run_id=run_id, owner=OTHER, reason="take over"))
    new = h.status(run_id).lease
    assert new["generation"] == 1 and new["lease_id"] != lease["lease_id"]
    refused(h, proto.Heartbeat(run_id=run_id, **lease_args(lease)), ErrorCode.LEASE_MISMATCH)
    refused(h, proto.StageStart(run_id=run_id, stage="build", lease_id=new["lease_id"], generation=0), ErrorCode.LEASE_MISMATCH)


def test_every_worker_mutation_must_name_the_current_lease(h):
    run_id, lease = h.leased()
    wrong = {"lease_id": "00000000-0000-4000-8000-00000000beef", "generation": 0}
    for command in (
        proto.Heartbeat(run_id=run_id, **wrong),
        proto.StageStart(run_id=run_id, stage="build", **wrong),
        proto.Transition(run_id=run_id, to="complete", reason="x", **wrong),
        proto.EvidenceAdd(run_id=run_id, evidence={}, **wrong),
    ):
        refused(h, command, ErrorCode.LEASE_MISMATCH)


def test_heartbeat_renews_only_ones_own_matching_lease(h):
    run_id, lease = h.leased()
    h.clock.advance(130)
    assert h.types(proto.Heartbeat(run_id=run_id, **lease_args(lease))) == ["lease_renewed"]
    renewed = h.status(run_id).lease
    assert renewed["lease_id"] == lease["lease_id"] and renewed["generation"] == 0
    assert renewed["renewed_at"] == "2026-08-16T08:02:10Z" and renewed["expires_at"] == "2026-08-16T08:07:10Z"
    assert renewed["acquired_at"] == lease["acquired_at"]


def test_clock_reversal_halts_mutation(h):
    run_id, lease = h.leased()
    h.clock.advance(10)
    h.run(proto.StageStart(run_id=run_id, stage="build", **lease_args(lease)))
    h.clock.advance(-1)
    error = refused(h, proto.StageComplete(run_id=run_id, stage="build", outcome="passed", **lease_args(lease)),
                    ErrorCode.CLOCK_REVERSED)
    assert "2026-08-16T08:00:09Z" in error.message


def test_recovery_increments_the_generation_and_is_the_only_way_to_replace_an_expired_lease(h):
    run_id, lease = h.leased()
    h.clock.advance(400)
    events = h.run(proto.Resume(run_id=run_id, owner=OTHER, reason="the first agent vanished")).events
    assert [e["type"] for e in events] == ["run_failed", "recovery_started"]
    assert events[0]["data"] == {"reason": "lease_expired"}
    assert events[1]["data"] == {"previous_generation": 0, "new_generation": 1, "reason": "the first agent vanished"}
    assert events[1]["projection"]["run"]["status"] == "active"
    assert events[1]["projection"]["lease"]["owner"] == OTHER == events[1]["projection"]["run"]["owner"]


def test_recovery_cannot_replace_someone_elses_live_lease(h):
    run_id, lease = h.leased()
    h.run(proto.Transition(run_id=run_id, to="waiting_approval", reason="ask", **lease_args(lease)))
    refused(h, proto.Resume(run_id=run_id, owner=OTHER, reason="mine now"), ErrorCode.LEASE_HELD)
    events = h.run(proto.Resume(run_id=run_id, owner=AGENT, reason="approved", **lease_args(lease))).events
    assert events[-1]["data"]["new_generation"] == 1


def test_recovery_started_goes_straight_to_active_from_every_recoverable_state(h):
    for target in ("waiting_approval", "waiting_external", "blocked", "failed"):
        run_id, lease = h.leased()
        h.run(proto.Transition(run_id=run_id, to=target, reason="x", **lease_args(lease)))
        events = h.run(proto.Resume(run_id=run_id, owner=AGENT, reason="back", **lease_args(lease))).events
        assert [e["type"] for e in events] == ["recovery_started"]
        assert events[0]["projection"]["run"]["status"] == "active" and events[0]["projection"]["run"]["terminal_reason"] is None


def test_ready_run_halted_before_its_first_lease_recovers_with_generation_zero(h, root):
    run_id = h.create()
    (root / ".loopstate").mkdir()
    (root / ".loopstate" / "STOP").touch()
    refused(h, proto.Acquire(run_id=run_id, owner=AGENT), ErrorCode.KILL_SWITCH)
    assert h.status(run_id).run["status"] == "halted_kill_switch"
    (root / ".loopstate" / "STOP").unlink()
    events = h.run(proto.Resume(run_id=run_id, owner=AGENT, reason="switch removed")).events
    assert events[-1]["data"] == {"previous_generation": None, "new_generation": 0, "reason": "switch removed"}
    assert events[-1]["projection"]["lease"]["generation"] == 0


def test_ready_run_without_a_lease_is_not_recovered_but_acquired(h):
    run_id = h.create()
    error = refused(h, proto.Resume(run_id=run_id, owner=AGENT, reason="x"), ErrorCode.INVALID_TRANSITION)
    assert "acquire" in error.message


# heartbeats and duration ----------------------------------------------------------------------------

def test_heartbeats_are_coalesced_until_a_renewal_is_due(h):
    run_id, lease = h.leased()
    written = []
    for _ in range(720):  # an hour of heartbeats every five seconds
        h.clock.advance(5)
        written += h.types(proto.Heartbeat(run_id=run_id, **lease_args(lease)))
    assert written == ["lease_renewed"] * 30  # one durable renewal per heartbeat_seconds (120 s)
    assert len(h.events(run_id)) == 3 + 30
    status = h.status(run_id)
    assert status.lease_expired is False and status.run["usage"]["duration_seconds"] == 3600


@needs_conformance
def test_renewal_threshold_is_half_the_lease_when_the_heartbeat_is_long(h, root):
    config = json.loads((THE_LOOP / "fixtures/valid/config.json").read_text())
    write_json(root / ".loopstate" / "config.json", {**config, "heartbeat_seconds": 600, "lease_seconds": 601})
    run_id, lease = h.leased()
    assert lease["expires_at"] == "2026-08-16T08:10:01Z"  # the config's lease_seconds
    h.clock.advance(300)
    assert h.types(proto.Heartbeat(run_id=run_id, **lease_args(lease))) == []
    h.clock.advance(0.5)
    assert h.types(proto.Heartbeat(run_id=run_id, **lease_args(lease))) == ["lease_renewed"]


def test_duration_counts_only_inside_valid_lease_intervals_with_microseconds(h):
    run_id, lease = h.leased()
    h.clock.advance(0.000250)
    h.run(proto.StageStart(run_id=run_id, stage="build", **lease_args(lease)))
    assert h.status(run_id).run["usage"]["duration_seconds"] == 0.00025
    h.clock.advance(1000)  # far past the lease's expiry at 08:05:00
    h.run(proto.Resume(run_id=run_id, owner=AGENT, reason="back"))
    usage = h.status(run_id).run["usage"]
    assert usage["duration_seconds"] == 300  # capped at the prior expiry; downtime does not count
    h.clock.advance(1.5)
    lease = h.status(run_id).lease
    h.run(proto.StageComplete(run_id=run_id, stage="build", outcome="passed", **lease_args(lease)))
    assert h.status(run_id).run["usage"]["duration_seconds"] == 301.5


def test_time_in_waiting_states_is_not_duration(h):
    run_id, lease = h.leased()
    h.clock.advance(10)
    h.run(proto.Transition(run_id=run_id, to="waiting_approval", reason="ask", **lease_args(lease)))
    h.clock.advance(100)
    h.run(proto.Resume(run_id=run_id, owner=AGENT, reason="approved", **lease_args(lease)))
    assert h.status(run_id).run["usage"]["duration_seconds"] == 10


def test_heartbeat_while_an_operation_is_pending_is_refused(h):
    run_id, lease = h.leased()
    h.run(proto.Intend(run_id=run_id, completion_event_type="stage_started", completion_data={"stage": "build"},
                       action="local_write", destination="repository", **lease_args(lease)))
    h.clock.advance(200)
    error = refused(h, proto.Heartbeat(run_id=run_id, **lease_args(lease)), ErrorCode.RULE_VIOLATION)
    assert "pending" in error.message


def test_recovery_and_cancellation_need_a_reason_before_anything_is_written(h):
    run_id, lease = h.leased()
    h.run(proto.Transition(run_id=run_id, to="blocked", reason="stuck", **lease_args(lease)))
    before = len(h.events(run_id))
    error = refused(h, proto.Resume(run_id=run_id, owner=AGENT, reason=" ", **lease_args(lease)), ErrorCode.VALIDATION_FAILED)
    assert (error.details["field"], error.details["rule"]) == ("$.reason", "length")
    error = refused(h, proto.Stop(run_id=run_id, actor=USER, cancel=True, reason=""), ErrorCode.VALIDATION_FAILED)
    assert error.details["field"] == "$.reason"
    assert len(h.events(run_id)) == before


def test_evidence_that_is_not_an_object_is_a_clear_refusal(h):
    run_id, lease = h.leased()
    error = refused(h, proto.EvidenceAdd(run_id=run_id, evidence=[], **lease_args(lease)), ErrorCode.VALIDATION_FAILED)
    assert "must be a JSON object of evidence fields" in error.message


@needs_conformance
def test_a_run_takes_the_configs_default_mode_unless_the_command_names_one(h, root):
    config = json.loads((THE_LOOP / "fixtures/valid/config.json").read_text())
    write_json(root / ".loopstate" / "config.json", {**config, "default_mode": "loop"})
    assert h.status(h.create()).run["mode"] == "loop"
    run_id = h.ids()
    h.run(proto.Create(run_id=run_id, asset={"name": "synthetic-asset", "root": ".", "track": "code",
                                             "boundaries": ["b"]}, objective="o", done_gate=["g"],
                       authority_grant_id=h.grant(), actor=USER, mode="auto"))
    assert h.status(run_id).run["mode"] == "auto"
