"""Operation intents, their exact completion, reconciliation, and never replaying anything."""

from __future__ import annotations

import json
import signal

import pytest

from loopstate_protocol import runs as proto
from loopstate_protocol.errors import ErrorCode

from loopstate.core.errors import LoopstateError
from tests.runs.conftest import AGENT, OTHER, USER, as_json, lease_args, spawn

pytestmark = pytest.mark.both_stores  # docs/storage.md, *Which tests run on PostgreSQL*

START_BUILD = {"completion_event_type": "stage_started", "completion_data": {"stage": "build"}}
LOCAL = {"action": "local_write", "destination": "repository"}
WIDE_SCOPE = {"assets": ["*"], "actions": ["*"], "destinations": ["*"], "exclusions": []}
ROOMY = {"max_duration_seconds": 7200, "max_stage_attempts": 3, "max_mutations": 100, "max_external_actions": 5,
         "max_cost_usd": "10"}


def refused(h, command, code: ErrorCode) -> LoopstateError:
    with pytest.raises(LoopstateError) as info:
        h.run(command)
    assert info.value.code == code, info.value
    return info.value


def intend(h, run_id, lease, *, spec=START_BUILD, where=LOCAL, cost="0") -> dict:
    events = h.run(proto.Intend(run_id=run_id, **spec, **where, cost_usd=cost, **lease_args(lease))).events
    assert [e["type"] for e in events] == ["operation_intended"]
    return events[0]["data"]


def complete(h, run_id, lease, pending, record=None):
    return h.run(proto.Complete(run_id=run_id, operation_id=pending["operation_id"],
                                completion_event_type=pending["completion_event_type"],
                                completion_data=pending["completion_data"], record=record, **lease_args(lease))).events


def test_intent_records_its_exact_completion_effect_and_reservation(h):
    run_id, lease = h.leased()
    pending = intend(h, run_id, lease)
    assert pending["completion_event_type"] == "stage_started" and pending["effect"] == "local"
    assert pending["reservation"] == {"mutations": 1, "external_actions": 0, "cost_usd": "0", "stage_attempt": "build",
                                      "prior_cost_usd": None, "prior_stage": "strategize"}
    status = h.status(run_id)
    assert status.pending_operation == pending
    assert status.run["usage"]["mutations"] == 1 and status.run["usage"]["stage_attempts"]["build"] == 1


def test_completion_must_exactly_match_the_intent(h):
    run_id, lease = h.leased()
    pending = intend(h, run_id, lease)
    refused(h, proto.Complete(run_id=run_id, operation_id=pending["operation_id"], completion_event_type="stage_started",
                              completion_data={"stage": "test"}, **lease_args(lease)), ErrorCode.RULE_VIOLATION)
    refused(h, proto.Complete(run_id=run_id, operation_id=pending["operation_id"], completion_event_type="stage_completed",
                              completion_data={"stage": "build", "outcome": "passed"}, **lease_args(lease)),
            ErrorCode.RULE_VIOLATION)
    events = complete(h, run_id, lease, pending)
    assert [e["type"] for e in events] == ["stage_started"]
    assert events[0]["data"] == {"stage": "build"} and events[0]["projection"]["pending_operation"] is None
    assert h.status(run_id).run["usage"]["stage_attempts"]["build"] == 1  # counted once, by the reservation


def test_nothing_interleaves_between_intent_and_completion(h):
    run_id, lease = h.leased()
    intend(h, run_id, lease)
    for command in (
        proto.StageStart(run_id=run_id, stage="test", **lease_args(lease)),
        proto.IssueOpen(run_id=run_id, title="t", severity="low", blocking=False, **lease_args(lease)),
        proto.Transition(run_id=run_id, to="complete", reason="x", **lease_args(lease)),
        proto.Intend(run_id=run_id, **START_BUILD, **LOCAL, **lease_args(lease)),
    ):
        refused(h, command, ErrorCode.RULE_VIOLATION)


def test_a_closed_operation_is_never_replayed(h):
    run_id, lease = h.leased()
    pending = intend(h, run_id, lease)
    complete(h, run_id, lease, pending)
    error = refused(h, proto.Complete(run_id=run_id, operation_id=pending["operation_id"],
                                      completion_event_type="stage_started", completion_data={"stage": "build"},
                                      **lease_args(lease)), ErrorCode.RULE_VIOLATION)
    assert "never replayed" in error.message
    assert [e["type"] for e in h.events(run_id)].count("stage_started") == 1


