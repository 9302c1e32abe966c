"""decide(state, command, ctx) -> events: every rule of the claims ledger that a mutation must keep.

Pure: the time and every id come from ``ctx``. The returned events carry the
ledger's envelope without the chain fields; the core adds request_id,
request_fingerprint, sequence, prev_hash and event_hash when it appends them.
"""

from __future__ import annotations

from typing import Any

from loopstate_protocol import intent as p
from loopstate_protocol.errors import ErrorCode

from loopstate.core import canonical
from loopstate.core.clock import format_time
from loopstate.core.errors import LoopstateError
from loopstate.core.ids import derived_uuid
from loopstate.domains.base import Context
from loopstate.domains.intent import rules
from loopstate.domains.intent.importing import import_event
from loopstate.domains.intent.records import (
    CURRENT_TASK_SET,
    MAX_INITIAL_CLAIMS,
    PROMOTION_TASKS,
    SCHEMA_VERSION,
    Claim,
    Task,
)
from loopstate.domains.intent.rules import rule
from loopstate.domains.intent.state import IntentState
from loopstate.domains.intent.wording import article, op

# Set by the service's intent effects when a command is applied to a private
# task in memory (the domain then returns no durable events), and when a
# private task is re-enabled as a durable one.
HANDLED_IN_MEMORY = "intent.handled_in_memory"
PRIVATE_DECISION = "intent.private_decision"
REENABLE = "intent.reenable"


def envelope(ctx: Context, event_type: str, task_id: str, actor: str, payload: dict[str, Any]) -> dict[str, Any]:
    return {
        "schema_version": SCHEMA_VERSION,
        "event_id": ctx.new_id(),
        "event_type": event_type,
        "project_id": ctx.project_id,
        "task_id": task_id,
        "occurred_at": format_time(ctx.now),
        "actor": actor,
        "payload": payload,
    }


def find_task(state: IntentState, task_id: str, ctx: Context) -> Task:
    """A task of this project; reads and writes need the project and the task id."""
    task_id = rules.check_uuid(task_id, "task_id")
    task = state.tasks.get(task_id)
    if task is None:
        raise LoopstateError(
            ErrorCode.NOT_FOUND, f"task {task_id} is not recorded in this project; start it with {op('intent.task_start')}",
            task_id=task_id,
        )
    if task.project_id != ctx.project_id:
        raise LoopstateError(
            ErrorCode.RULE_VIOLATION,
            f"task {task_id} is recorded under project {task.project_id[:12]}..., not this project; it cannot be read here",
            task_id=task_id, recorded_project=task.project_id,
        )
    return task


def _writable(state: IntentState, task_id: str, ctx: Context, *, semantic: bool = True) -> Task:
    task = find_task(state, task_id, ctx)
    if task.mode == "private" and not ctx.extra.get(PRIVATE_DECISION):
        raise LoopstateError(
            ErrorCode.PRIVACY_VIOLATION,
            f"task {task.task_id} is private; its events live only in the serving process that owns its session "
            f"(after a restart use {op('intent.private_recover')})",
            task_id=task.task_id,
        )
    if semantic and task.mode == "off":
        raise rule(f"task {task.task_id} is off; set its mode to on before recording intent", task_id=task.task_id)
    return task


def find_claim(state: IntentState, claim_id: str, ctx: Context, near: str | None = None) -> Claim:
    """The claim with this id (``near``: the acting task, whose section is looked in first)."""
    claim_id = rules.check_uuid(claim_id, "claim_id")
    claim = state.find_claim(claim_id, near)
    if claim is None:
        raise LoopstateError(ErrorCode.NOT_FOUND, f"claim {claim_id} does not exist in this project; pass a claim id from {op('intent.snapshot')} or {op('intent.audit')}", claim_id=claim_id)
    find_task(state, claim.task_id, ctx)
    return claim


# --- tasks ----------------------------------------------------------------------


def check_task_start(cmd: p.IntentTaskStart) -> None:
    """What a task start is refused for by its own fields, whatever the ledger holds."""
    if cmd.mode == "off" and (cmd.label is not None or cmd.initial_claims):
        raise rule("a task started in off mode takes no label and no initial claims", field="mode")
    if len(cmd.initial_claims) > MAX_INITIAL_CLAIMS:
        raise rules.refuse(
            f"initial_claims: {len(cmd.initial_claims)} given, at most {MAX_INITIAL_CLAIMS}; add the rest with {op('intent.claim_add')}",
            field="initial_claims",
        )


