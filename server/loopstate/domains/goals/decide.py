"""``decide``: a goals command and the current state in, validated events out.

Order of checks for a one-event command: build the event (payload validated
against its type, privacy class enforced), then idempotency on
``event_id`` (the same id with the same normalized body is a no-op, a
different body is EVENT_ID_CONFLICT), then the lifecycle rules (todo exists,
not completed, gates resolved before completion, leases...). Idempotency
comes first so that an exact re-append stays a no-op even after later events
changed what the rules would say.
"""

from __future__ import annotations

import datetime as dt
from typing import Any, Callable

from loopstate_protocol import goals as proto
from loopstate_protocol.errors import ErrorCode

from loopstate.core.clock import format_time
from loopstate.core.errors import LoopstateError
from loopstate.core.ids import derived_uuid
from loopstate.domains.base import Context
from loopstate.domains.goals import eventids, privacy
from loopstate.domains.goals import events as ev
from loopstate.domains.goals.config import StatePrivacy, render_rule
from loopstate.domains.goals.envelope import body_digest
from loopstate.domains.goals.markdown import render, text_checksum
from loopstate.domains.goals.ordering import instant
from loopstate.domains.goals.projection import build_board, open_gates_for
from loopstate.domains.goals.state import Done, GoalState, Todo, find_todo, state_checksum, todo_added_by, todo_total

Event = dict[str, Any]
# ctx.extra keys the service's effects fill in before a render.
RENDER_TRACKED = "goals.render_tracked"
RUNS_DOMAIN_RUN = "goals.runs_domain_run"  # True when the run id names a run of the runs domain
RENDER_EXISTING = "goals.render_existing"
STATE_PRIVACY = "goals.state_privacy"


def normalize_time(text: str, field: str) -> str:
    try:
        return format_time(instant(text))
    except LoopstateError:
        raise LoopstateError(
            ErrorCode.VALIDATION_FAILED, f"{field} {text!r} is not an offset-aware ISO-8601 timestamp; use UTC or an explicit offset, "
            "e.g. 2026-03-02T12:00:00Z or 2026-03-02T13:00:00+01:00", field=field,
        ) from None


def event_id_for(command: proto.GoalCommand, ctx: Context) -> str:
    """The caller's event id, or one derived from the request id (so retries repeat it)."""
    if command.event_id is not None:
        return command.event_id
    return derived_uuid(f"goals:{command.goal_id}", ctx.request_id)


def _todo(state: GoalState, todo_id: str) -> Todo | Done:
    todo = find_todo(state, todo_id)
    if todo is None:
        raise LoopstateError(
            ErrorCode.NOT_FOUND,
            f"todo {todo_id!r} is not in goal {state.goal_id!r}; add it first with `loopstate goals add`",
            todo_id=todo_id,
        )
    return todo


def _open_todo(state: GoalState, todo_id: str, verb: str) -> Todo:
    todo = _todo(state, todo_id)
    if not isinstance(todo, Todo):
        raise LoopstateError(
            ErrorCode.INVALID_TRANSITION,
            f"todo {todo_id!r} is completed and cannot be {verb}; events never rewrite a closed todo: "
            "add a follow-up todo (refs.parent_event_id may point at it)",
            todo_id=todo_id, status=todo.status,
        )
    return todo


def _no_gate(state: GoalState, gate_id: str) -> LoopstateError:
    return LoopstateError(
        ErrorCode.NOT_FOUND,
        f"gate {gate_id!r} is not in goal {state.goal_id!r}; `loopstate goals board {state.goal_id}` lists its gates, "
        "`loopstate goals gate` adds one", gate_id=gate_id,
    )


def _gates_resolved(state: GoalState, todo: Todo, verb: str) -> None:
    pending = open_gates_for(state, todo)
    if pending:
        names = ", ".join(f"{g} ({state.gates[g].gate_kind}: {state.gates[g].title})" for g in pending)
        raise LoopstateError(
            ErrorCode.RULE_VIOLATION,
            f"todo {todo.todo_id!r} cannot be {verb} while gate(s) {names} are unresolved; "
            "resolve them first with `loopstate goals resolve`",
            todo_id=todo.todo_id, open_gate_ids=pending,
        )