def test_exact_retry_of_a_completion_returns_the_first_result_without_a_second_event(h):
    run_id, lease = h.leased()
    pending = intend(h, run_id, lease)
    command = proto.Complete(run_id=run_id, operation_id=pending["operation_id"], completion_event_type="stage_started",
                             completion_data={"stage": "build"}, **lease_args(lease))
    first = h.run(command, request_id="complete-1")
    again = h.run(command, request_id="complete-1")
    assert again.replayed and again.events == first.events
    assert [e["type"] for e in h.events(run_id)].count("stage_started") == 1


def test_an_action_other_than_the_exact_local_pair_is_external_and_fails_closed(h):
    grant_id = h.grant(scope=WIDE_SCOPE)
    run_id, lease = h.leased(grant_id=grant_id)  # default budgets: max_external_actions 0
    for where in ({"action": "local_write", "destination": "github"}, {"action": "push", "destination": "repository"},
                  {"action": "Local_Write", "destination": "repository"}):
        error = refused(h, proto.Intend(run_id=run_id, **START_BUILD, **where, **lease_args(lease)), ErrorCode.BUDGET_EXHAUSTED)
        assert error.details["budget"] == "max_external_actions"


def test_external_action_reserves_exactly_one_external_action(h):
    grant_id = h.grant(scope=WIDE_SCOPE)
    run_id, lease = h.leased(budgets=ROOMY, grant_id=grant_id)
    pending = intend(h, run_id, lease, where={"action": "publish", "destination": "registry"})
    assert pending["effect"] == "external" and pending["reservation"]["external_actions"] == 1
    assert h.status(run_id).run["usage"]["external_actions"] == 1


def test_action_outside_the_grant_scope_is_denied(h):
    run_id, lease = h.leased(budgets=ROOMY)
    error = refused(h, proto.Intend(run_id=run_id, **START_BUILD, action="publish", destination="repository",
                                    **lease_args(lease)), ErrorCode.AUTHORITY_DENIED)
    assert "publish" in error.message


def test_scope_exclusions_win_over_wildcards(h):
    scope = {"assets": ["*"], "actions": ["*"], "destinations": ["*"], "exclusions": ["network"]}
    grant_id = h.grant(scope=scope)
    run_id, lease = h.leased(budgets=ROOMY, grant_id=grant_id)
    refused(h, proto.Intend(run_id=run_id, **START_BUILD, action="fetch", destination="network", **lease_args(lease)),
            ErrorCode.AUTHORITY_DENIED)
    refused(h, proto.Intend(run_id=run_id, **START_BUILD, action="network", destination="repository", **lease_args(lease)),
            ErrorCode.AUTHORITY_DENIED)
    intend(h, run_id, lease, where={"action": "fetch", "destination": "mirror"})


def test_excluded_asset_cannot_be_run_even_under_a_wildcard(h):
    grant_id = h.grant(scope={"assets": ["*"], "actions": ["*"], "destinations": ["*"], "exclusions": ["synthetic-asset"]})
    with pytest.raises(LoopstateError) as info:
        h.create(grant_id)
    assert info.value.code == ErrorCode.AUTHORITY_DENIED


# reconciliation ----------------------------------------------------------------------------------

def test_unknown_local_operation_reconciles_to_failed_keeping_the_reservation(h):
    run_id, lease = h.leased()
    pending = intend(h, run_id, lease)
    h.clock.advance(301)
    events = h.run(proto.Reconcile(run_id=run_id, operation_id=pending["operation_id"], outcome="unknown", actor=USER)).events
    assert [e["type"] for e in events] == ["operation_reconciled"]
    assert events[0]["data"] == {"operation_id": pending["operation_id"], "effect": "local", "outcome": "unknown"}
    run = events[0]["projection"]["run"]
    assert run["status"] == "failed" and run["terminal_reason"]["code"] == "operation_outcome_unknown"
    assert run["usage"]["mutations"] == 1 and run["usage"]["stage_attempts"]["build"] == 1
    assert events[0]["projection"]["pending_operation"] is None


def test_unknown_external_operation_reconciles_to_waiting_external(h):
    grant_id = h.grant(scope=WIDE_SCOPE)
    run_id, lease = h.leased(budgets=ROOMY, grant_id=grant_id)
    pending = intend(h, run_id, lease, where={"action": "publish", "destination": "registry"})
    events = h.run(proto.Reconcile(run_id=run_id, operation_id=pending["operation_id"], outcome="unknown", actor=AGENT,
                                   **lease_args(lease))).events
    run = events[0]["projection"]["run"]
    assert run["status"] == "waiting_external" and run["terminal_reason"]["code"] == "external_operation_outcome_unknown"


