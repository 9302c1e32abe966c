"""decide(state, command, ctx) -> events for run streams: every rule of a bounded run, pure.

Each command runs the same boundary first (``safety.boundary``: repair a
missing budget-marker suffix, write a revoked grant's marker, apply the kill
switch), then its own checks, then its events. A refusal with nothing to write
raises; a refusal after a safety write returns the safety events and leaves
the refusal in ``ctx.extra["refusal"]`` for the service to raise once they are
durable (the halt is recorded *and* the caller is told no).

What the impure glue supplies in ``ctx.extra``: ``config`` (a validated config
dict), ``kill_switch`` (None, or the first present/unreadable switch), ``grant``
(the run's bound grant as its stream holds it, read under the grant's shared
lock) and ``new_grant`` (a replacement grant offered to recovery).
"""

from __future__ import annotations

import copy
import datetime as dt
from typing import Any, Callable

from loopstate_protocol import runs as proto
from loopstate_protocol.errors import ErrorCode

from loopstate.core import canonical
from loopstate.core.clock import format_time, parse_time
from loopstate.core.errors import LoopstateError
from loopstate.domains.base import Context
from loopstate.domains.runs import authority, budgets, records, safety, work
from loopstate.domains.runs.config import effective_config
from loopstate.domains.runs.grants import default_grant_id
from loopstate.domains.runs.machine import RECOVERABLE, TERMINAL, require_stage_free, require_transition
from loopstate.domains.runs.plan import SYSTEM_ACTOR, Plan
from loopstate.domains.runs.state import RunState

REFUSAL = "refusal"


def _rule(message: str, **details: Any) -> LoopstateError:
    return LoopstateError(ErrorCode.RULE_VIOLATION, message, **details)


def refuse(plan: Plan, error: LoopstateError) -> list[dict[str, Any]]:
    """Raise when nothing was written; otherwise keep the safety writes and report the refusal after."""
    if not plan.events:
        raise error
    plan.ctx.extra[REFUSAL] = error
    return plan.events


def actor_of(value: Any, field: str = "actor") -> dict[str, Any]:
    return records.to_dict(records.decode(field, records.Actor, value))


def require_text(value: Any, command: str, field: str, what: str) -> str:
    """A free-text parameter the event records: a non-empty string, refused before anything is written."""
    if not isinstance(value, str) or not value.strip():
        raise records.refuse(command, f"$.{field}", "length", f"must not be empty: {what}")
    return value


def check_uuid(value: Any, field: str) -> str:
    records.decode(field, records.UUID4, value)
    return value


def _lease_seconds(ctx: Context) -> dt.timedelta:
    return dt.timedelta(seconds=effective_config(ctx)["lease_seconds"])


# boundary checks ------------------------------------------------------------------------

def _start(state: RunState, ctx: Context) -> Plan:
    if not state.exists:
        raise LoopstateError(ErrorCode.NOT_FOUND, f"run {state.run_id} does not exist; create it with `loopstate run create`",
                             run_id=state.run_id)
    if state.broken:
        raise LoopstateError(
            ErrorCode.CORRUPT_LEDGER,
            f"run {state.run_id}'s audit log breaks projection continuity ({state.broken}); it is preserved and "
            "blocks mutation: inspect it with `loopstate verify`",
            run_id=state.run_id, reason=state.broken,
        )
    if state.last_at is not None and ctx.now < state.last_at:
        raise LoopstateError(
            ErrorCode.CLOCK_REVERSED,
            f"the clock reads {format_time(ctx.now)}, earlier than the run's last event at {format_time(state.last_at)}; "
            "mutation halts until the clock is right",
            now=format_time(ctx.now), last=format_time(state.last_at),
        )
    plan = Plan(state, ctx)
    if plan.lease is not None:
        try:
            parse_time(plan.lease["expires_at"], field="lease.expires_at")
        except LoopstateError:
            raise LoopstateError(ErrorCode.CLOCK_REVERSED, "the lease's expiry is not a readable time; mutation halts: inspect the run's log with `loopstate verify`") from None
    return plan