def free_id(taken, prefix: str, count: int | None = None) -> str:
    """The first readable id (T001, ...) from ``count`` + 1 (default: how many are ``taken``) that is free."""
    number = (len(taken) if count is None else count) + 1
    while f"{prefix}{number:03d}" in taken:
        number += 1
    return f"{prefix}{number:03d}"


class _TodoIds:
    """Every todo id of the goal, live or completed, as ``free_id`` asks about them."""

    def __init__(self, state: GoalState) -> None:
        self.state = state

    def __len__(self) -> int:
        return todo_total(self.state)

    def __contains__(self, todo_id: object) -> bool:
        return isinstance(todo_id, str) and find_todo(self.state, todo_id) is not None


def _auto_id(state: GoalState, collection: dict[str, Any], prefix: str, event_id: str) -> str:
    """A new readable id (G001, E001), or the one an earlier append of this event id chose."""
    if eventids.lookup(state.event_ids, event_id) is not None:
        for key, record in collection.items():
            if record.added_event_id == event_id:
                return key
    return free_id(collection, prefix)


# Payload builders: (state, command, recorded_at, event_id) -> payload -------------------------------


def _add(state, c: proto.AddTodo, at: str, eid: str) -> dict:
    return {
        "todo_id": c.todo_id or todo_added_by(state, eid) or free_id(_TodoIds(state), "T"), "title": c.title,
        "role": c.role,
        "priority": c.priority, "planner_order": c.planner_order, "metadata": c.metadata,
        "details": c.details, "pointer": c.pointer,
    }


def _claim(state, c: proto.ClaimTodo, at: str, eid: str) -> dict:
    lease = None
    if c.lease_seconds is not None:
        lease = format_time(instant(at) + dt.timedelta(seconds=c.lease_seconds))
    return {"todo_id": c.todo_id, "claimed_by": c.claimed_by, "lease_expires_at": lease, "note": c.note}


def _update(state, c: proto.UpdateTodo, at: str, eid: str) -> dict:
    payload = {name: getattr(c, name) for name in
               ("title", "role", "priority", "planner_order", "metadata", "details", "pointer")}
    if all(value is None for value in payload.values()):
        raise LoopstateError(ErrorCode.VALIDATION_FAILED, "todo_updated needs at least one field to change: title, role, priority, "
                             "planner_order, metadata, details or pointer",
                             field="payload")
    return {"todo_id": c.todo_id, **payload}


def _block(state, c: proto.BlockTodo, at: str, eid: str) -> dict:
    return {"todo_id": c.todo_id, "reason": c.reason, "gate_ids": sorted(set(c.gate_ids))}


def _defer(state, c: proto.DeferTodo, at: str, eid: str) -> dict:
    until = None if c.until is None else normalize_time(c.until, "until")
    return {"todo_id": c.todo_id, "resume_when": c.resume_when, "until": until}


def _complete(state, c: proto.CompleteTodo, at: str, eid: str) -> dict:
    return {"todo_id": c.todo_id, "rationale": c.rationale, "validation_refs": c.validation_refs,
            "evidence_ids": sorted(set(c.evidence_ids))}


def _gate(state, c: proto.AddGate, at: str, eid: str) -> dict:
    return {"gate_id": c.gate_id or _auto_id(state, state.gates, "G", eid), "gate_kind": c.gate_kind, "title": c.title,
            "todo_id": c.todo_id, "run_id": c.run_id}


def _resolve(state, c: proto.ResolveGate, at: str, eid: str) -> dict:
    return {"gate_id": c.gate_id, "decision": c.decision, "rationale": c.rationale, "resolved_by": c.resolved_by}


def _run(state, c: proto.RecordRun, at: str, eid: str) -> dict:
    return {"run_id": c.run_id, "status": c.status, "classification": c.classification,
            "delivery_outcome": c.delivery_outcome, "todo_id": c.todo_id, "summary": c.summary, "pointer": c.pointer}


