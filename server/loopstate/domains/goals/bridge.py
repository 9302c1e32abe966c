"""The migration bridge and the staleness check: the event projection against Markdown.

``bridge`` compares the board with the parse of a Markdown file and reports
every difference (a todo or gate only on one side, a field that differs, a
duplicate id, a line it could not read). Archive candidates are rendered in
compact form, so only their title, role, priority and status are compared.
``check`` says whether a rendered file is the current projection, stale (the
store has lifecycle events it does not show), edited by hand, or foreign.
"""

from __future__ import annotations

from typing import Any, Callable, TypeVar

import msgspec

from loopstate_protocol.goals import Board, BridgeReport, Difference, GateView, MarkdownStatus, TodoView

from loopstate.core.clock import format_time
from loopstate.core.errors import LoopstateError
from loopstate.domains.goals.markdown import Parsed, body_matches, split_header
from loopstate.domains.goals.ordering import instant
from loopstate.domains.goals.state import GoalState

TODO_FIELDS = (
    "title", "role", "priority", "status", "planner_order", "claimed_by", "lease_expires_at", "blocker_reason",
    "gate_ids", "resume_when", "resume_until", "rationale", "validation_refs", "evidence_ids", "metadata",
)
COMPACT_FIELDS = ("title", "role", "priority", "status")
GATE_FIELDS = ("gate_kind", "title", "status", "todo_id", "run_id", "decision", "rationale", "resolved_by")


def _text(value: Any) -> str | None:
    if value is None or value == [] or value == {}:
        return None
    if isinstance(value, list):
        return ", ".join(str(v) for v in value)
    if isinstance(value, dict):
        return ", ".join(f"{k}={v}" for k, v in sorted(value.items()))
    return str(value)


Item = TypeVar("Item")  # a projection item: a todo, a gate, a quota line, an evidence record


def _match(kind: str, events: dict[str, Item], parsed: list[Any], id_of: Callable[[Any], str | None],
           title_of: Callable[[Item], str], out: list[Difference]) -> list[tuple[Item, Any]]:
    """Pair parsed items (the Markdown parse's Parsed* records) with projection items by id (or by
    exact title when the line has no id)."""
    by_title: dict[str, str] = {}
    for event_key, event_item in events.items():
        by_title.setdefault(title_of(event_item), event_key)
    pairs, seen = [], set()
    for item in parsed:
        key: str | None = id_of(item) or by_title.get(item.title)
        if key in seen:
            out.append(Difference(kind="duplicate_in_markdown", subject=f"{kind} {key}", line=item.line))
            continue
        if key is None or key not in events:
            title = getattr(item, "title", key)
            out.append(Difference(kind="missing_in_events", subject=f"{kind} {key or title}", line=item.line,
                                  markdown_value=title))
            continue
        seen.add(key)
        pairs.append((events[key], item))
    for key in events:
        if key not in seen:
            out.append(Difference(kind="missing_in_markdown", subject=f"{kind} {key}", events_value=title_of(events[key])))
    return pairs


def _compare(subject: str, fields: tuple[str, ...], left: Any, right: Any, line: int, out: list[Difference]) -> None:
    for name in fields:
        a, b = _text(getattr(left, name)), _text(getattr(right, name))
        if a != b:
            out.append(Difference(kind="field_differs", subject=subject, field=name, events_value=a,
                                  markdown_value=b, line=line))


def _rows(kind: str, events: list[tuple], parsed: list[tuple[int, tuple]], out: list[Difference]) -> None:
    """Timeline rows (runs, refreshes) compared as multisets: a run may be recorded many times."""
    remaining = list(events)
    for line, row in parsed:
        if row in remaining:
            remaining.remove(row)
        else:
            out.append(Difference(kind="missing_in_events", subject=f"{kind} {row[0]}", line=line,
                                  markdown_value=" | ".join(_text(v) or "" for v in row)))
    for row in remaining:
        out.append(Difference(kind="missing_in_markdown", subject=f"{kind} {row[0]}",
                              events_value=" | ".join(_text(v) or "" for v in row)))


def _records(board: Board, parsed: Parsed, out: list[Difference]) -> None:
    """Runs, refreshes, quota totals and evidence refs: what the board shows against the file."""
    _rows("run", [(r.run_id, r.status, r.classification, r.delivery_outcome, r.todo_id, r.recorded_at) for r in board.runs],
          [(r.line, (r.run_id, r.status, r.classification, r.delivery_outcome, r.todo_id,
                     None if r.recorded_at is None else _instant_text(r.recorded_at)))
           for r in parsed.runs], out)
    _rows("refresh", [(r.recorded_at, r.refresh_kind, r.summary) for r in board.refreshes],
          [(r.line, (_instant_text(r.recorded_at), r.refresh_kind, r.summary)) for r in parsed.refreshes], out)
    quota = {f"{q.unit}/{q.category}": q for q in board.quota}
    for events_line, item in _match("quota", quota, parsed.quota, lambda q: f"{q.unit}/{q.category}",
                                    lambda q: f"{q.unit}/{q.category}", out):
        if events_line.amount != item.amount:
            out.append(Difference(kind="field_differs", subject=f"quota {item.unit}/{item.category}", field="amount",
                                  events_value=repr(events_line.amount), markdown_value=repr(item.amount), line=item.line))
    evidence = {e.evidence_id: e for e in board.evidence}
    for events_item, item in _match("evidence", evidence, parsed.evidence, lambda e: e.evidence_id,
                                    lambda e: e.evidence_id, out):
        _compare(f"evidence {item.evidence_id}", ("target_kind", "target_id", "ref", "summary"), events_item, item,
                 item.line, out)


