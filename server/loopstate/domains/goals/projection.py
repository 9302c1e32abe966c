"""The goal board: the projection of a goal's events, local or public.

A local board shows everything the store holds. A public board is what may
leave the machine (docs, fixtures, dashboards, PR packets): fields set by
local_private events are replaced by omission notes, private bodies and
pointers (of private_pointer records) never appear, and every string that is
shown is scrubbed of credentials and absolute local paths as a second line of
defence.
"""

from __future__ import annotations

import bisect
import itertools
from typing import Any

from loopstate_protocol.errors import ErrorCode
from loopstate_protocol.goals import (
    Board,
    BoardPage,
    EvidenceView,
    GateView,
    ProjectionMeta,
    QuotaLine,
    RefreshView,
    RenderView,
    RoleGroup,
    RunView,
    TodoView,
)

from loopstate.core.errors import LoopstateError
from loopstate.domains.goals import envelope, packed
from loopstate.domains.goals.privacy import LOCAL_PRIVATE, PUBLIC_SAFE, scrub
from loopstate.domains.goals.state import RECENT_DONE, Done, Gate, GoalState, Todo

RECENT_COMPLETED = RECENT_DONE  # completed todos shown in full; older ones are archive candidates
RECENT_TIMELINE = 10  # runs, refreshes, resolved gates and evidence shown on a page
OMITTED = "[omitted: private]"
USER_GATES = ("user", "owner")


class _Shower:
    """Applies the public rules to each value shown, collecting omission notes."""

    def __init__(self, public: bool) -> None:
        self.public = public
        self.omissions: list[str] = []

    def text(self, subject: str, record: Any, name: str, value: str | None) -> str | None:
        if value is None or not self.public:
            return value
        if name in record.private_fields:
            self.omissions.append(f"{subject}: {name} omitted (private record)")
            return OMITTED
        clean, kinds = scrub(value)
        if kinds:
            self.omissions.append(f"{subject}: {name} redacted ({', '.join(sorted(set(kinds)))})")
        return clean

    def texts(self, subject: str, record: Any, name: str, values: list[str]) -> list[str]:
        if not self.public or not values:
            return list(values)
        if name in record.private_fields:
            self.omissions.append(f"{subject}: {name} omitted (private record)")
            return [OMITTED]
        return [self.text(subject, record, name, v) or "" for v in values]

    def mapping(self, subject: str, record: Any, name: str, value: dict[str, str]) -> dict[str, str]:
        if not self.public or not value:
            return dict(value)
        if name in record.private_fields:
            self.omissions.append(f"{subject}: {name} omitted (private record)")
            return {}
        return {k: self.text(subject, record, name, v) or "" for k, v in sorted(value.items())}

    def private_only(self, subject: str, name: str, value: str | None) -> str | None:
        if value is None or not self.public:
            return value
        self.omissions.append(f"{subject}: {name} omitted (private material stays local)")
        return None


def meta(state: GoalState, generated_at: str, public: bool) -> ProjectionMeta:
    head = state.content
    return ProjectionMeta(
        schema_version=envelope.PROJECTION_SCHEMA, goal_id=state.goal_id, generated_at=generated_at,
        source_event_count=head.event_count, last_event_id=head.last_event_id,
        last_append_sequence=head.last_append_sequence, projection_version=envelope.PROJECTION_VERSION,
        source_checksum=head.source_checksum, privacy=PUBLIC_SAFE if public else LOCAL_PRIVATE,
        store_sequence=state.store.last_append_sequence,
    )


def open_gates_for(state: GoalState, todo: Todo) -> list[str]:
    """Gates that block this todo's completion: tied to it, or named by its block, and unresolved."""
    ids = {g for g in state.pending_gates if state.gates[g].todo_id == todo.todo_id}
    ids.update(todo.gate_ids)
    return sorted(i for i in ids if i in state.gates and state.gates[i].status in ("open", "deferred"))