def task_start(state: IntentState, cmd: p.IntentTaskStart, ctx: Context) -> list[dict[str, Any]]:
    if cmd.task_id is not None:
        task_id = rules.check_uuid(cmd.task_id, "task_id")
    else:
        task_id = derived_uuid("intent-task:" + ctx.project_id, ctx.request_id)
    if task_id in state.tasks:
        raise LoopstateError(ErrorCode.CONFLICT, f"task {task_id} was already started; use a new task id", task_id=task_id)
    check_task_start(cmd)
    if cmd.mode == "private" and not ctx.extra.get(PRIVATE_DECISION):
        raise rule("a private task needs host_session_id and a serving process to own it", field="host_session_id")
    if cmd.mode != "private" and cmd.host_session_id is not None and not ctx.extra.get(REENABLE):
        raise rules.refuse("host_session_id is only used for private mode; drop it, or start the task with mode private", field="host_session_id")
    ref = rules.source_ref(cmd.source, cmd.actor, ctx)
    claims = [
        rules.claim(given, actor=cmd.actor, ref=ref, ctx=ctx, claim_id=ctx.new_id()) for given in cmd.initial_claims
    ]
    payload: dict[str, Any] = {"mode": cmd.mode, "label": rules.label(cmd.label), "initial_claims": claims, "source_ref": ref}
    if cmd.mode != "private":  # a private task lives in one process's memory: no other session could share it
        payload["current"] = True
    return [envelope(ctx, "task_started", task_id, cmd.actor, payload)]


def task_resume(state: IntentState, cmd: p.IntentTaskResume, ctx: Context) -> list[dict[str, Any]]:
    """Make an existing task current; the task that is current already stays so, and nothing is written."""
    task = find_task(state, cmd.task_id, ctx)
    if task.mode == "private":
        raise rule(
            f"task {task.task_id} is private: its events live in one serving process, so no other session can "
            "share it; switch it on first, or resume another task", task_id=task.task_id,
        )
    if state.current is not None and state.current[0] == task.task_id:
        return []
    return [envelope(ctx, CURRENT_TASK_SET, task.task_id, cmd.actor, {"reason": "resumed"})]


def makes_current(event: dict[str, Any]) -> bool:
    """Whether folding ``event`` changes the project's current task: a current_task_set, or a task start
    marked ``current`` (every start but a private one; a private task re-enabled as durable is not marked)."""
    kind = event["event_type"]
    return kind == CURRENT_TASK_SET or (kind == "task_started" and bool((event.get("payload") or {}).get("current")))


def migration(state: IntentState, ctx: Context) -> dict[str, Any] | None:
    """The event that records, on the first write to a store written before tasks were current, the task
    ``IntentState.current_task`` picked for it; None when the store has a current task already or none to pick."""
    if state.current is not None:
        return None
    picked = state.newest_with_user_claims()
    if picked is None:
        return None
    return envelope(ctx, CURRENT_TASK_SET, picked, "system", {"reason": "migrated"})


def mode_set(state: IntentState, cmd: p.IntentModeSet, ctx: Context) -> list[dict[str, Any]]:
    reenable = ctx.extra.get(REENABLE)
    if reenable is not None and not reenable["durable"]:
        # A task that only ever lived in memory becomes an empty durable task.
        payload = {"mode": cmd.mode, "label": None, "initial_claims": [], "reenabled_from_private": True}
        return [envelope(ctx, "task_started", reenable["task_id"], cmd.actor, payload)]
    task = find_task(state, cmd.task_id, ctx)
    if cmd.actor != "user":
        raise rule("only the user changes a task's mode; send the command with actor user", field="actor")
    if task.mode == cmd.mode:
        raise LoopstateError(ErrorCode.CONFLICT, f"task {task.task_id} is already {cmd.mode}; nothing to change", task_id=task.task_id)
    if (cmd.mode == "private" or task.mode == "private") and not (ctx.extra.get(PRIVATE_DECISION) or reenable):
        raise rule("switching to or from private mode needs host_session_id and the serving process", field="mode")
    payload = {"mode": cmd.mode, "previous_mode": task.mode}
    return [envelope(ctx, "mode_set", task.task_id, cmd.actor, payload)]


def private_recover(state: IntentState, cmd: p.IntentPrivateRecover, ctx: Context) -> list[dict[str, Any]]:
    """Durable half of a recovery (the control file is handled by the service's effects)."""
    reenable = ctx.extra.get(REENABLE)
    if reenable is None:
        return []
    if cmd.actor != "user":
        raise rule("only the user recovers a private session; send the command with actor user", field="actor")
    mode = {"durable_on": "on", "durable_off": "off", "delete": "off"}[cmd.action]
    task = state.tasks.get(reenable["task_id"])
    if task is None:
        if cmd.action == "delete":
            return []
        payload = {"mode": mode, "label": None, "initial_claims": [], "reenabled_from_private": True}
        return [envelope(ctx, "task_started", reenable["task_id"], cmd.actor, payload)]
    if task.mode == mode:
        return []
    return [envelope(ctx, "mode_set", task.task_id, cmd.actor, {"mode": mode, "previous_mode": task.mode})]


