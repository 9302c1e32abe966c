"""Backfill: todos and gates of an ACTIVE_GOAL_STATE.md-style file, imported as events.

Runs, the refresh timeline, quota totals and evidence are imported too (see
``_records`` for what is skipped so a second import never counts twice).
As LoopX's migration rules have it (kept for compatibility), every backfilled event has
``producer=loopx.backfill`` and source refs (``source``, ``source_line``,
``source_sha256``) that explain its provenance without copying the file. Only
the item and table sections are imported; prose sections are not. Each event's
privacy class follows its content: text with a local path or credential, or a
private detail body, makes it ``local_private``; a pointer alone makes it
``private_pointer``; the rest is ``public_safe``. Event ids derive from the
goal, the file's checksum and the line (a UUIDv5 of those values), and an item
without an id keeps the id the first import of its line gave it, so importing
the same file twice appends nothing. Items whose id the goal already has are
skipped (the bridge shows how they differ); lines in the todo and gate sections that cannot be read refuse the
whole import, so nothing is silently dropped.
"""

from __future__ import annotations

from typing import Any

from loopstate_protocol import goals as proto
from loopstate_protocol.errors import ErrorCode

from loopstate.core.clock import format_time
from loopstate.core.errors import LoopstateError
from loopstate.core.ids import derived_uuid
from loopstate.domains.base import Context
from loopstate.domains.goals import eventids, privacy
from loopstate.domains.goals import events as ev
from loopstate.domains.goals.decide import free_id, normalize_time, repeat_or_conflict
from loopstate.domains.goals.markdown import ParsedTodo, parse, text_checksum
from loopstate.domains.goals.state import GoalState, todo_added_by, todo_statuses

MAX_UNPARSED_SHOWN = 5


def _classify(payload: dict[str, Any], forced: str) -> str:
    if forced == privacy.LOCAL_PRIVATE or payload.get("details") is not None:
        return privacy.LOCAL_PRIVATE
    shown = {k: v for k, v in payload.items() if k not in ("details", "pointer")}
    try:
        privacy.check_public_text("backfill", "payload", shown)
    except LoopstateError:
        return privacy.LOCAL_PRIVATE
    return privacy.PRIVATE_POINTER if payload.get("pointer") is not None else privacy.PUBLIC_SAFE


class _Importer:
    def __init__(self, state: GoalState, command: proto.Backfill, ctx: Context) -> None:
        if command.privacy == privacy.PRIVATE_POINTER:
            raise LoopstateError(ErrorCode.VALIDATION_FAILED, "backfill classifies each event itself; use privacy "
                                 "public_safe (classify by content) or local_private (keep everything local)",
                                 field="privacy")
        ignored = [name for name, given in (
            ("event_id", command.event_id is not None),
            ("producer", command.producer not in (None, ev.BACKFILL_PRODUCER)),
            ("refs", bool(command.refs)),
        ) if given]
        if ignored:
            raise LoopstateError(
                ErrorCode.VALIDATION_FAILED,
                f"backfill sets {', '.join(ignored)} itself (one event id per item, derived from the file; producer "
                f"{ev.BACKFILL_PRODUCER}; source refs); leave {', '.join(ignored)} out", field=ignored[0],
            )
        privacy.check_public_text("backfill", "source_label", command.source_label)
        self.state, self.command, self.ctx = state, command, ctx
        self.sha = text_checksum(command.markdown)
        self.events: list[dict[str, Any]] = []

    def event_id(self, line: int, event_type: str) -> str:
        """The id of the ``event_type`` event for ``line`` of this file: the same on every import of it."""
        return derived_uuid(f"goals-backfill:{self.state.goal_id}", f"{self.sha}:{line}:{event_type}")

    def earlier_id(self, line: int, event_type: str, records: dict[str, Any]) -> str | None:
        """The id an earlier import of this very file gave the item on ``line`` (for items without one)."""
        event_id = self.event_id(line, event_type)
        if event_type == "todo_added":
            return todo_added_by(self.state, event_id)
        if eventids.lookup(self.state.event_ids, event_id) is None:
            return None
        return next((key for key, record in records.items() if record.added_event_id == event_id), None)

    def emit(self, line: int, event_type: str, payload: dict[str, Any], at: str | None = None) -> None:
        """Append one event for ``line``; ``at`` is the time the file gives the record (runs, refreshes)."""
        state, command = self.state, self.command
        event_id = self.event_id(line, event_type)
        known = eventids.lookup(state.event_ids, event_id)
        caller_time = at is not None or command.recorded_at is not None
        if at is not None:
            at = _time(at, self, line)
        elif command.recorded_at is not None:
            at = normalize_time(command.recorded_at, "recorded_at")
        else:
            original = None if known is None else known.recorded_at
            at = original if original is not None else format_time(self.ctx.now)
        clean = {k: v for k, v in payload.items() if v is not None and v != [] and v != {}}
        refs = {"source": f"markdown:{command.source_label}", "source_line": str(line), "source_sha256": self.sha}
        for name in ("todo_id", "gate_id", "run_id", "evidence_id"):
            if name in clean:
                refs[name] = clean[name]
        try:
            event = ev.make_event(
                event_type=event_type, event_id=event_id, goal_id=state.goal_id, recorded_at=at,
                producer=ev.BACKFILL_PRODUCER, privacy_class=_classify(clean, command.privacy), refs=refs,
                payload=clean,
            )
        except LoopstateError as exc:
            raise LoopstateError(exc.code, f"{command.source_label} line {line}: {exc.message}", line=line,
                                 **exc.details) from None
        if not repeat_or_conflict(state, event, caller_time=caller_time):
            self.events.append(event)