def _refresh(state, c: proto.RecordRefresh, at: str, eid: str) -> dict:
    return {"refresh_kind": c.refresh_kind, "summary": c.summary, "pointer": c.pointer}


def _quota(state, c: proto.SpendQuota, at: str, eid: str) -> dict:
    if c.amount != c.amount or c.amount in (float("inf"), float("-inf")):
        raise LoopstateError(ErrorCode.VALIDATION_FAILED, f"quota amount {c.amount} is not a finite number; "
                              "record the spend as a number such as 1.25", field="amount")
    return {"amount": c.amount, "unit": c.unit, "category": c.category, "quota_id": c.quota_id,
            "run_id": c.run_id, "todo_id": c.todo_id}


def _evidence(state, c: proto.AttachEvidence, at: str, eid: str) -> dict:
    return {"evidence_id": c.evidence_id or _auto_id(state, state.evidence, "E", eid), "target_kind": c.target_kind,
            "target_id": c.target_id, "ref": c.ref, "summary": c.summary, "pointer": c.pointer}


# Lifecycle rules, checked only for events that are not idempotent repeats --------------------------------


def _rules_add(state: GoalState, p: dict, ctx: Context) -> None:
    known = find_todo(state, p["todo_id"])
    if known is not None:
        raise LoopstateError(
            ErrorCode.RULE_VIOLATION,
            f"todo {p['todo_id']!r} already exists (added at append_sequence {known.added_sequence}); a new "
            "todo_added may not rewrite it: change it with `loopstate goals update`",
            todo_id=p["todo_id"],
        )


def _rules_claim(state: GoalState, p: dict, ctx: Context) -> None:
    todo = _open_todo(state, p["todo_id"], "claimed")
    if todo.status == "blocked":
        _gates_resolved(state, todo, "claimed")
    holder, until = todo.claimed_by, todo.lease_expires_at
    if todo.status == "claimed" and holder and holder != p["claimed_by"] and until and instant(until) > ctx.now:
        raise LoopstateError(
            ErrorCode.LEASE_HELD,
            f"todo {todo.todo_id!r} is claimed by {holder!r} with a lease until {until}; wait for it to expire "
            "or ask the holder to hand it over",
            todo_id=todo.todo_id, claimed_by=holder, lease_expires_at=until,
        )


def _rules_update(state: GoalState, p: dict, ctx: Context) -> None:
    _open_todo(state, p["todo_id"], "updated")


def _rules_block(state: GoalState, p: dict, ctx: Context) -> None:
    _open_todo(state, p["todo_id"], "blocked")
    missing = [g for g in p.get("gate_ids", []) if g not in state.gates]
    if missing:
        raise LoopstateError(
            ErrorCode.NOT_FOUND, f"gate(s) {', '.join(missing)} are not in goal {state.goal_id!r}; add them with "
            "`loopstate goals gate` first", gate_ids=missing,
        )


def _rules_defer(state: GoalState, p: dict, ctx: Context) -> None:
    _open_todo(state, p["todo_id"], "deferred")


def _rules_complete(state: GoalState, p: dict, ctx: Context) -> None:
    _gates_resolved(state, _open_todo(state, p["todo_id"], "completed"), "completed")


def _rules_gate(state: GoalState, p: dict, ctx: Context) -> None:
    if p["gate_id"] in state.gates:
        raise LoopstateError(
            ErrorCode.RULE_VIOLATION,
            f"gate {p['gate_id']!r} already exists; a new gate_added may not rewrite it: resolve it, or add a new gate",
            gate_id=p["gate_id"],
        )
    if p.get("todo_id") is not None:
        _open_todo(state, p["todo_id"], "gated")