def _require_lease(plan: Plan, lease_id: str | None, generation: int | None, *, allow_expired: bool = False) -> dict[str, Any]:
    lease = plan.lease
    if lease is None:
        raise LoopstateError(ErrorCode.LEASE_MISMATCH, f"run {plan.state.run_id} has no lease; acquire it first",
                             run_id=plan.state.run_id)
    if lease["lease_id"] != lease_id or lease["generation"] != generation:
        raise LoopstateError(
            ErrorCode.LEASE_MISMATCH,
            f"lease {lease_id} generation {generation} is not the run's current lease "
            f"({lease['lease_id']} generation {lease['generation']}); a stale holder is fenced out",
            lease_id=lease_id, generation=generation, current_lease_id=lease["lease_id"], current_generation=lease["generation"],
        )
    if not allow_expired and plan.lease_expired():
        raise LoopstateError(
            ErrorCode.LEASE_EXPIRED,
            f"lease {lease_id} expired at {lease['expires_at']} (now {plan.at}); an expired lease is never renewed in "
            "place: recover with `loopstate run resume`",
            lease_id=lease_id, expires_at=lease["expires_at"],
        )
    return lease


def _require_active(plan: Plan) -> None:
    assert plan.run is not None
    if plan.run["status"] != "active":
        reason = plan.run["terminal_reason"]
        why = f" ({reason['code']}: {reason['explanation']})" if reason else ""
        status = plan.run["status"]
        hint = ("terminal runs stay terminal" if status in TERMINAL
                else "acquire its first lease with `loopstate run acquire`" if status == "ready"
                else "recover it with `loopstate run resume`")
        raise LoopstateError(ErrorCode.INVALID_TRANSITION, f"run {plan.state.run_id} is {status}{why}, not active; {hint}",
                             status=status)


def _require_no_pending(plan: Plan) -> None:
    if plan.pending is not None:
        raise _rule(
            f"operation {plan.pending['operation_id']} ({plan.pending['completion_event_type']}) is pending; report its "
            "exact completion or reconcile it first: nothing may come between an intent and its closure",
            operation_id=plan.pending["operation_id"],
        )


def _ordinary_exhaustion(plan: Plan, actor: dict[str, Any]) -> bool:
    """Duration proven up to now reached its limit: the run fails, markers follow."""
    plan.accrue()
    assert plan.run is not None
    if plan.run["status"] != "active" or not plan.exhausted():
        return False
    plan.fail_if_exhausted()
    source = plan.emit("run_failed", {"reason": plan.run["terminal_reason"]["code"]}, actor=actor, envelope=plan.lease)
    safety.markers_after(plan, source)
    return True


def _worker(state: RunState, command: proto.LeasedCommand, ctx: Context) -> tuple[Plan, dict[str, Any]] | list:
    """Common start of every leased worker command; returns events instead when the boundary wrote some."""
    plan = _start(state, ctx)
    owner = plan.lease["owner"] if plan.lease is not None else None
    safety.boundary(plan, owner)
    if plan.events:
        return refuse(plan, _boundary_refusal(plan))
    lease = _require_lease(plan, command.lease_id, command.generation)
    _require_no_pending(plan)
    return plan, lease["owner"]


def _boundary_refusal(plan: Plan) -> LoopstateError:
    return safety_refusal(plan.events[-1])


# How each kind of switch is lifted: a STOP file by hand, a team store's stop by the command that set it.
LIFTING = "delete a STOP file; `loopstate run unstop` lifts a shared store's stop"


def safety_refusal(last: dict[str, Any]) -> LoopstateError:
    """Why a command was refused when a safety write (``last``) took its place, and what to do next."""
    run = last["projection"]["run"]
    run_id = run["run_id"]
    reason = run.get("terminal_reason") or {}
    code = str(reason.get("code", ""))
    if last["type"] == "kill_switch_detected":
        return LoopstateError(
            ErrorCode.KILL_SWITCH,
            f"run {run_id} halted: {reason.get('explanation')}; the switch never authorizes work: remove it "
            f"yourself, then recover with `loopstate run resume` ({LIFTING})",
            path=last["data"]["path"])
    if last["type"] == "authority_revoked":
        data = last["data"]
        return authority.denied(
            f"authority grant {data['grant_id']} was revoked at {data['revoked_at']} by {data['revoked_by']}; "
            "the run's revocation marker is written; continue under a new grant",
            grant_id=data["grant_id"])
    if last["type"] == "run_failed" and code == "lease_expired":
        return LoopstateError(ErrorCode.LEASE_EXPIRED, f"run {run_id} failed: {reason.get('explanation')}; "
                              "recover with `loopstate run resume`")
    if code.startswith("budget_reached"):
        return LoopstateError(ErrorCode.BUDGET_EXHAUSTED,
                              f"run {run_id} failed: {code}; exhausted usage blocks recovery and new work: start a "
                              "new run", reason=code)
    return LoopstateError(ErrorCode.INVALID_TRANSITION, f"run {run_id} is {run['status']}"
                          + (f" ({code}: {reason.get('explanation')})" if reason else ""), status=run["status"])