def _unique(label: str, items: list, key_of, what: str) -> None:
    seen: set[str] = set()
    for item in items:
        key = key_of(item)
        if key in seen:
            raise _refuse(label, item.line, f"{what} {key!r} appears twice; each may appear once")
        seen.add(key)


def _refuse(label: str, line: int, message: str) -> LoopstateError:
    return LoopstateError(ErrorCode.RULE_VIOLATION, f"{label} line {line}: {message}", line=line)


def backfill_events(state: GoalState, command: proto.Backfill, ctx: Context) -> list[dict[str, Any]]:
    importer = _Importer(state, command, ctx)
    label = command.source_label
    parsed = parse(command.markdown)
    if parsed.unparsed:
        shown = "; ".join(f"line {n}: {text[:80]!r}" for n, text in parsed.unparsed[:MAX_UNPARSED_SHOWN])
        raise LoopstateError(
            ErrorCode.VALIDATION_FAILED,
            f"{label}: {len(parsed.unparsed)} line(s) in the todo and gate sections could not be read ({shown}); "
            "write items as '- [ ] P1 `T001` Title' with '  - key: value' details, or move prose out of those sections",
            lines=[n for n, _ in parsed.unparsed],
        )
    if not (parsed.todos or parsed.gates or parsed.runs or parsed.refreshes or parsed.quota or parsed.evidence):
        raise LoopstateError(
            ErrorCode.VALIDATION_FAILED,
            f"{label}: no items found; backfill reads '## Todos' (with '### <role>' headings), '## Completed', "
            "'## Gates', '## Runs', '## Refresh timeline', '## Quota' and '## Evidence' sections",
        )
    statuses = todo_statuses(state)  # every todo of the goal: a bulk import reads the archive once
    todos = _with_ids(label, parsed.todos, set(statuses), "T",
                      lambda t: t.todo_id or importer.earlier_id(t.line, "todo_added", {}))
    gates = _with_ids(label, parsed.gates, set(state.gates), "G",
                      lambda g: g.gate_id or importer.earlier_id(g.line, "gate_added", state.gates))
    new_todos = [(i, t) for i, t in todos if i not in statuses]
    new_gates = [(i, g) for i, g in gates if i not in state.gates]
    known_todos = {**statuses, **{i: t.status for i, t in todos}}
    gate_status = {**{i: g.status for i, g in state.gates.items()}, **{i: g.status for i, g in gates}}
    _check_links(label, todos, gates, known_todos, gate_status, statuses)

    for todo_id, todo in new_todos:
        importer.emit(todo.line, "todo_added", {
            "todo_id": todo_id, "title": todo.title, "role": todo.role, "priority": todo.priority,
            "planner_order": todo.planner_order, "metadata": todo.metadata, "details": todo.details,
            "pointer": todo.pointer,
        })
    for gate_id, gate in new_gates:
        importer.emit(gate.line, "gate_added", {
            "gate_id": gate_id, "gate_kind": gate.gate_kind, "title": gate.title, "todo_id": gate.todo_id,
            "run_id": gate.run_id,
        })
    for gate_id, gate in new_gates:
        if gate.status != "open":
            decision = {"deferred": "defer", "rejected": "reject"}.get(gate.status, "approve")
            importer.emit(gate.line, "gate_resolved", {
                "gate_id": gate_id, "decision": decision, "rationale": gate.rationale, "resolved_by": gate.resolved_by,
            })
    for todo_id, todo in new_todos:
        _status_event(importer, todo_id, todo)
    _records(importer, parsed, known_todos, gate_status)
    return importer.events


