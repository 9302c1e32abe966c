"""The goal board: the seed's event projection, local or public.

A local board shows everything the store holds. A public board is what may
leave the machine (docs, fixtures, dashboards, PR packets): fields set by
local_private events are replaced by omission notes, private bodies and
pointers (of private_pointer records) never appear, and every string that is
shown is scrubbed of credentials and absolute local paths as a second line of
defence.
"""

from __future__ import annotations

from typing import Any

from loopstate_protocol.goals import (
    Board, EvidenceView, GateView, ProjectionMeta, QuotaLine, RefreshView, RenderView, RoleGroup, RunView, TodoView,
)

from loopstate.domains.goals import events as ev
from loopstate.domains.goals.ordering import todo_key
from loopstate.domains.goals.privacy import LOCAL_PRIVATE, PUBLIC_SAFE, scrub
from loopstate.domains.goals.state import Gate, GoalState, Todo

RECENT_COMPLETED = 10  # completed todos shown in full; older ones are archive candidates
RECENT_TIMELINE = 10  # runs and refreshes shown
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
        schema_version=ev.PROJECTION_SCHEMA, goal_id=state.goal_id, generated_at=generated_at,
        source_event_count=head.event_count, last_event_id=head.last_event_id,
        last_append_sequence=head.last_append_sequence, projection_version=ev.PROJECTION_VERSION,
        source_checksum=head.source_checksum, privacy=PUBLIC_SAFE if public else LOCAL_PRIVATE,
        store_sequence=state.store.last_append_sequence,
    )


def open_gates_for(state: GoalState, todo: Todo) -> list[str]:
    """Gates that block this todo's completion: tied to it, or named by its block, and unresolved."""
    ids = {g.gate_id for g in state.gates.values() if g.todo_id == todo.todo_id}
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


def gate_view(gate: Gate, show: _Shower) -> GateView:
    subject = f"gate {gate.gate_id}"
    return GateView(
        gate_id=gate.gate_id, gate_kind=gate.gate_kind, title=show.text(subject, gate, "title", gate.title) or "",
        status=gate.status, append_sequence=gate.added_sequence, todo_id=gate.todo_id, run_id=gate.run_id,
        decision=gate.decision, rationale=show.text(subject, gate, "rationale", gate.rationale),
        resolved_by=show.text(subject, gate, "resolved_by", gate.resolved_by),
    )


def build_board(state: GoalState, *, generated_at: str, public: bool) -> Board:
    show = _Shower(public)
    todos = sorted(state.todos.values(), key=todo_key)
    groups: dict[str, list[TodoView]] = {}
    for todo in todos:
        if todo.status != "completed":
            view = todo_view(state, todo, show)
            groups.setdefault(view.role, []).append(view)
    done = sorted(
        (t for t in todos if t.status == "completed"),
        key=lambda t: (t.completed_sequence or 0, t.added_sequence), reverse=True,
    )
    gates = sorted(state.gates.values(), key=lambda g: g.added_sequence)
    pending = [g for g in gates if g.status in ("open", "deferred")]
    resolved = sorted((g for g in gates if g.status in ("approved", "rejected")),
                      key=lambda g: g.resolved_sequence or 0, reverse=True)
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
    evidence = [
        EvidenceView(
            evidence_id=e.evidence_id, target_kind=e.target_kind, target_id=e.target_id,
            ref=show.text(f"evidence {e.evidence_id}", e, "ref", e.ref) or "",
            append_sequence=e.append_sequence, summary=show.text(f"evidence {e.evidence_id}", e, "summary", e.summary),
        )
        for e in sorted(state.evidence.values(), key=lambda e: e.append_sequence)
    ]
    render = state.last_render
    return Board(
        meta=meta(state, generated_at, public),
        active=[RoleGroup(role=role, todos=items) for role, items in sorted(groups.items())],
        completed=[todo_view(state, t, show) for t in done[:RECENT_COMPLETED]],
        archive_candidates=[todo_view(state, t, show) for t in done[RECENT_COMPLETED:]],
        user_inbox=[gate_view(g, show) for g in pending if g.gate_kind in USER_GATES],
        controller_inbox=[gate_view(g, show) for g in pending if g.gate_kind not in USER_GATES],
        resolved_gates=[gate_view(g, show) for g in resolved],
        runs=runs, run_count=state.run_count, refreshes=refreshes,
        quota=[QuotaLine(unit=q.unit, category=q.category, amount=q.amount, entries=q.entries)
               for _, q in sorted(state.quota.items())],
        evidence=evidence,
        omissions=sorted(set(show.omissions)),
        last_render=None if render is None else RenderView(
            projection_kind=render.projection_kind, target=render.target, checksum=render.checksum,
            rendered_through_sequence=render.rendered_through_sequence, public=render.public,
            append_sequence=render.append_sequence,
        ),
    )