# commands ------------------------------------------------------------------------------------

def check_create(c: proto.Create, config_budgets: dict[str, Any]) -> tuple[dict, dict, dict]:
    """A create's own fields: its actor, its asset, and its budgets over the config's (those it leaves out).

    Returns them as the run records them. The service runs this before it touches
    the store (with the default config's budgets; the decision repeats it with
    the project's), so an invalid budget leaves no file and no grant behind.
    """
    if c.authority_grant_id is not None:
        check_uuid(c.authority_grant_id, "authority_grant_id")
    actor = actor_of(c.actor)
    asset = records.to_dict(records.decode("asset", records.Asset, c.asset))
    offered = c.budgets if c.budgets is not None else {}
    frozen = records.to_dict(records.decode(
        "budgets", records.Budgets, {**config_budgets, **offered} if isinstance(offered, dict) else offered))
    return actor, asset, frozen


def create(state: RunState, c: proto.Create, ctx: Context) -> list[dict[str, Any]]:
    if state.sequence or state.exists:
        raise LoopstateError(ErrorCode.CONFLICT, f"run {state.run_id} already exists; run_created is written exactly once",
                             run_id=state.run_id)
    kill_switch = ctx.extra.get("kill_switch")
    if kill_switch is not None:
        raise LoopstateError(ErrorCode.KILL_SWITCH, f"kill switch {kill_switch['path']} is {kill_switch['state']}; "
                             "no run is created while it stands", path=kill_switch["path"])
    config = effective_config(ctx)
    actor, asset, frozen = check_create(c, config["budgets"])
    grant_id = c.authority_grant_id if c.authority_grant_id is not None else default_grant_id(state.run_id)
    grant = authority.require_current(ctx.extra.get("grant"), grant_id, ctx.now)
    authority.require_asset(grant, asset["name"])
    now = format_time(ctx.now)
    run = {
        "schema_version": records.SCHEMA_VERSION, "run_id": state.run_id, "asset": asset, "mode": c.mode or config["default_mode"],
        "status": "ready", "stage": "strategize", "objective": c.objective, "done_gate": list(c.done_gate),
        "authority_grant_id": grant_id, "budgets": frozen, "usage": budgets.empty_usage(),
        "owner": None, "selected_routes": {}, "open_blocking_issues": 0, "last_heartbeat_at": None,
        "created_at": now, "updated_at": now, "terminal_reason": None,
    }
    records.validate("run", run)
    plan = Plan(state, ctx)
    plan.run = run
    plan.emit("run_created", {"objective": c.objective}, actor=actor)
    plan.emit("authority_granted", {"grant_id": grant["grant_id"], "level": grant["level"]}, actor=actor)
    return plan.events


NEW_RUN_HINT = ("acquisition is denied and a ready run keeps its binding until its first lease: continue with a new "
                "run created under a current grant")


def acquire(state: RunState, c: proto.Acquire, ctx: Context) -> list[dict[str, Any]]:
    plan = _start(state, ctx)
    owner = actor_of(c.owner, "owner")
    safety.boundary(plan, owner)
    if plan.events:
        return refuse(plan, _boundary_refusal(plan))
    assert plan.run is not None
    lease = plan.lease
    if lease is not None:
        if not plan.lease_expired():
            raise LoopstateError(
                ErrorCode.LEASE_HELD,
                f"run {state.run_id} is leased to {lease['owner']['actor']} ({lease['owner']['harness']}, session "
                f"{lease['owner']['session_id']}) until {lease['expires_at']}; a live lease cannot be replaced",
                holder=lease["owner"], expires_at=lease["expires_at"], lease_id=lease["lease_id"],
            )
        raise _rule(f"run {state.run_id}'s lease expired at {lease['expires_at']}; lease_acquired is written once per "
                    "run: replace an expired lease with `loopstate run resume` (recovery, generation + 1)")
    if plan.run["status"] in RECOVERABLE:
        raise LoopstateError(ErrorCode.INVALID_TRANSITION,
                             f"run {state.run_id} is {plan.run['status']}; only its first lease is acquired: recover "
                             "it with `loopstate run resume` (explicit recovery, fresh lease)", status=plan.run["status"])
    require_transition(plan.run["status"], "active")
    try:
        grant = authority.require_current(ctx.extra.get("grant"), plan.run["authority_grant_id"], ctx.now)
    except LoopstateError as error:  # a ready run keeps its binding: say where work can continue
        raise LoopstateError(error.code, f"{error.message.split(';')[0]}; {NEW_RUN_HINT}", **error.details) from None
    authority.require_asset(grant, plan.run["asset"]["name"])
    if c.lane_id is not None:
        check_uuid(c.lane_id, "lane_id")
    plan.lease = {
        "schema_version": records.SCHEMA_VERSION, "lease_id": ctx.new_id(), "run_id": state.run_id,
        "lane_id": c.lane_id, "owner": owner, "acquired_at": plan.at, "renewed_at": plan.at,
        "expires_at": format_time(ctx.now + _lease_seconds(ctx)), "generation": 0,
    }
    plan.run["owner"] = owner
    plan.run["last_heartbeat_at"] = plan.at
    plan.set_status("active")
    plan.emit("lease_acquired", _lease_data(plan.lease), actor=owner, envelope=plan.lease)
    return plan.events