# --- claims ---------------------------------------------------------------------


def claim_add(state: IntentState, cmd: p.IntentClaimAdd, ctx: Context) -> list[dict[str, Any]]:
    task = _writable(state, cmd.task_id, ctx)
    ref = rules.source_ref(cmd.source, cmd.actor, ctx)
    claim = rules.claim(cmd.claim, actor=cmd.actor, ref=ref, ctx=ctx, claim_id=ctx.new_id())
    return [envelope(ctx, "claim_added", task.task_id, cmd.actor, {"claim": claim})]


def _may_displace(old: Claim, *, actor: str, ref: dict[str, Any], new_status: str | None, verb: str) -> None:
    """What protects an existing claim from being superseded or invalidated (a user's own claim above all)."""
    direct = rules.direct_user(actor, ref)
    if not old.active:
        raise LoopstateError(
            ErrorCode.INVALID_TRANSITION, f"claim {old.claim_id} is already {old.state}; only active claims can be {verb}",
            claim_id=old.claim_id, state=old.state,
        )
    if old.user_explicit and not (direct and new_status in (None, "explicit")):
        raise rule(
            f"claim {old.claim_id} is the user's explicit statement: it can be {verb} only "
            + ("by a new explicit claim from a direct user event" if new_status is not None else "from a direct user event")
            + "; evidence, inference, imports and system records never displace it",
            claim_id=old.claim_id,
        )
    if old.epistemic_status == "disputed" and not direct:
        raise rule(
            f"claim {old.claim_id} is an open dispute; only the user resolves it (a direct user event)",
            claim_id=old.claim_id,
        )
    if old.epistemic_status in ("unknown", "disputed") and new_status == "inferred":
        raise rule(
            f"claim {old.claim_id} is {old.epistemic_status}; it is never merged with an inference",
            claim_id=old.claim_id,
        )


def _visible_from(claim: Claim, task: Task, verb: str) -> Claim:
    """A task displaces only claims its own view shows: its own, and project-wide or long-term ones."""
    if claim.task_id != task.task_id and claim.scope == "task":
        raise rule(
            f"claim {claim.claim_id} belongs to task {claim.task_id} and is task-scoped; it can be {verb} only "
            "from that task (project and long_term claims can be from any task of the project)",
            claim_id=claim.claim_id, task_id=claim.task_id,
        )
    return claim


def _supersedes(state: IntentState, ids: list[str], task: Task, ctx: Context) -> list[Claim]:
    if not ids:
        raise rules.refuse("supersedes: name at least one claim id to replace", field="supersedes")
    if len(set(ids)) != len(ids):
        raise rules.refuse("supersedes: each claim id may appear once", field="supersedes")
    return [
        _visible_from(find_claim(state, rules.check_uuid(claim_id, "supersedes"), ctx, task.task_id), task, "superseded")
        for claim_id in ids
    ]


def claim_replace(state: IntentState, cmd: p.IntentClaimReplace, ctx: Context) -> list[dict[str, Any]]:
    task = _writable(state, cmd.task_id, ctx)
    olds = _supersedes(state, cmd.supersedes, task, ctx)
    ref = rules.source_ref(cmd.source, cmd.actor, ctx)
    claim = rules.claim(
        cmd.claim, actor=cmd.actor, ref=ref, ctx=ctx, claim_id=ctx.new_id(), supersedes=[o.claim_id for o in olds],
    )
    for old in olds:
        _may_displace(old, actor=cmd.actor, ref=ref, new_status=claim["epistemic_status"], verb="superseded")
        if rules.instant(claim["valid_from"]) < rules.instant(old.valid_from):
            raise rules.refuse(
                f"valid_from: a replacement cannot be valid before the claim it supersedes ({old.valid_from})",
                field="valid_from",
            )
    payload = {"claim": claim, "superseded": [o.claim_id for o in olds]}
    return [envelope(ctx, "claim_replaced", task.task_id, cmd.actor, payload)]


