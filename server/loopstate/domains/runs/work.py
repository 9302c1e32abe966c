"""The six worker events, applied the same way whether direct or as an intent's completion.

route_selected, stage_started, evidence_recorded, issue_opened,
issue_transitioned and stage_completed each validate their payload and record,
change the projection, and return (data, record) for the audit event. A
completion passes the payload its intent fixed; a direct command builds it.
"""

from __future__ import annotations

import copy
from typing import Any

from loopstate_protocol.errors import ErrorCode

from loopstate.core.errors import LoopstateError
from loopstate.domains.runs import records
from loopstate.domains.runs.plan import Plan

COMPLETION_TYPES = tuple(records.COMPLETION_DATA)


def _rule(message: str, **details: Any) -> LoopstateError:
    return LoopstateError(ErrorCode.RULE_VIOLATION, message, **details)


def check_completion_data(type_: str, data: dict[str, Any]) -> None:
    records.decode(f"{type_} data", records.COMPLETION_DATA[type_], data)


def route_selected(plan: Plan, data: dict[str, Any] | None, record: dict[str, Any] | None) -> tuple[dict, dict | None]:
    if record is None:
        raise _rule("route_selected needs the complete route record: pass it as `route` (runs.route_select) or `record` (runs.complete)")
    route = records.to_dict(records.validate("route", record))
    derived = {k: route[k] for k in ("capability", "selected_provider", "selected_source")}
    if data is not None and data != derived:
        raise _rule("the route record does not match the declared route_selected payload", declared=data, record=derived)
    assert plan.run is not None
    plan.run["selected_routes"][route["capability"]] = route
    return derived, None


def stage_started(plan: Plan, data: dict[str, Any], *, reserved: bool) -> dict:
    """A direct start counts its attempt here; an intent's start counted it in the reservation."""
    assert plan.run is not None
    if not reserved:
        plan.run["usage"]["stage_attempts"][data["stage"]] += 1
        plan.run["stage"] = data["stage"]
    return data


def stage_completed(plan: Plan, data: dict[str, Any]) -> dict:
    assert plan.run is not None
    if plan.run["stage"] != data["stage"]:
        raise _rule(f"stage {data['stage']} is not the current stage ({plan.run['stage']}); start it first",
                    stage=data["stage"], current=plan.run["stage"])
    return data


def evidence_recorded(plan: Plan, evidence_id: str, fields: dict[str, Any], owner: dict[str, Any],
                      outcome: str | None = None) -> tuple[dict, dict]:
    assert plan.run is not None
    _require_object("evidence", fields)
    if evidence_id in plan.state.evidence:
        raise LoopstateError(ErrorCode.CONFLICT, f"evidence {evidence_id} is already recorded; use a new evidence id", evidence_id=evidence_id)
    for taken in ("evidence_id", "run_id", "actor", "observed_at", "schema_version"):
        if taken in fields:
            raise records.refuse("evidence", f"$.{taken}", "filled_by_loopstate", "is filled in by loopstate; leave it out")
    record = {
        "stage": plan.run["stage"], **copy.deepcopy(fields),
        "schema_version": records.SCHEMA_VERSION, "evidence_id": evidence_id, "run_id": plan.state.run_id,
        "actor": owner, "observed_at": plan.at,
    }
    evidence = records.to_dict(records.validate("evidence", record))
    if outcome is not None and evidence["outcome"] != outcome:
        raise _rule(f"the evidence outcome {evidence['outcome']} is not the declared {outcome}; the completion must match its intent")
    return {"evidence_id": evidence_id, "outcome": evidence["outcome"]}, evidence


def issue_opened(plan: Plan, issue_id: str, fields: dict[str, Any], severity: str | None = None) -> tuple[dict, dict]:
    _require_object("issue", fields)
    if issue_id in plan.issues:
        raise LoopstateError(ErrorCode.CONFLICT, f"issue {issue_id} already exists; use a new issue id, or update it with `loopstate run issue update`", issue_id=issue_id)
    _check_evidence_ids(plan, fields.get("evidence_ids", []))
    issue = {
        "requirement_ids": [], "evidence_ids": [], "reproduction": [], "regression_procedure": [], "owner": None,
        **copy.deepcopy(fields),
        "issue_id": issue_id, "status": "open", "attempt_count": 0, "resolution": None,
        "created_at": plan.at, "updated_at": plan.at,
    }
    issue = records.to_dict(records.decode("issue", records.Issue, issue))
    if len(set(issue["evidence_ids"])) != len(issue["evidence_ids"]):
        raise records.refuse("issue", "$.evidence_ids", "unique_items", "entries must be unique")
    if severity is not None and issue["severity"] != severity:
        raise _rule(f"the issue severity {issue['severity']} is not the declared {severity}; the completion must match its intent")
    plan.issues[issue_id] = issue
    plan.recount_blocking()
    return {"issue_id": issue_id, "severity": issue["severity"]}, issue


def issue_transitioned(plan: Plan, issue_id: str, to_status: str, *, resolution: str | None = None,
                       evidence_ids: list[str] | None = None, from_status: str | None = None) -> tuple[dict, dict]:
    issue = plan.issues.get(issue_id)
    if issue is None:
        raise LoopstateError(ErrorCode.NOT_FOUND, f"issue {issue_id} is not in this run's ledger", issue_id=issue_id)
    if from_status is not None and issue["status"] != from_status:
        raise _rule(f"issue {issue_id} is {issue['status']}, not {from_status}")
    if issue["status"] == to_status:
        raise _rule(f"issue {issue_id} is already {to_status}; choose another status")
    updated = {**copy.deepcopy(issue), "status": to_status, "updated_at": plan.at}
    if to_status == "resolving":
        updated["attempt_count"] += 1
    if resolution is not None:
        updated["resolution"] = resolution
    if evidence_ids is not None:
        _check_evidence_ids(plan, evidence_ids)
        updated["evidence_ids"] = list(evidence_ids)
    updated = records.to_dict(records.decode("issue", records.Issue, updated))
    plan.issues[issue_id] = updated
    plan.recount_blocking()
    return {"issue_id": issue_id, "from_status": issue["status"], "to_status": to_status}, updated


def _require_object(record: str, value: Any) -> None:
    if not isinstance(value, dict):
        raise records.refuse(record, "$", "type", f"must be a JSON object of {record} fields, not {type(value).__name__}")


def _check_evidence_ids(plan: Plan, ids: list[str]) -> None:
    for evidence_id in ids:
        if evidence_id not in plan.state.evidence:
            raise records.refuse("issue", "$.evidence_ids", "evidence_recorded",
                                 f"{evidence_id} is not an evidence record of this run")
