"""The callback-free safety writes every run command performs before its own work.

In order: the missing suffix of a budget marker sequence (from its source
event, never replaying anything), the truthful failure of an active run whose
lease expired, the per-run ``authority_revoked`` marker of a revoked grant
(written exactly once), and the lease-independent kill switch halt. Each is skipped while an operation is pending: nothing may interleave
between an intent and its completion or reconciliation.
"""

from __future__ import annotations

import copy
from typing import Any

from loopstate.domains.runs import budgets
from loopstate.domains.runs.machine import KILLABLE, TERMINAL
from loopstate.domains.runs.plan import Plan


def emit_markers(plan: Plan, source: dict[str, Any], keys) -> None:
    """budget_reached markers for ``keys``, with the source's time, lease identity and projection."""
    run = source["projection"]["run"]
    envelope = None if source["lease_id"] is None else {"lease_id": source["lease_id"], "generation": source["lease_generation"]}
    for key in keys:
        plan.emit(
            "budget_reached", budgets.marker_data(run["budgets"], run["usage"], key),
            actor=source["actor"], envelope=envelope, at=source["at"], projection=copy.deepcopy(source["projection"]),
        )


def markers_after(plan: Plan, source: dict[str, Any]) -> None:
    """If ``source`` (just emitted) exhausted budgets, write its whole marker sequence."""
    run = source["projection"]["run"]
    keys = budgets.exhausted_keys(run["budgets"], run["usage"])
    if keys:
        emit_markers(plan, source, keys)


def repair_markers(plan: Plan) -> None:
    obligation = plan.state.obligation
    if obligation is not None and not plan.events:
        emit_markers(plan, obligation.source, obligation.missing)


def revocation_marker(plan: Plan, grant: dict[str, Any] | None, kill_switch: dict[str, Any] | None) -> bool:
    """Write the bound grant's authority_revoked marker if it is revoked and the run lacks it."""
    run = plan.run
    if run is None or grant is None or grant["revoked_at"] is None or plan.pending is not None:
        return False
    if grant["grant_id"] != run["authority_grant_id"] or grant["grant_id"] in plan.revoked_markers:
        return False
    if run["status"] in TERMINAL:
        return False
    if run["status"] == "active" and kill_switch is None:
        plan.set_status("waiting_approval", "authority_revoked",
                        f"grant {grant['grant_id']} was revoked by {grant['revoked_by']}")
    plan.emit("authority_revoked", {
        "grant_id": grant["grant_id"], "revoked_at": grant["revoked_at"], "revoked_by": grant["revoked_by"],
    })
    return True


def reconcile_unknown(plan: Plan, actor: dict[str, Any] | None) -> None:
    """Close a pending intent whose outcome nobody can prove: keep its reservation, never replay it."""
    pending = plan.pending
    assert pending is not None and plan.run is not None
    plan.pending = None
    if pending["effect"] == "local":
        plan.set_status("failed", "operation_outcome_unknown",
                        f"operation {pending['operation_id']} ({pending['completion_event_type']}) was interrupted; "
                        "its local effect is unknown and it is never replayed")
    else:
        plan.set_status("waiting_external", "external_operation_outcome_unknown",
                        f"operation {pending['operation_id']} ({pending['completion_event_type']}) was interrupted; "
                        "its outward effect is unknown and must be checked outside loopstate")
    source = plan.emit(
        "operation_reconciled",
        {"operation_id": pending["operation_id"], "effect": pending["effect"], "outcome": "unknown"},
        actor=actor, envelope=plan.lease,
    )
    markers_after(plan, source)


def kill_switch_halt(plan: Plan, kill_switch: dict[str, Any] | None, actor: dict[str, Any] | None) -> bool:
    """The lease-independent halt reducer: only reduces, never authorizes.

    A failed run whose budgets are exhausted is not halted: no recovery can
    ever take it back to work (exhausted usage blocks recovery), so it is
    stopped for good already, and its terminal reason (``budget_reached...``)
    is the truth a later switch must not overwrite.
    """
    run = plan.run
    if run is None or kill_switch is None or run["status"] not in KILLABLE:
        return False
    if run["status"] == "failed" and plan.exhausted():
        return False
    if plan.pending is not None:
        reconcile_unknown(plan, actor)
    reason = "present" if kill_switch["state"] == "present" else "unreadable (an unreadable switch halts)"
    plan.set_status("halted_kill_switch", "kill_switch", f"kill switch {kill_switch['path']} is {reason}")
    plan.emit("kill_switch_detected", {"path": kill_switch["path"]}, actor=actor)
    return True


def expired_run(plan: Plan, actor: dict[str, Any] | None) -> bool:
    """The truthful reduction of an active run whose lease expired with nothing pending: failed.

    The time proven up to the expiry is counted first; when it reaches the duration budget, that
    budget is the primary reason (as for any completion at expiry) and its markers follow at once.
    """
    run = plan.run
    if run is None or run["status"] != "active" or plan.pending is not None or not plan.lease_expired():
        return False
    assert plan.lease is not None
    plan.accrue()
    if not plan.fail_if_exhausted():
        plan.set_status("failed", "lease_expired", f"the lease expired at {plan.lease['expires_at']} with the run active")
    source = plan.emit("run_failed", {"reason": run["terminal_reason"]["code"]}, actor=actor)
    markers_after(plan, source)
    return True


def boundary(plan: Plan, actor: dict[str, Any] | None, *, closing: bool = False) -> None:
    """Everything a command boundary writes before the command's own work.

    ``closing``: the command itself closes the pending intent (completion or
    reconciliation), so the safety writes wait until after it.
    """
    repair_markers(plan)
    kill_switch = plan.ctx.extra.get("kill_switch")
    if plan.pending is not None:
        if not closing:
            kill_switch_halt(plan, kill_switch, actor)
        return
    expired_run(plan, actor)
    revocation_marker(plan, plan.ctx.extra.get("grant"), kill_switch)
    kill_switch_halt(plan, kill_switch, actor)