def _records(importer: _Importer, parsed: Any, known_todos: dict, gate_status: dict) -> None:
    """Runs, refreshes, quota and evidence: what the goal does not hold yet.

    Runs have no id of their own beyond the run's, so a run the goal already
    recorded is skipped; a quota line is a total, so a unit/category the goal
    already counts is skipped (adding it would count it twice); a refresh is
    skipped when the goal's recent timeline has the same time, kind and summary.
    """
    state, label = importer.state, importer.command.source_label
    file_runs = set()
    for run in parsed.runs:
        file_runs.add(run.run_id)
        if run.run_id in state.run_ids:
            continue
        if run.todo_id is not None and run.todo_id not in known_todos:
            raise _refuse(label, run.line, f"run {run.run_id!r} names todo {run.todo_id!r}, which neither the file nor the goal has")
        importer.emit(run.line, "run_recorded", {
            "run_id": run.run_id, "status": run.status, "classification": run.classification,
            "delivery_outcome": run.delivery_outcome, "todo_id": run.todo_id,
        }, at=run.recorded_at)
    recent = {(r.recorded_at, r.refresh_kind, r.summary) for r in state.refreshes}
    for refresh in parsed.refreshes:
        at = _time(refresh.recorded_at, importer, refresh.line)
        if (at, refresh.refresh_kind, refresh.summary) not in recent:
            importer.emit(refresh.line, "refresh_recorded", {"refresh_kind": refresh.refresh_kind,
                                                             "summary": refresh.summary}, at=at)
    _unique(label, parsed.quota, lambda q: f"{q.unit}/{q.category}", "quota line")
    _unique(label, parsed.evidence, lambda e: e.evidence_id, "evidence id")
    for line in parsed.quota:
        if f"{line.unit}/{line.category}" not in state.quota:
            importer.emit(line.line, "quota_spent", {"amount": line.amount, "unit": line.unit, "category": line.category})
    known = {"todo": set(known_todos), "gate": set(gate_status), "run": set(state.run_ids) | file_runs}
    for evidence in parsed.evidence:
        if evidence.evidence_id in state.evidence:
            continue
        if evidence.target_id not in known[evidence.target_kind]:
            raise _refuse(label, evidence.line, f"evidence {evidence.evidence_id!r} is attached to {evidence.target_kind} "
                          f"{evidence.target_id!r}, which neither the file nor the goal has")
        importer.emit(evidence.line, "evidence_attached", {
            "evidence_id": evidence.evidence_id, "target_kind": evidence.target_kind, "target_id": evidence.target_id,
            "ref": evidence.ref, "summary": evidence.summary,
        })


def _with_ids(label: str, items: list, taken: set[str], prefix: str, id_of) -> list[tuple[str, Any]]:
    """Give id-less items fresh ids (``id_of`` names an item's id, or the one an earlier
    import gave it); refuse an id used twice in the file."""
    seen: set[str] = set()
    out = []
    given = [(id_of(item), item) for item in items]
    claimed = taken | {item_id for item_id, _ in given if item_id}
    for item_id, item in given:
        if item_id is None:
            item_id = free_id(claimed, prefix)
            claimed.add(item_id)
        elif item_id in seen:
            raise _refuse(label, item.line, f"id {item_id!r} appears twice; ids are stable references and must be unique")
        seen.add(item_id)
        out.append((item_id, item))
    return out


def _check_links(label, todos, gates, known_todos, gate_status, statuses) -> None:
    for gate_id, gate in gates:
        if gate.todo_id is not None and gate.todo_id not in known_todos:
            raise _refuse(label, gate.line, f"gate {gate_id!r} names todo {gate.todo_id!r}, which neither the file nor the goal has")
    for todo_id, todo in todos:
        for gate_id in todo.gate_ids:
            if gate_id not in gate_status:
                raise _refuse(label, todo.line, f"todo {todo_id!r} is blocked by gate {gate_id!r}, which neither the file nor the goal has")
        if todo.status == "completed" and todo_id not in statuses:
            tied = {g for g, item in gates if item.todo_id == todo_id} | set(todo.gate_ids)
            pending = sorted(g for g in tied if gate_status.get(g) in ("open", "deferred"))
            if pending:
                raise _refuse(label, todo.line, f"todo {todo_id!r} is marked completed but gate(s) {', '.join(pending)} "
                              "tied to it are unresolved; resolve them in the file or mark the todo open")


def _status_event(importer: _Importer, todo_id: str, todo: ParsedTodo) -> None:
    base = {"todo_id": todo_id}
    if todo.status == "claimed":
        importer.emit(todo.line, "todo_claimed", {**base, "claimed_by": todo.claimed_by or "unknown",
                                                 "lease_expires_at": _time(todo.lease_expires_at, importer, todo.line)})
    elif todo.status == "blocked":
        importer.emit(todo.line, "todo_blocked", {**base, "reason": todo.blocker_reason or "blocked (no reason in the file)",
                                                 "gate_ids": sorted(set(todo.gate_ids))})
    elif todo.status == "deferred":
        importer.emit(todo.line, "todo_deferred", {**base, "resume_when": todo.resume_when or "unspecified in the file",
                                                  "until": _time(todo.resume_until, importer, todo.line)})
    elif todo.status == "completed":
        importer.emit(todo.line, "todo_completed", {**base, "rationale": todo.rationale or "completed before backfill",
                                                   "validation_refs": todo.validation_refs,
                                                   "evidence_ids": sorted(set(todo.evidence_ids))})


def _time(text: str | None, importer: _Importer, line: int) -> str | None:
    if text is None:
        return None
    try:
        return normalize_time(text, "time")
    except LoopstateError as exc:
        raise _refuse(importer.command.source_label, line, exc.message) from None

