"""Evidence, the issue ledger and route decisions as a run records them."""

from __future__ import annotations

import json

import pytest

from loopstate_protocol import runs as proto
from loopstate_protocol.errors import ErrorCode

from loopstate.core.errors import LoopstateError
from tests.runs.conftest import AGENT, lease_args
from tests.runs.schemas import THE_LOOP
from tests.conftest import needs_conformance

EVIDENCE = {"stage": "test", "requirement_ids": ["R1"], "type": "command", "description": "ran the suite",
            "procedure": ["pytest -q"], "outcome": "passed",
            "artifact_refs": [{"kind": "command_output", "ref": "artifacts/pytest.log"}], "digest": None,
            "environment": {"platform": "linux"}}


def refused(h, command, code: ErrorCode) -> LoopstateError:
    with pytest.raises(LoopstateError) as info:
        h.run(command)
    assert info.value.code == code, info.value
    return info.value


def open_issue(h, run_id, lease, *, blocking=True) -> str:
    events = h.run(proto.IssueOpen(run_id=run_id, title="flaky test", severity="high", blocking=blocking,
                                   reproduction=["run it twice"], **lease_args(lease))).events
    return events[0]["data"]["issue_id"]


def move(h, run_id, lease, issue_id, status, **extra):
    return h.run(proto.IssueUpdate(run_id=run_id, issue_id=issue_id, status=status, **extra, **lease_args(lease))).events


def test_evidence_is_recorded_with_loopstate_filled_identity(h):
    run_id, lease = h.leased()
    events = h.run(proto.EvidenceAdd(run_id=run_id, evidence=EVIDENCE, **lease_args(lease))).events
    record = events[0]["loopstate_record"]
    assert events[0]["data"] == {"evidence_id": record["evidence_id"], "outcome": "passed"}
    assert record["actor"] == AGENT and record["observed_at"] == "2026-08-16T08:00:00Z" and record["run_id"] == run_id


def test_passed_evidence_without_procedure_or_result_is_refused(h):
    run_id, lease = h.leased()
    error = refused(h, proto.EvidenceAdd(run_id=run_id, evidence={**EVIDENCE, "procedure": []}, **lease_args(lease)),
                    ErrorCode.VALIDATION_FAILED)
    assert error.details["rule"] == "passed_needs_procedure"
    error = refused(h, proto.EvidenceAdd(run_id=run_id, evidence={**EVIDENCE, "artifact_refs": []}, **lease_args(lease)),
                    ErrorCode.VALIDATION_FAILED)
    assert error.details["rule"] == "passed_needs_result"


def test_evidence_cannot_claim_loopstate_filled_fields(h):
    run_id, lease = h.leased()
    error = refused(h, proto.EvidenceAdd(run_id=run_id, evidence={**EVIDENCE, "actor": AGENT}, **lease_args(lease)),
                    ErrorCode.VALIDATION_FAILED)
    assert error.details["field"] == "$.actor"


def test_open_blocking_issue_in_any_status_but_closed_prevents_completion(h):
    run_id, lease = h.leased()
    issue_id = open_issue(h, run_id, lease)
    assert h.status(run_id).run["open_blocking_issues"] == 1
    for status in ("acknowledged", "resolving", "verification_pending", "deferred", "reopened"):
        move(h, run_id, lease, issue_id, status)
        error = refused(h, proto.Transition(run_id=run_id, to="complete", reason="done", **lease_args(lease)),
                        ErrorCode.RULE_VIOLATION)
        assert issue_id in error.message and "deferred is not closed" in error.message
    move(h, run_id, lease, issue_id, "closed", resolution="fixed")
    assert h.status(run_id).run["open_blocking_issues"] == 0
    assert h.types(proto.Transition(run_id=run_id, to="complete", reason="done", **lease_args(lease))) == ["run_completed"]


def test_non_blocking_issue_does_not_prevent_completion(h):
    run_id, lease = h.leased()
    open_issue(h, run_id, lease, blocking=False)
    assert h.types(proto.Transition(run_id=run_id, to="complete", reason="done", **lease_args(lease))) == ["run_completed"]