def claim_invalidate(state: IntentState, cmd: p.IntentClaimInvalidate, ctx: Context) -> list[dict[str, Any]]:
    task = _writable(state, cmd.task_id, ctx)
    old = _visible_from(find_claim(state, cmd.claim_id, ctx, task.task_id), task, "invalidated")
    ref = rules.source_ref(cmd.source, cmd.actor, ctx)
    _may_displace(old, actor=cmd.actor, ref=ref, new_status=None, verb="invalidated")
    payload: dict[str, Any] = {"claim_id": old.claim_id, "source_ref": ref}
    if cmd.reason is not None:
        payload["reason"] = rules.statement(cmd.reason, "reason")
    return [envelope(ctx, "claim_invalidated", task.task_id, cmd.actor, payload)]


def claim_confirm(state: IntentState, cmd: p.IntentClaimConfirm, ctx: Context) -> list[dict[str, Any]]:
    """A user review: the claim is re-issued with last_confirmed = now, superseding itself."""
    task = _writable(state, cmd.task_id, ctx)
    old = _visible_from(find_claim(state, cmd.claim_id, ctx, task.task_id), task, "confirmed")
    ref = rules.source_ref(cmd.source, cmd.actor, ctx)
    if not rules.direct_user(cmd.actor, ref):
        raise rule("only a direct user event confirms a claim; acceptance or silence never does", field="actor")
    _may_displace(old, actor=cmd.actor, ref=ref, new_status=old.epistemic_status, verb="confirmed")
    claim: dict[str, Any] = {
        "claim_id": ctx.new_id(), "statement": old.statement, "role": old.role,
        "epistemic_status": old.epistemic_status, "source_ref": ref, "scope": old.scope,
        "valid_from": old.valid_from, "last_confirmed": format_time(ctx.now), "supersedes": [old.claim_id],
        "facets": list(old.facets),
    }
    if old.confidence is not None:
        claim["confidence"] = old.confidence
    payload = {"claim": claim, "superseded": [old.claim_id], "confirmation": True}
    return [envelope(ctx, "claim_replaced", task.task_id, cmd.actor, payload)]


# --- sources, candidates, signals ------------------------------------------------


def source_observe(state: IntentState, cmd: p.IntentSourceObserve, ctx: Context) -> list[dict[str, Any]]:
    task = _writable(state, cmd.task_id, ctx)
    ref = rules.source_ref(cmd.source, cmd.actor, ctx)
    return [envelope(ctx, "source_observed", task.task_id, cmd.actor, {"source_ref": ref})]


def signal_key(statement: str) -> str:
    """Groups one signal across tasks: a digest of the redacted, case- and space-normalised text."""
    normal = " ".join(statement.lower().split())
    return canonical.sha256_hex(("intent-signal-v1\0" + normal).encode("utf-8"))


def candidate_add(state: IntentState, cmd: p.IntentCandidateAdd, ctx: Context) -> list[dict[str, Any]]:
    task = _writable(state, cmd.task_id, ctx)
    ref = rules.source_ref(cmd.source, cmd.actor, ctx)
    text = rules.statement(cmd.statement)
    payload = {
        "candidate_id": ctx.new_id(), "signal_key": signal_key(text), "statement": text,
        "facets": rules.facets(cmd.facets), "source_ref": ref,
    }
    return [envelope(ctx, "candidate_added", task.task_id, cmd.actor, payload)]


def candidate_promote(state: IntentState, cmd: p.IntentCandidatePromote, ctx: Context) -> list[dict[str, Any]]:
    task = _writable(state, cmd.task_id, ctx)
    ref = rules.source_ref(cmd.source, cmd.actor, ctx)
    if cmd.confirmation != "explicit":
        raise rule(
            f"a candidate is promoted only by the user's explicit confirmation; "
            f"{cmd.confirmation!r} is not a confirmation (acceptance, silence and a single choice never are)",
            field="confirmation",
        )
    if not rules.direct_user(cmd.actor, ref):
        raise rule(
            f"a candidate is promoted only from a direct user event (actor user citing a user_event source), "
            f"not by {article(cmd.actor)} actor citing {article(str(ref.get('kind')))} source",
            field="actor",
        )
    key = cmd.signal_key.strip().lower()  # a hex digest, whatever case the caller copied it in
    group = [
        c for c in state.candidates.values()
        if c.signal_key == key and c.task_id in state.tasks and state.tasks[c.task_id].project_id == ctx.project_id
    ]
    if not group:
        raise LoopstateError(ErrorCode.NOT_FOUND, f"no candidate has signal key {key}; list the signal keys with {op('intent.candidates')}", signal_key=key)
    tasks = sorted({c.task_id for c in group})
    if len(tasks) < PROMOTION_TASKS:
        raise rule(
            f"the signal was seen in {len(tasks)} distinct task(s); it needs {PROMOTION_TASKS} before it can be promoted",
            distinct_tasks=len(tasks),
        )
    if any(c.promoted for c in group):
        raise LoopstateError(ErrorCode.CONFLICT, f"this signal was already promoted to a long-term claim; review that claim with {op('intent.claim_confirm')} instead", signal_key=key)
    latest = group[-1]
    claim: dict[str, Any] = {
        "claim_id": ctx.new_id(), "statement": latest.statement, "role": "system", "epistemic_status": "inferred",
        "source_ref": ref, "scope": "long_term", "confidence": rules.confidence_for("inferred", cmd.confidence),
        "valid_from": format_time(ctx.now), "last_confirmed": format_time(ctx.now), "supersedes": [],
        "facets": list(latest.facets),
    }
    payload = {
        "claim": claim,
        "promoted_from": {"signal_key": key, "candidate_ids": sorted(c.candidate_id for c in group), "distinct_tasks": len(tasks)},
    }
    return [envelope(ctx, "claim_added", task.task_id, cmd.actor, payload)]