def todo_view(state: GoalState, todo: Todo, show: _Shower) -> TodoView:
    subject = f"todo {todo.todo_id}"
    return TodoView(
        todo_id=todo.todo_id, title=show.text(subject, todo, "title", todo.title) or "",
        role=show.text(subject, todo, "role", todo.role) or "",
        priority=todo.priority, status=todo.status, append_sequence=todo.added_sequence,
        planner_order=todo.planner_order,
        claimed_by=show.text(subject, todo, "claimed_by", todo.claimed_by),
        lease_expires_at=todo.lease_expires_at,
        blocker_reason=show.text(subject, todo, "blocker_reason", todo.blocker_reason),
        gate_ids=list(todo.gate_ids), open_gate_ids=open_gates_for(state, todo),
        resume_when=show.text(subject, todo, "resume_when", todo.resume_when), resume_until=todo.resume_until,
        rationale=show.text(subject, todo, "rationale", todo.rationale),
        validation_refs=show.texts(subject, todo, "validation_refs", todo.validation_refs),
        evidence_ids=list(todo.evidence_ids),
        metadata=show.mapping(subject, todo, "metadata", todo.metadata),
        details=show.private_only(subject, "details", todo.details),
        pointer=show.private_only(subject, "pointer", todo.pointer),
        source=show.text(subject, todo, "source", todo.source),
    )


def archived_view(done: Done, show: _Shower) -> TodoView:
    """An archive candidate's compact view: what the Markdown's archive section shows of it."""
    subject = f"todo {done.todo_id}"
    return TodoView(
        todo_id=done.todo_id, title=show.text(subject, done, "title", done.title) or "",
        role=show.text(subject, done, "role", done.role) or "", priority=done.priority, status="completed",
        append_sequence=done.added_sequence,
    )


def gate_view(gate: Gate, show: _Shower) -> GateView:
    subject = f"gate {gate.gate_id}"
    return GateView(
        gate_id=gate.gate_id, gate_kind=gate.gate_kind, title=show.text(subject, gate, "title", gate.title) or "",
        status=gate.status, append_sequence=gate.added_sequence, todo_id=gate.todo_id, run_id=gate.run_id,
        decision=gate.decision, rationale=show.text(subject, gate, "rationale", gate.rationale),
        resolved_by=show.text(subject, gate, "resolved_by", gate.resolved_by),
    )


def _bad_cursor(cursor: str, why: str) -> LoopstateError:
    return LoopstateError(
        ErrorCode.INVALID_PARAMS,
        f"board cursor {cursor!r} {why}; pass the page.next_cursor a board page gave, as it was given, "
        "or leave the cursor out for the first page", field="cursor",
    )


def _start(state: GoalState, cursor: str) -> int:
    """The position in the board order of the todo after the one ``cursor`` names.

    ``a.<priority>.<has order>.<order>.<append sequence>`` names an active todo by its
    board key, ``c.<sequence>`` a completed one by its completion: each stays meaningful
    after appends, so the next page starts where the order is now past that point."""
    kind, _, rest = cursor.partition(".")
    parts = rest.split(".")
    if not all(part.isascii() and part.isdigit() and len(part) <= 20 for part in parts):
        raise _bad_cursor(cursor, "is not a board cursor (a.<4 numbers> or c.<number>)")
    numbers = [int(part) for part in parts]
    if kind == "a" and len(numbers) == 4:
        return bisect.bisect_left(state.order, (numbers[0], numbers[1], numbers[2], numbers[3] + 1))
    if kind == "c" and len(numbers) == 1:
        newer = packed.size(state.done) - packed.count_below(state.done, numbers[0])
        return len(state.order) + newer
    raise _bad_cursor(cursor, "is not a board cursor (a.<4 numbers> or c.<number>)")


def _cursor_at(state: GoalState, position: int) -> str:
    active = len(state.order)
    if position < active:
        rank, flag, order, sequence, _ = state.order[position]
        return f"a.{rank}.{flag}.{order}.{sequence}"
    number = packed.size(state.done) - 1 - (position - active)
    return f"c.{packed.record(state.done, number, Done).completed_sequence}"


def _page_bounds(state: GoalState, limit: int | None, cursor: str | None) -> tuple[int, int]:
    """Positions [start, end) of the page in the board order (active, then completed newest first)."""
    active, total = len(state.order), len(state.order) + packed.size(state.done)
    start = 0 if cursor is None else _start(state, cursor)
    if limit is None:
        return start, total
    if cursor is None:
        shown = min(limit, active)
        if shown == active:
            shown += min(RECENT_COMPLETED, limit - shown, total - active)
        return 0, shown
    return start, min(total, start + limit)