def _lease_data(lease: dict[str, Any]) -> dict[str, Any]:
    return {"lease_id": lease["lease_id"], "generation": lease["generation"], "expires_at": lease["expires_at"]}


def renewal_threshold(ctx: Context) -> dt.timedelta:
    """How long after a durable renewal the next heartbeat is written: min(heartbeat, lease / 2)."""
    config = effective_config(ctx)
    return dt.timedelta(seconds=min(config["heartbeat_seconds"], config["lease_seconds"] / 2))


def heartbeat(state: RunState, c: proto.Heartbeat, ctx: Context) -> list[dict[str, Any]]:
    started = _worker(state, c, ctx)
    if isinstance(started, list):
        return started
    plan, owner = started
    assert plan.run is not None and plan.lease is not None
    if plan.run["status"] not in ("active", "waiting_approval", "waiting_external", "blocked"):
        _require_active(plan)
    if _ordinary_exhaustion(plan, owner):
        return refuse(plan, _boundary_refusal(plan))
    if ctx.now - parse_time(plan.lease["renewed_at"]) < renewal_threshold(ctx):
        return []  # coalesced: the lease is comfortably live; nothing material to record
    plan.lease["renewed_at"] = plan.at
    plan.lease["expires_at"] = format_time(ctx.now + _lease_seconds(ctx))
    plan.run["last_heartbeat_at"] = plan.at
    plan.emit("lease_renewed", _lease_data(plan.lease), actor=owner, envelope=plan.lease)
    return plan.events


TERMINAL_EVENTS = {"complete": "run_completed", "failed": "run_failed", "cancelled": "run_cancelled"}


def transition(state: RunState, c: proto.Transition, ctx: Context) -> list[dict[str, Any]]:
    started = _worker(state, c, ctx)
    if isinstance(started, list):
        return started
    plan, owner = started
    assert plan.run is not None
    if c.to in ("ready", "active"):
        raise LoopstateError(ErrorCode.INVALID_TRANSITION,
                             f"a run becomes {c.to} only through explicit recovery: use `loopstate run resume`")
    require_transition(plan.run["status"], c.to)
    if not c.reason:
        raise records.refuse("transition", "$.reason", "length", "give the reason for the transition")
    if _ordinary_exhaustion(plan, owner):
        return refuse(plan, _boundary_refusal(plan))
    if c.to == "complete" and plan.run["open_blocking_issues"]:
        blocking = sorted(f"{i['issue_id']} ({i['status']})" for i in plan.issues.values()
                          if i["blocking"] and i["status"] != "closed")
        raise _rule(f"run {state.run_id} has open blocking issues: {', '.join(blocking)}; only closed resolves a "
                    "blocking issue (deferred is not closed)", issues=blocking)
    code = {"complete": "completed", "failed": "failed_by_worker", "cancelled": "cancelled_by_worker"}.get(c.to, c.to)
    plan.set_status(c.to, code, c.reason)
    if c.to in TERMINAL_EVENTS:
        plan.emit(TERMINAL_EVENTS[c.to], {"reason": c.reason}, actor=owner, envelope=plan.lease)
    else:
        plan.emit("heartbeat", {"stage": plan.run["stage"], "status": c.to}, actor=owner, envelope=plan.lease)
    return plan.events


def _direct(state: RunState, c: proto.LeasedCommand, ctx: Context,
            body: Callable[[Plan, dict[str, Any]], tuple[str, dict, dict | None]]) -> list[dict[str, Any]]:
    """A worker event without an intent: it records a fact and reserves no mutation."""
    started = _worker(state, c, ctx)
    if isinstance(started, list):
        return started
    plan, owner = started
    _require_active(plan)
    if _ordinary_exhaustion(plan, owner):
        return refuse(plan, _boundary_refusal(plan))
    type_, data, record = body(plan, owner)
    plan.fail_if_exhausted()
    source = plan.emit(type_, data, actor=owner, envelope=plan.lease, record=record)
    safety.markers_after(plan, source)
    return plan.events


