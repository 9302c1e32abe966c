"""What readers see: a run's status (query and the ``runs/status/<run_id>`` view) and a grant."""

from __future__ import annotations

from typing import Any

from loopstate_protocol.runs import RunStatus

from loopstate.core.clock import parse_time
from loopstate.domains.base import Context
from loopstate.domains.runs.state import GrantState, RunState


def status(state: RunState, ctx: Context) -> RunStatus:
    lease = state.lease
    expired = None if lease is None else ctx.now >= parse_time(lease["expires_at"])
    return RunStatus(
        run_id=state.run_id,
        sequence=state.sequence,
        run=state.run,
        lease=lease,
        pending_operation=state.pending,
        issues=sorted(state.issues.values(), key=lambda i: (i["created_at"], i["issue_id"])),
        evidence_ids=sorted(state.evidence),
        lease_expired=expired,
        missing_markers=0 if state.obligation is None else len(state.obligation.missing),
        kill_switch=ctx.extra.get("kill_switch_state"),
    )


def summary(state: RunState, ctx: Context) -> dict[str, Any] | None:
    """One line of `run list`: what a run is doing and how much of its budgets it has used."""
    run = state.run
    if run is None:
        return None
    lease = state.lease
    usage, limits = run["usage"], run["budgets"]
    return {
        "run_id": state.run_id, "status": run["status"], "stage": run["stage"], "mode": run["mode"],
        "objective": run["objective"], "asset": run["asset"]["name"],
        "owner": None if run["owner"] is None else run["owner"]["actor"],
        "lease_live": None if lease is None else ctx.now < parse_time(lease["expires_at"]),
        "pending_operation": None if state.pending is None else state.pending["operation_id"],
        "open_blocking_issues": run["open_blocking_issues"],
        "budgets": {
            "duration_seconds": [usage["duration_seconds"], limits["max_duration_seconds"]],
            "mutations": [usage["mutations"], limits["max_mutations"]],
            "external_actions": [usage["external_actions"], limits["max_external_actions"]],
            "cost_usd": [usage["cost_usd"], limits["max_cost_usd"]],
        },
        "created_at": run["created_at"], "updated_at": run["updated_at"],
        "terminal_reason": run["terminal_reason"],
    }


def grant(state: GrantState) -> dict[str, Any] | None:
    return state.grant


def issue_ledger(state: RunState) -> dict[str, Any] | None:
    """The issues.json record (the issue ledger) for this run."""
    if state.run is None:
        return None
    issues = sorted(state.issues.values(), key=lambda i: (i["created_at"], i["issue_id"]))
    changed = [i["updated_at"] for i in issues]
    return {
        "schema_version": "1.0",
        "run_id": state.run_id,
        "issues": issues,
        # the ledger's own change time (so it is rewritten only when an issue changes)
        "updated_at": max(changed, key=parse_time) if changed else state.run["created_at"],
    }