def test_issue_transition_is_recorded_with_from_and_to_and_counts_resolving_attempts(h):
    run_id, lease = h.leased()
    issue_id = open_issue(h, run_id, lease)
    events = move(h, run_id, lease, issue_id, "resolving")
    assert events[0]["data"] == {"issue_id": issue_id, "from_status": "open", "to_status": "resolving"}
    assert events[0]["loopstate_record"]["attempt_count"] == 1
    refused(h, proto.IssueUpdate(run_id=run_id, issue_id=issue_id, status="resolving", **lease_args(lease)),
            ErrorCode.RULE_VIOLATION)


def test_issue_evidence_ids_must_name_recorded_evidence(h):
    run_id, lease = h.leased()
    issue_id = open_issue(h, run_id, lease)
    error = refused(h, proto.IssueUpdate(run_id=run_id, issue_id=issue_id, status="verification_pending",
                                         evidence_ids=["00000000-0000-4000-8000-00000000dead"], **lease_args(lease)),
                    ErrorCode.VALIDATION_FAILED)
    assert error.details["rule"] == "evidence_recorded"
    evidence_id = h.run(proto.EvidenceAdd(run_id=run_id, evidence=EVIDENCE, **lease_args(lease))).events[0]["data"]["evidence_id"]
    move(h, run_id, lease, issue_id, "verification_pending", evidence_ids=[evidence_id])


def test_unknown_issue_is_not_found(h):
    run_id, lease = h.leased()
    refused(h, proto.IssueUpdate(run_id=run_id, issue_id="00000000-0000-4000-8000-00000000dead", status="closed",
                                 **lease_args(lease)), ErrorCode.NOT_FOUND)


def test_issue_ledger_projection_is_the_seeds_record(h):
    run_id, lease = h.leased()
    open_issue(h, run_id, lease)
    folder = h.service.project(h.root).dir / "runs" / run_id
    ledger = json.loads((folder / "issues.json").read_text())
    assert ledger["run_id"] == run_id and len(ledger["issues"]) == 1 and ledger["issues"][0]["status"] == "open"


@needs_conformance
def test_route_selection_is_stored_in_the_run_and_written_as_an_event(h):
    run_id, lease = h.leased()
    route = json.loads((THE_LOOP / "fixtures/valid/route.json").read_text())
    events = h.run(proto.RouteSelect(run_id=run_id, route=route, **lease_args(lease))).events
    assert events[0]["data"] == {"capability": "lifecycle.test", "selected_provider": "bundled-test", "selected_source": "bundled"}
    assert h.status(run_id).run["selected_routes"]["lifecycle.test"] == route


@needs_conformance
def test_route_with_a_selected_failed_candidate_is_refused(h):
    run_id, lease = h.leased()
    route = json.loads((THE_LOOP / "fixtures/valid/route.json").read_text())
    route["candidates"][0]["behavior_status"] = "failed"
    error = refused(h, proto.RouteSelect(run_id=run_id, route=route, **lease_args(lease)), ErrorCode.VALIDATION_FAILED)
    assert error.details["rule"] == "selected_not_failed"


def test_stage_complete_must_name_the_current_stage(h):
    run_id, lease = h.leased()
    h.run(proto.StageStart(run_id=run_id, stage="build", **lease_args(lease)))
    refused(h, proto.StageComplete(run_id=run_id, stage="test", outcome="passed", **lease_args(lease)), ErrorCode.RULE_VIOLATION)
    assert h.types(proto.StageComplete(run_id=run_id, stage="build", outcome="passed", **lease_args(lease))) == ["stage_completed"]


def test_worker_records_need_an_active_run(h):
    run_id, lease = h.leased()
    h.run(proto.Transition(run_id=run_id, to="blocked", reason="stuck", **lease_args(lease)))
    error = refused(h, proto.EvidenceAdd(run_id=run_id, evidence=EVIDENCE, **lease_args(lease)), ErrorCode.INVALID_TRANSITION)
    assert "is blocked (blocked: stuck), not active; recover it with `loopstate run resume`" in error.message