def stage_start(state: RunState, c: proto.StageStart, ctx: Context) -> list[dict[str, Any]]:
    def body(plan: Plan, owner: dict) -> tuple[str, dict, None]:
        assert plan.run is not None
        require_stage_free(state.run_id, state.open_stage, state.open_stage_sequence, c.stage)
        if plan.run["usage"]["stage_attempts"][c.stage] + 1 > plan.run["budgets"]["max_stage_attempts"]:
            raise LoopstateError(ErrorCode.BUDGET_EXHAUSTED, f"stage {c.stage} has used all {plan.run['budgets']['max_stage_attempts']} attempts (max_stage_attempts); a stuck stage ends the run: start a new one", stage=c.stage)
        return "stage_started", work.stage_started(plan, {"stage": c.stage}, reserved=False), None
    return _direct(state, c, ctx, body)


def stage_complete(state: RunState, c: proto.StageComplete, ctx: Context) -> list[dict[str, Any]]:
    return _direct(state, c, ctx, lambda plan, owner: (
        "stage_completed", work.stage_completed(plan, {"stage": c.stage, "outcome": c.outcome}), None))


def route_select(state: RunState, c: proto.RouteSelect, ctx: Context) -> list[dict[str, Any]]:
    return _direct(state, c, ctx, lambda plan, owner: ("route_selected", *work.route_selected(plan, None, c.route)))


def issue_open(state: RunState, c: proto.IssueOpen, ctx: Context) -> list[dict[str, Any]]:
    def body(plan: Plan, owner: dict) -> tuple[str, dict, dict]:
        issue_id = check_uuid(c.issue_id, "issue_id") if c.issue_id is not None else ctx.new_id()
        fields = {
            "title": c.title, "severity": c.severity, "blocking": c.blocking, "requirement_ids": c.requirement_ids,
            "reproduction": c.reproduction, "regression_procedure": c.regression_procedure,
            "evidence_ids": c.evidence_ids, "owner": c.owner,
        }
        return ("issue_opened", *work.issue_opened(plan, issue_id, fields))
    return _direct(state, c, ctx, body)


def issue_update(state: RunState, c: proto.IssueUpdate, ctx: Context) -> list[dict[str, Any]]:
    return _direct(state, c, ctx, lambda plan, owner: ("issue_transitioned", *work.issue_transitioned(
        plan, c.issue_id, c.status, resolution=c.resolution, evidence_ids=c.evidence_ids)))


def evidence_add(state: RunState, c: proto.EvidenceAdd, ctx: Context) -> list[dict[str, Any]]:
    def body(plan: Plan, owner: dict) -> tuple[str, dict, dict]:
        evidence_id = check_uuid(c.evidence_id, "evidence_id") if c.evidence_id is not None else ctx.new_id()
        return ("evidence_recorded", *work.evidence_recorded(plan, evidence_id, c.evidence, owner))
    return _direct(state, c, ctx, body)


# operation intents --------------------------------------------------------------------------