def test_nobody_but_the_holder_reconciles_a_live_leases_operation(h):
    run_id, lease = h.leased()
    pending = intend(h, run_id, lease)
    refused(h, proto.Reconcile(run_id=run_id, operation_id=pending["operation_id"], outcome="unknown", actor=OTHER),
            ErrorCode.LEASE_HELD)


def test_known_not_started_rolls_back_the_exact_reservation_and_prior_stage_and_cost(h):
    run_id, lease = h.leased(budgets=ROOMY)
    first = intend(h, run_id, lease, spec={"completion_event_type": "stage_completed",
                                           "completion_data": {"stage": "strategize", "outcome": "passed"}}, cost="0.25")
    complete(h, run_id, lease, first)
    before = h.status(run_id).run
    pending = intend(h, run_id, lease, cost="0.5")
    assert h.status(run_id).run["stage"] == "build" and h.status(run_id).run["usage"]["cost_usd"] == "0.75"
    events = h.run(proto.Reconcile(run_id=run_id, operation_id=pending["operation_id"], outcome="known_not_started",
                                   actor=AGENT, **lease_args(lease))).events
    after = events[0]["projection"]["run"]
    assert after["usage"] == before["usage"] and after["stage"] == before["stage"] == "strategize"
    assert after["status"] == "active"


def test_known_not_started_cannot_be_inferred_after_expiry(h):
    run_id, lease = h.leased()
    pending = intend(h, run_id, lease)
    h.clock.advance(300)
    error = refused(h, proto.Reconcile(run_id=run_id, operation_id=pending["operation_id"], outcome="known_not_started",
                                       actor=AGENT, **lease_args(lease)), ErrorCode.RULE_VIOLATION)
    assert "never inferred" in error.message


def test_completion_at_or_after_lease_expiry_is_recorded_but_leaves_the_run_failed(h):
    run_id, lease = h.leased()
    pending = intend(h, run_id, lease)
    h.clock.set("2026-08-16T08:05:00Z")  # exactly the expiry
    events = complete(h, run_id, lease, pending)
    assert [e["type"] for e in events] == ["stage_started"]
    run = events[0]["projection"]["run"]
    assert run["status"] == "failed" and run["terminal_reason"]["code"] == "lease_expired"
    assert run["usage"]["duration_seconds"] == 300


def test_resume_after_a_crash_reconciles_to_unknown_before_recovering(h):
    run_id, lease = h.leased()
    pending = intend(h, run_id, lease)
    h.clock.advance(600)
    events = h.run(proto.Resume(run_id=run_id, owner=OTHER, reason="the agent crashed")).events
    assert [e["type"] for e in events] == ["operation_reconciled", "recovery_started"]
    assert events[0]["data"]["outcome"] == "unknown" and events[0]["data"]["operation_id"] == pending["operation_id"]
    assert events[1]["projection"]["run"]["usage"]["mutations"] == 1  # the reservation is kept


@pytest.mark.slow
def test_killed_client_between_intent_and_completion_reconciles_to_unknown_and_never_replays(h):
    run_id, lease = h.leased()
    child = spawn(h, "hang", h.root, "2026-08-16T08:00:10Z",
                  as_json(proto.Intend(run_id=run_id, **START_BUILD, **LOCAL, **lease_args(lease))))
    intended = json.loads(child.stdout.readline())
    assert [e["type"] for e in intended] == ["operation_intended"]
    child.send_signal(signal.SIGKILL)
    child.wait(timeout=30)
    operation_id = intended[0]["data"]["operation_id"]
    h.clock.set("2026-08-16T08:05:00Z")
    events = h.run(proto.Reconcile(run_id=run_id, operation_id=operation_id, outcome="unknown", actor=USER)).events
    assert events[0]["projection"]["run"]["status"] == "failed"
    assert events[0]["projection"]["run"]["terminal_reason"]["code"] == "operation_outcome_unknown"
    refused(h, proto.Complete(run_id=run_id, operation_id=operation_id, completion_event_type="stage_started",
                              completion_data={"stage": "build"}, **lease_args(lease)), ErrorCode.RULE_VIOLATION)
    types = [e["type"] for e in h.events(run_id)]
    assert types == ["run_created", "authority_granted", "lease_acquired", "operation_intended", "operation_reconciled"]


# worker records through intents -------------------------------------------------------------------