def _rules_resolve(state: GoalState, p: dict, ctx: Context) -> None:
    gate = state.gates.get(p["gate_id"])
    if gate is None:
        raise _no_gate(state, p["gate_id"])
    if gate.status in ("approved", "rejected"):
        raise LoopstateError(
            ErrorCode.INVALID_TRANSITION,
            f"gate {gate.gate_id!r} was already resolved ({gate.decision}) at append_sequence {gate.resolved_sequence}; "
            "add a new gate to ask again", gate_id=gate.gate_id,
        )


def _rules_todo_ref(state: GoalState, p: dict, ctx: Context) -> None:
    if p.get("todo_id") is not None:
        _todo(state, p["todo_id"])


def _rules_evidence(state: GoalState, p: dict, ctx: Context) -> None:
    if p["evidence_id"] in state.evidence:
        raise LoopstateError(
            ErrorCode.RULE_VIOLATION,
            f"evidence {p['evidence_id']!r} already exists; evidence ids are stable: attach new evidence under a new id",
            evidence_id=p["evidence_id"],
        )
    if p["target_kind"] == "todo":
        _todo(state, p["target_id"])
    elif p["target_kind"] == "run" and p["target_id"] not in state.run_ids and not ctx.extra.get(RUNS_DOMAIN_RUN):
        raise LoopstateError(
            ErrorCode.NOT_FOUND,
            f"run {p['target_id']!r} is neither recorded in goal {state.goal_id!r} nor a run of this project's runs "
            f"domain; record it first with `loopstate goals run {state.goal_id} {p['target_id']} --status ...`",
            run_id=p["target_id"],
        )
    elif p["target_kind"] == "gate" and p["target_id"] not in state.gates:
        raise _no_gate(state, p["target_id"])


def _no_rules(state: GoalState, p: dict, ctx: Context) -> None:
    return None


Builder = Callable[[GoalState, Any, str, str], dict]
Rules = Callable[[GoalState, dict, Context], None]
VERBS: dict[type, tuple[str, Builder, Rules]] = {
    proto.AddTodo: ("todo_added", _add, _rules_add),
    proto.ClaimTodo: ("todo_claimed", _claim, _rules_claim),
    proto.UpdateTodo: ("todo_updated", _update, _rules_update),
    proto.BlockTodo: ("todo_blocked", _block, _rules_block),
    proto.DeferTodo: ("todo_deferred", _defer, _rules_defer),
    proto.CompleteTodo: ("todo_completed", _complete, _rules_complete),
    proto.AddGate: ("gate_added", _gate, _rules_gate),
    proto.ResolveGate: ("gate_resolved", _resolve, _rules_resolve),
    proto.RecordRun: ("run_recorded", _run, _rules_todo_ref),
    proto.RecordRefresh: ("refresh_recorded", _refresh, _no_rules),
    proto.SpendQuota: ("quota_spent", _quota, _rules_todo_ref),
    proto.AttachEvidence: ("evidence_attached", _evidence, _rules_evidence),
}
SUBJECT_REFS = ("todo_id", "gate_id", "run_id", "evidence_id", "quota_id")


def _refs(state: GoalState, command: proto.GoalCommand, payload: dict) -> dict[str, str]:
    """The caller's refs plus the compact ids the payload names (which they may not contradict)."""
    refs = dict(command.refs)
    for name in SUBJECT_REFS:
        value = payload.get(name)
        if value is None:
            continue
        if refs.get(name, value) != value:
            raise LoopstateError(
                ErrorCode.VALIDATION_FAILED, f"refs.{name} is {refs[name]!r} but the payload names {value!r}",
                field=f"refs.{name}",
            )
        refs[name] = value
    parent = refs.get("parent_event_id")
    if parent is not None and eventids.lookup(state.event_ids, parent) is None:
        raise LoopstateError(
            ErrorCode.RULE_VIOLATION,
            f"refs.parent_event_id {parent!r} is not an event of goal {state.goal_id!r}; a child event must point "
            "at an earlier event of its goal", field="refs.parent_event_id",
        )
    return refs


def recorded_at_for(state: GoalState, command: proto.GoalCommand, event_id: str, ctx: Context) -> str:
    """The caller's time; else, for a repeat of a known event id, the original's; else now."""
    if command.recorded_at is not None:
        return normalize_time(command.recorded_at, "recorded_at")
    known = eventids.lookup(state.event_ids, event_id)
    original = None if known is None else known.recorded_at
    return original if original is not None else format_time(ctx.now)