def intend(state: RunState, c: proto.Intend, ctx: Context) -> list[dict[str, Any]]:
    require_text(c.action, "intend", "action", "name the action, e.g. local_write")
    require_text(c.destination, "intend", "destination", "name the destination, e.g. repository")
    started = _worker(state, c, ctx)
    if isinstance(started, list):
        return started
    plan, owner = started
    _require_active(plan)
    assert plan.run is not None
    grant = authority.require_current(ctx.extra.get("grant"), plan.run["authority_grant_id"], ctx.now)
    authority.require_asset(grant, plan.run["asset"]["name"])
    authority.require_action(grant, c.action, c.destination)
    if _ordinary_exhaustion(plan, owner):
        return refuse(plan, _boundary_refusal(plan))
    work.check_completion_data(c.completion_event_type, c.completion_data)
    if c.completion_event_type == "stage_started":  # the same one-open-stage rule as `run stage start`
        require_stage_free(state.run_id, state.open_stage, state.open_stage_sequence, c.completion_data["stage"])
    if c.completion_event_type == "stage_completed":
        work.stage_completed(plan, c.completion_data)
    if c.completion_event_type == "issue_transitioned":
        issue = plan.issues.get(c.completion_data["issue_id"])
        if issue is None or issue["status"] != c.completion_data["from_status"]:
            current = issue["status"] if issue else "not in this run's ledger"
            raise _rule(f"the declared issue_transitioned starts from {c.completion_data['from_status']}, but the issue "
                        f"is {current}; declare its current status as from_status")
        if c.completion_data["to_status"] == issue["status"]:
            raise _rule(f"issue {issue['issue_id']} is already {issue['status']}; declare another to_status")
    if c.completion_event_type == "issue_opened" and c.completion_data["issue_id"] in plan.issues:
        raise LoopstateError(ErrorCode.CONFLICT, f"issue {c.completion_data['issue_id']} already exists; declare a new issue id")
    if c.completion_event_type == "evidence_recorded" and c.completion_data["evidence_id"] in state.evidence:
        raise LoopstateError(ErrorCode.CONFLICT, f"evidence {c.completion_data['evidence_id']} is already recorded; declare a new evidence id")
    operation_id = check_uuid(c.operation_id, "operation_id") if c.operation_id is not None else ctx.new_id()
    stage_attempt = c.completion_data["stage"] if c.completion_event_type == "stage_started" else None
    reservation = budgets.reservation_for(
        plan.run["usage"], plan.run["stage"], external=not authority.is_local(c.action, c.destination),
        cost=c.cost_usd, stage_attempt=stage_attempt,
    )
    budgets.check_reservation(plan.run["budgets"], plan.run["usage"], reservation)
    budgets.apply_reservation(plan.run, reservation)
    plan.pending = {
        "operation_id": operation_id,
        "completion_event_type": c.completion_event_type,
        "completion_data": copy.deepcopy(c.completion_data),
        "effect": "local" if authority.is_local(c.action, c.destination) else "external",
        "reservation": reservation,
    }
    plan.emit("operation_intended", copy.deepcopy(plan.pending), actor=owner, envelope=plan.lease)
    return plan.events


def complete(state: RunState, c: proto.Complete, ctx: Context) -> list[dict[str, Any]]:
    plan = _start(state, ctx)
    safety.boundary(plan, None, closing=True)
    pending = plan.pending
    if pending is None or pending["operation_id"] != c.operation_id:
        raise _rule(f"operation {c.operation_id} is not pending on run {state.run_id}; an interrupted operation is "
                    "reconciled, never replayed", operation_id=c.operation_id)
    assert plan.run is not None  # an operation is pending only on a run that exists
    lease = _require_lease(plan, c.lease_id, c.generation, allow_expired=True)
    owner = lease["owner"]
    declared = (pending["completion_event_type"], canonical.encode(pending["completion_data"]))
    if (c.completion_event_type, canonical.encode(c.completion_data)) != declared:
        raise _rule("the completion must exactly match the intent's declared event type and payload",
                    declared_type=pending["completion_event_type"], declared_data=pending["completion_data"])
    expired = plan.lease_expired()
    plan.accrue()
    plan.pending = None
    type_, data = pending["completion_event_type"], pending["completion_data"]
    record = None
    if type_ == "route_selected":
        data, record = work.route_selected(plan, data, c.record)
        record = None
    elif type_ == "stage_started":
        work.stage_started(plan, data, reserved=True)
    elif type_ == "stage_completed":
        work.stage_completed(plan, data)
    elif type_ == "evidence_recorded":
        if c.record is None:
            raise _rule("an evidence_recorded completion needs the evidence record: pass it as `record`")
        data, record = work.evidence_recorded(plan, data["evidence_id"], c.record, owner, outcome=data["outcome"])
    elif type_ == "issue_opened":
        if c.record is None:
            raise _rule("an issue_opened completion needs the issue record: pass it as `record`")
        data, record = work.issue_opened(plan, data["issue_id"], c.record, severity=data["severity"])
    else:  # issue_transitioned
        extra = c.record or {}
        data, record = work.issue_transitioned(
            plan, data["issue_id"], data["to_status"], from_status=data["from_status"],
            resolution=extra.get("resolution"), evidence_ids=extra.get("evidence_ids"),
        )
    if plan.run["status"] == "active":
        plan.fail_if_exhausted(also_expired=expired)
    source = plan.emit(type_, data, actor=owner, envelope=lease, record=record)
    safety.markers_after(plan, source)
    safety.boundary(plan, owner)
    return plan.events