def compaction_observe(state: IntentState, cmd: p.IntentCompactionObserve, ctx: Context) -> list[dict[str, Any]]:
    task = _writable(state, cmd.task_id, ctx, semantic=False)
    payload: dict[str, Any] = {
        "trigger": cmd.trigger,
        "active_claims": state.active_count(task.task_id),
    }
    if cmd.host_event_id is not None:
        payload["host_event_id"] = rules.opaque_id(cmd.host_event_id, "host_event_id")
    return [envelope(ctx, "compaction_observed", task.task_id, cmd.actor, payload)]


_SIGNAL_FACET = {"success": "success_signal", "failure": "failure_signal", "feedback": "result_feedback"}


def result_signal(state: IntentState, cmd: p.IntentResultSignal, ctx: Context) -> list[dict[str, Any]]:
    """A result signal; its note becomes a claim: the user's words explicit, anything else evidence."""
    task = _writable(state, cmd.task_id, ctx)
    ref = rules.source_ref(cmd.source, cmd.actor, ctx)
    payload: dict[str, Any] = {"signal": cmd.signal, "source_ref": ref}
    if cmd.note is not None:
        status = "explicit" if cmd.actor == "user" else "evidence"
        given = p.ClaimInput(
            statement=cmd.note, role=cmd.actor, epistemic_status=status, facets=[_SIGNAL_FACET[cmd.signal]],
        )
        payload["claim"] = rules.claim(given, actor=cmd.actor, ref=ref, ctx=ctx, claim_id=ctx.new_id())
    return [envelope(ctx, "result_signal_observed", task.task_id, cmd.actor, payload)]


def graph_import(state: IntentState, cmd: p.IntentImport, ctx: Context) -> list[dict[str, Any]]:
    if cmd.actor != "user":
        raise rule("only the user imports a graph; send the command with actor user", field="actor")
    task_id, payload = import_event(cmd.graph, ctx)
    return [envelope(ctx, "graph_imported", task_id, cmd.actor, payload)]


def purge(state: IntentState, cmd: p.IntentPurge, ctx: Context) -> list[dict[str, Any]]:
    """Purge never appends: the service's effects rewrite the stream (see intent_effects)."""
    return []


HANDLERS = {
    p.IntentTaskStart: task_start,
    p.IntentTaskResume: task_resume,
    p.IntentModeSet: mode_set,
    p.IntentSourceObserve: source_observe,
    p.IntentClaimAdd: claim_add,
    p.IntentClaimReplace: claim_replace,
    p.IntentClaimInvalidate: claim_invalidate,
    p.IntentClaimConfirm: claim_confirm,
    p.IntentCandidateAdd: candidate_add,
    p.IntentCandidatePromote: candidate_promote,
    p.IntentCompactionObserve: compaction_observe,
    p.IntentResultSignal: result_signal,
    p.IntentImport: graph_import,
    p.IntentPurge: purge,
    p.IntentPrivateRecover: private_recover,
}


def decide(state: IntentState, command: Any, ctx: Context) -> list[dict[str, Any]]:
    """The events of one command (its request id and its own fields were checked before: ``IntentDomain.check``)."""
    if ctx.extra.get(HANDLED_IN_MEMORY):
        return []
    handler = HANDLERS.get(type(command))
    if handler is None:
        raise LoopstateError(ErrorCode.INVALID_PARAMS, f"the intent domain has no command {type(command).__name__}")
    rules.check_command(command)
    events = handler(state, command, ctx)
    if not events or ctx.extra.get(PRIVATE_DECISION) or any(makes_current(e) for e in events):
        return events
    migrated = migration(state, ctx)
    return events if migrated is None else [migrated, *events]