def test_evidence_through_an_intent_needs_the_matching_record(h):
    run_id, lease = h.leased()
    evidence_id = "00000000-0000-4000-8000-0000000e0001"
    pending = intend(h, run_id, lease, spec={"completion_event_type": "evidence_recorded",
                                             "completion_data": {"evidence_id": evidence_id, "outcome": "passed"}})
    record = {"stage": "test", "requirement_ids": ["R1"], "type": "command", "description": "ran the tests",
              "procedure": ["pytest"], "outcome": "failed", "artifact_refs": [{"kind": "command_output", "ref": "log"}],
              "digest": None, "environment": {}}
    refused(h, proto.Complete(run_id=run_id, operation_id=pending["operation_id"], completion_event_type="evidence_recorded",
                              completion_data=pending["completion_data"], record=record, **lease_args(lease)),
            ErrorCode.RULE_VIOLATION)
    events = complete(h, run_id, lease, pending, record={**record, "outcome": "passed"})
    assert events[0]["type"] == "evidence_recorded" and events[0]["loopstate_record"]["evidence_id"] == evidence_id
    assert h.status(run_id).evidence_ids == [evidence_id]


def test_issue_transition_through_an_intent_must_start_from_the_current_status(h):
    run_id, lease = h.leased()
    opened = h.run(proto.IssueOpen(run_id=run_id, title="flaky", severity="high", blocking=True, **lease_args(lease))).events
    issue_id = opened[0]["data"]["issue_id"]
    refused(h, proto.Intend(run_id=run_id, completion_event_type="issue_transitioned",
                            completion_data={"issue_id": issue_id, "from_status": "resolving", "to_status": "closed"},
                            **LOCAL, **lease_args(lease)), ErrorCode.RULE_VIOLATION)
    pending = intend(h, run_id, lease, spec={"completion_event_type": "issue_transitioned",
                                             "completion_data": {"issue_id": issue_id, "from_status": "open", "to_status": "closed"}})
    events = complete(h, run_id, lease, pending, record={"resolution": "fixed the race"})
    assert events[0]["projection"]["run"]["open_blocking_issues"] == 0
    assert events[0]["loopstate_record"]["resolution"] == "fixed the race"


def test_intent_whose_completion_could_never_be_recorded_is_refused_up_front(h):
    run_id, lease = h.leased()
    evidence = {"stage": "test", "requirement_ids": ["R1"], "type": "manual", "description": "looked",
                "procedure": ["look"], "outcome": "passed", "artifact_refs": [], "manual_observation": "fine",
                "digest": None, "environment": {}}
    evidence_id = h.run(proto.EvidenceAdd(run_id=run_id, evidence=evidence, **lease_args(lease))).events[0]["data"]["evidence_id"]
    refused(h, proto.Intend(run_id=run_id, completion_event_type="evidence_recorded",
                            completion_data={"evidence_id": evidence_id, "outcome": "passed"}, **LOCAL, **lease_args(lease)),
            ErrorCode.CONFLICT)
    refused(h, proto.Intend(run_id=run_id, completion_event_type="stage_completed",
                            completion_data={"stage": "build", "outcome": "passed"}, **LOCAL, **lease_args(lease)),
            ErrorCode.RULE_VIOLATION)
    refused(h, proto.Intend(run_id=run_id, completion_event_type="stage_started", completion_data={"stage": "nope"},
                            **LOCAL, **lease_args(lease)), ErrorCode.VALIDATION_FAILED)
    assert h.status(run_id).pending_operation is None


def test_cancelling_a_run_with_a_pending_intent_reconciles_it_as_unknown_first(h):
    run_id, lease = h.leased()
    pending = intend(h, run_id, lease)
    events = h.run(proto.Stop(run_id=run_id, actor=USER, cancel=True, reason="abandon")).events
    assert [e["type"] for e in events] == ["operation_reconciled", "run_cancelled"]
    assert events[0]["data"] == {"operation_id": pending["operation_id"], "effect": "local", "outcome": "unknown"}
    assert events[1]["projection"]["pending_operation"] is None


def test_holder_restarting_after_its_own_crash_resumes_with_the_intent_unknown(h):
    run_id, lease = h.leased()
    intend(h, run_id, lease)
    h.clock.advance(10)
    events = h.run(proto.Resume(run_id=run_id, owner=AGENT, reason="restarted after a crash", **lease_args(lease))).events
    assert [e["type"] for e in events] == ["operation_reconciled", "recovery_started"]
    assert events[1]["data"]["new_generation"] == 1 and events[1]["projection"]["run"]["status"] == "active"


@pytest.mark.parametrize("field", ["action", "destination"])
def test_an_intent_names_its_action_and_destination(h, field):
    run_id, lease = h.leased()
    params = {"action": "local_write", "destination": "repository", field: ""}
    with pytest.raises(LoopstateError) as info:
        h.run(proto.Intend(run_id=run_id, completion_event_type="stage_started", completion_data={"stage": "build"},
                           **params, **lease_args(lease)))
    assert (info.value.details["field"], info.value.details["rule"]) == (f"$.{field}", "length")
    assert h.status(run_id).pending_operation is None