def reconcile(state: RunState, c: proto.Reconcile, ctx: Context) -> list[dict[str, Any]]:
    plan = _start(state, ctx)
    actor = actor_of(c.actor)
    safety.boundary(plan, actor, closing=True)
    pending = plan.pending
    if pending is None or pending["operation_id"] != c.operation_id:
        raise _rule(f"operation {c.operation_id} is not pending on run {state.run_id}; it was already closed",
                    operation_id=c.operation_id)
    # An operation is intended under the run's lease, and a run's lease is never cleared.
    lease, run = plan.lease, plan.run
    assert lease is not None and run is not None
    own = (c.lease_id, c.generation) == (lease["lease_id"], lease["generation"])
    if c.outcome == "known_not_started":
        if not own or plan.lease_expired():
            raise _rule("known_not_started needs the intent's own live lease: after a crash or expiry the outcome "
                        "is unknown, never inferred")
        plan.pending = None
        budgets.roll_back(run, pending["reservation"])
        plan.emit("operation_reconciled", {
            "operation_id": pending["operation_id"], "effect": pending["effect"], "outcome": "known_not_started",
        }, actor=actor, envelope=plan.lease)
    else:
        if not own and not plan.lease_expired():
            raise LoopstateError(
                ErrorCode.LEASE_HELD,
                f"operation {c.operation_id} belongs to a live lease until {lease['expires_at']}; its holder may "
                "still be working: only the holder, or anyone after expiry, may reconcile it",
                expires_at=lease["expires_at"],
            )
        safety.reconcile_unknown(plan, actor)
    safety.boundary(plan, actor)
    return plan.events


# control: stop, resume, sync --------------------------------------------------------------------

def stop(state: RunState, c: proto.Stop, ctx: Context) -> list[dict[str, Any]]:
    plan = _start(state, ctx)
    actor = actor_of(c.actor)
    if c.cancel:
        require_text(c.reason, "stop", "reason", "say why the run is cancelled")
    safety.boundary(plan, actor)
    if not c.cancel:
        return plan.events  # the STOP file is in place; the boundary halted the run if it could be halted
    assert plan.run is not None
    if plan.run["status"] in TERMINAL:
        return refuse(plan, LoopstateError(ErrorCode.INVALID_TRANSITION, f"run {state.run_id} is already {plan.run['status']}; terminal runs stay terminal"))
    if plan.pending is not None:
        safety.reconcile_unknown(plan, actor)
    plan.set_status("cancelled", "cancelled", c.reason)
    plan.emit("run_cancelled", {"reason": c.reason}, actor=actor)
    return plan.events


def resume(state: RunState, c: proto.Resume, ctx: Context) -> list[dict[str, Any]]:
    plan = _start(state, ctx)
    owner = actor_of(c.owner, "owner")
    require_text(c.reason, "resume", "reason", "say why the run is recovered")
    safety.boundary(plan, owner)
    kill_switch = ctx.extra.get("kill_switch")
    if kill_switch is not None:
        return refuse(plan, LoopstateError(
            ErrorCode.KILL_SWITCH,
            f"kill switch {kill_switch['path']} is {kill_switch['state']}; it halts and never authorizes: remove it "
            f"yourself before resuming ({LIFTING})", path=kill_switch["path"]))
    assert plan.run is not None
    status = plan.run["status"]
    if status in TERMINAL:
        return refuse(plan, LoopstateError(ErrorCode.INVALID_TRANSITION, f"run {state.run_id} is {status}: terminal runs stay terminal"))
    lease = plan.lease
    own = lease is not None and (c.lease_id, c.generation) == (lease["lease_id"], lease["generation"])
    live = lease is not None and not plan.lease_expired()
    if lease is not None and live and not own:
        return refuse(plan, LoopstateError(
            ErrorCode.LEASE_HELD,
            f"run {state.run_id} is leased to {lease['owner']['actor']} until {lease['expires_at']}; a live "
            "lease cannot be replaced: its holder recovers by naming it (lease_id and generation, `--lease` and "
            "`--generation`), anyone else waits for the expiry", holder=lease["owner"],
            expires_at=lease["expires_at"]))
    if plan.pending is not None:
        safety.reconcile_unknown(plan, owner)
    elif plan.run["status"] == "active":  # the boundary already failed an active run whose lease expired
        return refuse(plan, LoopstateError(ErrorCode.INVALID_TRANSITION, f"run {state.run_id} is active under your live lease; there is nothing to recover: keep working or move it with `loopstate run transition`"))
    status = plan.run["status"]
    first_lease_halt = status == "halted_kill_switch" and plan.lease is None
    if status not in RECOVERABLE and not first_lease_halt:
        hint = ""
        if status == "ready":
            try:
                authority.require_current(ctx.extra.get("grant"), plan.run["authority_grant_id"], ctx.now)
                hint = "; acquire its first lease with `loopstate run acquire`"
            except LoopstateError as error:
                hint = f" ({error.message.split(';')[0]}); {NEW_RUN_HINT}"
        return refuse(plan, LoopstateError(
            ErrorCode.INVALID_TRANSITION, f"{'an' if status == 'active' else 'a'} {status} run is not recoverable{hint}",
            status=status))
    keys = plan.exhausted()
    if keys:
        return refuse(plan, LoopstateError(
            ErrorCode.BUDGET_EXHAUSTED,
            f"run {state.run_id} has exhausted {', '.join(k if s is None else f'{k}[{s}]' for k, s in keys)}; exhausted "
            "usage blocks recovery: start a new run", budgets=[list(k) for k in keys]))
    grant_id = c.authority_grant_id or plan.run["authority_grant_id"]
    grant_key = "new_grant" if c.authority_grant_id else "grant"
    try:
        check_uuid(grant_id, "authority_grant_id")
        grant = authority.require_current(ctx.extra.get(grant_key), grant_id, ctx.now)
        authority.require_asset(grant, plan.run["asset"]["name"])
    except LoopstateError as error:
        return refuse(plan, error)
    previous = None if plan.lease is None else plan.lease["generation"]
    plan.lease = {
        "schema_version": records.SCHEMA_VERSION, "lease_id": ctx.new_id(), "run_id": state.run_id,
        "lane_id": None if plan.lease is None else plan.lease["lane_id"], "owner": owner,
        "acquired_at": plan.at, "renewed_at": plan.at,
        "expires_at": format_time(ctx.now + _lease_seconds(ctx)),
        "generation": 0 if previous is None else previous + 1,
    }
    rebound = grant_id != plan.run["authority_grant_id"]
    plan.run["authority_grant_id"] = grant_id
    plan.run["owner"] = owner
    plan.run["last_heartbeat_at"] = plan.at
    plan.set_status("active")
    plan.emit("recovery_started", {
        "previous_generation": previous, "new_generation": plan.lease["generation"], "reason": c.reason,
    }, actor=owner, envelope=plan.lease)
    if rebound:  # visible authority: the new binding is named by its own event, right after the recovery
        plan.emit("authority_granted", {"grant_id": grant["grant_id"], "level": grant["level"]}, actor=owner,
                  envelope=plan.lease)
    return plan.events