def repeat_or_conflict(state: GoalState, event: Event, *, caller_time: bool = True) -> bool:
    """True when ``event`` repeats a stored event exactly (a no-op), whether the stored body spelled its
    defaults out or not; raises on a conflicting repeat. Without a time from the caller (``caller_time``
    False) the event has the original's; when that could not be given back (another writer stored it in
    a form of its own, which the table keeps only as a tag) the body alone decides."""
    known = eventids.lookup(state.event_ids, event["event_id"])
    if known is None:
        return False
    timed = known.same_time(event["recorded_at"]) or (not caller_time and known.recorded_at is None)
    if timed and (
            known.same_body(body_digest(event)) or any(known.same_body(d) for d in ev.spelled_out_digests(event))):
        return True
    raise LoopstateError(
        ErrorCode.EVENT_ID_CONFLICT,
        f"event_id {event['event_id']!r} was already appended to goal {state.goal_id!r} at append_sequence "
        f"{known.sequence} with a different body; an event id names one event forever: use a new event id",
        event_id=event["event_id"], first_sequence=known.sequence,
    )


def _envelope(state: GoalState, command: proto.GoalCommand, ctx: Context, event_type: str,
              build: Callable[[str, str], dict]) -> Event:
    event_id = event_id_for(command, ctx)
    at = recorded_at_for(state, command, event_id, ctx)
    payload = build(at, event_id)
    clean = {k: v for k, v in payload.items() if v is not None}
    return ev.make_event(
        event_type=event_type, event_id=event_id, goal_id=state.goal_id, recorded_at=at,
        producer=command.producer or ev.DEFAULT_PRODUCER, privacy_class=command.privacy,
        refs=_refs(state, command, clean), payload=clean,
    )


def decide(state: GoalState, command: Any, ctx: Context) -> list[Event]:
    if command.goal_id != state.goal_id:
        raise LoopstateError(ErrorCode.INVALID_PARAMS, f"command for goal {command.goal_id!r} sent to goal {state.goal_id!r}")
    verb = VERBS.get(type(command))
    if verb is not None:
        event_type, builder, rules = verb
        event = _envelope(state, command, ctx, event_type, lambda at, eid: builder(state, command, at, eid))
        if repeat_or_conflict(state, event, caller_time=command.recorded_at is not None):
            return []
        rules(state, event["payload"], ctx)
        return [event]
    if isinstance(command, proto.AppendEvent):
        return _append(state, command, ctx)
    if isinstance(command, proto.RenderMarkdown):
        return _render(state, command, ctx)
    if isinstance(command, proto.Compact):
        return _compact(state, command, ctx)
    raise LoopstateError(ErrorCode.INVALID_PARAMS, f"the goals domain has no command {type(command).__name__}")


RULES: dict[str, Rules] = {event_type: rules for event_type, _, rules in VERBS.values()}


def _raw_payload(event_type: str, payload: dict[str, Any]) -> dict[str, Any]:
    """A caller's payload in the stored form the typed commands produce: times in UTC,
    id lists sorted and unique. Anything of the wrong type is left for validation to refuse."""
    out = dict(payload)
    for name in {"todo_claimed": ("lease_expires_at",), "todo_deferred": ("until",)}.get(event_type, ()):
        if isinstance(out.get(name), str):
            out[name] = normalize_time(out[name], f"payload.{name}")
    for name in ("gate_ids", "evidence_ids"):
        value = out.get(name)
        if isinstance(value, list) and all(isinstance(v, str) for v in value):
            out[name] = sorted(set(value))
    return out


def _append(state: GoalState, command: proto.AppendEvent, ctx: Context) -> list[Event]:
    event = _envelope(state, command, ctx, command.event_type,
                      lambda at, eid: _raw_payload(command.event_type, command.payload))
    if repeat_or_conflict(state, event, caller_time=command.recorded_at is not None):
        return []
    RULES[command.event_type](state, event["payload"], ctx)
    return [event]