def build_board(state: GoalState, *, generated_at: str, public: bool, limit: int | None = None,
                cursor: str | None = None) -> Board:
    """One page of the board (``limit`` None: the whole board). It costs O(what it shows): the live
    todos are kept in board order by the fold, completed ones are read from the archive by position."""
    show = _Shower(public)
    start, end = _page_bounds(state, limit, cursor)
    active_total, done_total = len(state.order), packed.size(state.done)
    groups: dict[str, list[TodoView]] = {}
    completed: list[TodoView] = []
    archive: list[TodoView] = []
    for position in range(start, end):
        if position < active_total:
            view = todo_view(state, state.todos[state.order[position][4]], show)
            groups.setdefault(view.role, []).append(view)
            continue
        newer = position - active_total  # completed todos newer than this one
        if newer < RECENT_COMPLETED:
            completed.append(todo_view(state, state.recent_done[-1 - newer], show))
        else:
            archive.append(archived_view(packed.record(state.done, done_total - 1 - newer, Done), show))
    pending = [state.gates[g] for g in state.pending_gates]
    shown_resolved = len(state.resolved_order) if limit is None else RECENT_TIMELINE
    resolved = [state.gates[g] for g in itertools.islice(reversed(state.resolved_order), shown_resolved)]
    shown_evidence = len(state.evidence) if limit is None else RECENT_TIMELINE
    evidence = list(itertools.islice(reversed(state.evidence.values()), shown_evidence))[::-1]
    runs = [
        RunView(
            run_id=r.run_id, status=r.status, recorded_at=r.recorded_at, append_sequence=r.append_sequence,
            classification=r.classification, delivery_outcome=r.delivery_outcome, todo_id=r.todo_id,
            summary=show.text(f"run {r.run_id}", r, "summary", r.summary),
        )
        for r in state.runs[-RECENT_TIMELINE:]
    ]
    refreshes = [
        RefreshView(
            refresh_kind=r.refresh_kind, summary=show.text(f"refresh at {r.append_sequence}", r, "summary", r.summary) or "",
            recorded_at=r.recorded_at, append_sequence=r.append_sequence,
        )
        for r in state.refreshes[-RECENT_TIMELINE:]
    ]
    evidence_views = [
        EvidenceView(
            evidence_id=e.evidence_id, target_kind=e.target_kind, target_id=e.target_id,
            ref=show.text(f"evidence {e.evidence_id}", e, "ref", e.ref) or "",
            append_sequence=e.append_sequence, summary=show.text(f"evidence {e.evidence_id}", e, "summary", e.summary),
        )
        for e in evidence
    ]
    total = active_total + done_total
    counts = {**state.status_counts, "completed": done_total} if done_total else state.status_counts
    render = state.last_render
    return Board(
        meta=meta(state, generated_at, public),
        active=[RoleGroup(role=role, todos=items) for role, items in sorted(groups.items())],
        completed=completed,
        archive_candidates=archive,
        user_inbox=[gate_view(g, show) for g in pending if g.gate_kind in USER_GATES],
        controller_inbox=[gate_view(g, show) for g in pending if g.gate_kind not in USER_GATES],
        resolved_gates=[gate_view(g, show) for g in resolved],
        runs=runs, run_count=state.run_count, refreshes=refreshes,
        quota=[QuotaLine(unit=q.unit, category=q.category, amount=q.amount, entries=q.entries)
               for _, q in sorted(state.quota.items())],
        evidence=evidence_views,
        omissions=sorted(set(show.omissions)),
        page=BoardPage(
            limit=limit, cursor=cursor, next_cursor=_cursor_at(state, end - 1) if end < total else None,
            before=start, after=total - end, active_total=active_total, completed_total=done_total,
            status_counts=dict(sorted(counts.items())),
            resolved_gates_total=len(state.resolved_order), evidence_total=len(state.evidence),
        ),
        last_render=None if render is None else RenderView(
            projection_kind=render.projection_kind, target=render.target, checksum=render.checksum,
            rendered_through_sequence=render.rendered_through_sequence, public=render.public,
            append_sequence=render.append_sequence,
        ),
    )