def _instant_text(text: str) -> str:
    """A time as the store writes it (RFC 3339 UTC), or the text itself when it is not a time."""
    try:
        return format_time(instant(text))
    except LoopstateError:
        return text


def bridge(board: Board, parsed: Parsed, store_sequence: int) -> BridgeReport:
    out: list[Difference] = []
    todos: dict[str, TodoView] = {}
    compact: set[str] = set()
    for group in board.active:
        todos.update((t.todo_id, t) for t in group.todos)
    todos.update((t.todo_id, t) for t in board.completed)
    for todo in board.archive_candidates:
        todos[todo.todo_id] = todo
        compact.add(todo.todo_id)
    gates: dict[str, GateView] = {g.gate_id: g for g in (*board.user_inbox, *board.controller_inbox, *board.resolved_gates)}
    # A todo's evidence ids are what its completion named plus what was attached to it:
    # a file that lists the attachment only in its Evidence section says the same.
    attached: dict[str, set[str]] = {}
    for evidence in parsed.evidence:
        if evidence.target_kind == "todo":
            attached.setdefault(evidence.target_id, set()).add(evidence.evidence_id)
    for todo, item in _match("todo", todos, parsed.todos, lambda p: p.todo_id, lambda t: t.title, out):
        if todo.todo_id in attached:
            item = msgspec.structs.replace(item, evidence_ids=sorted(set(item.evidence_ids) | attached[todo.todo_id]))
        fields = COMPACT_FIELDS if todo.todo_id in compact or item.compact else TODO_FIELDS
        _compare(f"todo {todo.todo_id}", fields, todo, item, item.line, out)
    for gate, item in _match("gate", gates, parsed.gates, lambda p: p.gate_id, lambda g: g.title, out):
        _compare(f"gate {gate.gate_id}", GATE_FIELDS, gate, item, item.line, out)
    _records(board, parsed, out)
    for line, text in parsed.unparsed:
        out.append(Difference(kind="unparsed_line", subject="markdown", markdown_value=text[:200], line=line))
    header = parsed.header or {}
    return BridgeReport(
        goal_id=board.meta.goal_id, clean=not out, differences=out, events_todos=len(todos),
        markdown_todos=len(parsed.todos), events_gates=len(gates), markdown_gates=len(parsed.gates),
        markdown_sequence=header.get("last_append_sequence") if isinstance(header.get("last_append_sequence"), int) else None,
        store_sequence=store_sequence,
    )


def check(state: GoalState, text: str) -> MarkdownStatus:
    """Is ``text`` the current projection of this goal?"""
    head = state.content
    fields, body = split_header(text.replace("\r\n", "\n"))
    if fields is None or fields.get("goal_id") != state.goal_id:
        return MarkdownStatus(
            status="foreign", file_sequence=None, store_sequence=head.last_append_sequence, events_since=None,
            message=f"not a loopstate projection of goal {state.goal_id!r} (no matching header); "
                    "`loopstate goals backfill` imports a hand-written file",
        )
    sequence = fields.get("last_append_sequence")
    sequence = sequence if isinstance(sequence, int) else None
    count = fields.get("source_event_count")
    since = head.event_count - count if isinstance(count, int) else None
    if not body_matches(fields, body):
        return MarkdownStatus(
            status="edited", file_sequence=sequence, store_sequence=head.last_append_sequence, events_since=since,
            message="the text was edited after it was rendered; edits are not state changes: "
                    "`loopstate goals bridge` lists them, record them with `loopstate goals ...` commands",
        )
    if sequence != head.last_append_sequence or fields.get("source_checksum") != head.source_checksum:
        return MarkdownStatus(
            status="stale", file_sequence=sequence, store_sequence=head.last_append_sequence, events_since=since,
            message=f"stale: rendered through append_sequence {sequence}, the store is at "
                    f"{head.last_append_sequence} ({since} lifecycle event{'' if since == 1 else 's'} since); "
                    "run `loopstate goals render`",
        )
    return MarkdownStatus(
        status="current", file_sequence=sequence, store_sequence=head.last_append_sequence, events_since=0,
        message=f"current: rendered through append_sequence {sequence}, the store head",
    )