# Projections as events ------------------------------------------------------------------------------------


def markdown_for(state: GoalState, generated_at: str, public: bool) -> str:
    return render(build_board(state, generated_at=generated_at, public=public))


MARKDOWN_SUFFIXES = (".md", ".markdown")
RESERVED_FOLDERS = (".git", ".loopstate")


def check_render_target(target: str) -> str:
    """A Markdown file named in normal form below the project root, outside .git and .loopstate.

    One file has one name (no '.', empty or trailing segments), so a render and
    its staleness check always talk about the same file; git's and loopstate's
    own folders (the kill switch lives in .loopstate) are never written.
    """
    parts = target.split("/")
    why = None
    if not target or target.startswith("/") or "\\" in target:
        why = "is not a relative path with '/' separators"
    elif any(part in ("", ".", "..") for part in parts):
        why = "has an empty, '.' or '..' segment (write it in normal form, e.g. docs/GOAL_STATE.md)"
    elif any(part.lower() in RESERVED_FOLDERS for part in parts[:-1]):
        why = "is inside .git or .loopstate, which loopstate never writes projections into"
    elif not parts[-1].lower().endswith(MARKDOWN_SUFFIXES) or parts[-1].lower() in MARKDOWN_SUFFIXES:
        why = "is not a Markdown file name (it must end in .md or .markdown)"
    if why is not None:
        raise LoopstateError(
            ErrorCode.UNSAFE_PATH,
            f"render target {target!r} {why}; choose a Markdown file inside the project root, such as "
            "ACTIVE_GOAL_STATE.md or docs/GOAL_STATE.md", target=target,
        )
    return target


def _render(state: GoalState, command: proto.RenderMarkdown, ctx: Context) -> list[Event]:
    check_render_target(command.target)
    if command.privacy != privacy.PUBLIC_SAFE:
        raise LoopstateError(ErrorCode.VALIDATION_FAILED, "projection_rendered events are public_safe records: leave --privacy "
                             "out (use --public to redact what the projection shows)",
                             field="privacy")
    render_rule(ctx.extra.get(STATE_PRIVACY) or StatePrivacy(), public=command.public,
                tracked=bool(ctx.extra.get(RENDER_TRACKED)), target=command.target)
    existing = ctx.extra.get(RENDER_EXISTING)
    if existing in ("edited", "foreign") and not command.force:
        raise LoopstateError(
            ErrorCode.CONFLICT,
            f"{command.target} is {'edited by hand' if existing == 'edited' else 'not a projection of this goal'}; "
            "its text is not state and rendering would overwrite it: review it with `loopstate goals bridge`, "
            "record what matters as events (or `backfill` a hand-written file), then render with --force",
            target=command.target, existing=existing,
        )

    def build(at: str, eid: str) -> dict:
        text = markdown_for(state, at, command.public)
        return {"projection_kind": "markdown", "target": command.target, "checksum": text_checksum(text),
                "rendered_through_sequence": state.content.last_append_sequence, "public": command.public}

    event = _envelope(state, command, ctx, "projection_rendered", build)
    return [] if repeat_or_conflict(state, event, caller_time=command.recorded_at is not None) else [event]


def _compact(state: GoalState, command: proto.Compact, ctx: Context) -> list[Event]:
    if state.store.event_count == 0:
        raise LoopstateError(ErrorCode.RULE_VIOLATION, f"goal {state.goal_id!r} has no events to compact; "
                             "a snapshot needs at least one recorded event")

    def build(at: str, eid: str) -> dict:
        return {"through_append_sequence": state.store.last_append_sequence,
                "source_event_count": state.store.event_count,
                "source_checksum": state.store.source_checksum, "state_checksum": state_checksum(state)}

    event = _envelope(state, command, ctx, "snapshot_compacted", build)
    return [] if repeat_or_conflict(state, event, caller_time=command.recorded_at is not None) else [event]