def sync(state: RunState, c: proto.Sync, ctx: Context) -> list[dict[str, Any]]:
    plan = _start(state, ctx)
    safety.boundary(plan, actor_of(c.actor) if c.actor is not None else SYSTEM_ACTOR)
    return plan.events


HANDLERS: dict[type, Callable[[RunState, Any, Context], list[dict[str, Any]]]] = {
    proto.Create: create, proto.Acquire: acquire, proto.Heartbeat: heartbeat, proto.Transition: transition,
    proto.StageStart: stage_start, proto.StageComplete: stage_complete, proto.RouteSelect: route_select,
    proto.IssueOpen: issue_open, proto.IssueUpdate: issue_update, proto.EvidenceAdd: evidence_add,
    proto.Intend: intend, proto.Complete: complete, proto.Reconcile: reconcile, proto.Stop: stop,
    proto.Resume: resume, proto.Sync: sync,
}


WORK_EVENTS: dict[type, frozenset[str]] = {
    proto.Create: frozenset({"run_created"}),
    proto.Acquire: frozenset({"lease_acquired"}),
    proto.Heartbeat: frozenset({"lease_renewed"}),
    proto.Transition: frozenset({"heartbeat", "run_completed", "run_failed", "run_cancelled"}),
    proto.StageStart: frozenset({"stage_started"}),
    proto.StageComplete: frozenset({"stage_completed"}),
    proto.RouteSelect: frozenset({"route_selected"}),
    proto.IssueOpen: frozenset({"issue_opened"}),
    proto.IssueUpdate: frozenset({"issue_transitioned"}),
    proto.EvidenceAdd: frozenset({"evidence_recorded"}),
    proto.Intend: frozenset({"operation_intended"}),
    proto.Complete: frozenset(work.COMPLETION_TYPES),
    proto.Reconcile: frozenset({"operation_reconciled"}),
    proto.Resume: frozenset({"recovery_started"}),
}


def refusal_from_events(command: Any, events: list[dict[str, Any]]) -> LoopstateError | None:
    """The refusal an exact retry reports: its events were safety writes instead of the requested work."""
    wanted = WORK_EVENTS.get(type(command))
    if wanted is None or not events or any(e["type"] in wanted for e in events):
        return None
    return safety_refusal(events[-1])


def decide_run(state: RunState, command: Any, ctx: Context) -> list[dict[str, Any]]:
    return HANDLERS[type(command)](state, command, ctx)
