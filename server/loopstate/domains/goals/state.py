"""A goal's folded state, and ``evolve``: one event at a time, in append order.

The state is a tree of msgspec Structs so a snapshot checkpoint can encode and
decode it exactly. They hold only strings, numbers and containers of them (no
cycles), so they are not tracked by the garbage collector (``gc=False``): a
replay of many todos does not pay for collector passes over them. ``evolve`` updates it in place and returns it (the service
replaces its state with the return value). It also applies the consumer rule
of goal streams: an event id seen before with an identical body is ignored, one
with a different body stops the replay with EVENT_ID_CONFLICT (fail closed).

Live state and history are held apart, so what a long-lived process keeps
grows with the live todos, not with the goal's age:

- ``todos`` holds the todos that are not completed, in full, with ``order``
  (their board order: priority, planner order, append order) and
  ``status_counts`` kept by the fold, so a board page is a bisect and a slice.
- A completed todo leaves ``todos``: the latest ``RECENT_DONE`` stay in full in
  ``recent_done`` (the board's completed tail); every one is a compact ``Done``
  record in the ``done`` archive (packed bytes, in completion order: what the
  board's archive pages and the Markdown's archive section show), found by id
  through ``done_ids``.
- The event ids seen (for event-id idempotency) are ``event_ids``,
  packed in about 26 bytes an id, not a dict of strings (``eventids.py``).
"""

from __future__ import annotations

import bisect
from typing import Any, Literal

import msgspec

from loopstate_protocol.errors import ErrorCode

from loopstate.core.errors import LoopstateError
from loopstate.domains.goals import envelope, eventids, packed
from loopstate.domains.goals.privacy import LOCAL_PRIVATE

RECENT_LIMIT = 50  # timeline entries kept in memory per kind (runs, refreshes)
RECENT_DONE = 10  # completed todos kept in full: the board's completed tail
PRIORITY_RANK = {"P0": 0, "P1": 1, "P2": 2, "P3": 3, "P4": 4}


class Head(msgspec.Struct, kw_only=True, gc=False):
    """What a projection names as its source: count, last id, last sequence, integrity."""

    event_count: int = 0
    last_event_id: str | None = None
    last_append_sequence: int = 0
    source_checksum: str | None = None


class Todo(msgspec.Struct, kw_only=True, gc=False):
    todo_id: str
    title: str
    role: str
    priority: str
    status: str  # open | claimed | blocked | deferred | completed
    added_sequence: int
    added_event_id: str
    planner_order: int | None = None
    claimed_by: str | None = None
    lease_expires_at: str | None = None
    blocker_reason: str | None = None
    gate_ids: list[str] = []
    resume_when: str | None = None
    resume_until: str | None = None
    rationale: str | None = None
    validation_refs: list[str] = []
    evidence_ids: list[str] = []
    metadata: dict[str, str] = {}
    details: str | None = None
    pointer: str | None = None
    completed_sequence: int | None = None
    source: str | None = None
    # Fields whose current value came from a non-public event: public views omit them.
    private_fields: list[str] = []


class Done(msgspec.Struct, array_like=True, gc=False):
    """A completed todo as the archive keeps it: what the compact (archive) view shows.
    The fields that are mostly their default come last, so a record leaves them out
    (``archived``) and decodes with them filled in."""

    todo_id: str
    title: str
    priority: str
    added_sequence: int
    completed_sequence: int
    role: str = "agent"
    private_fields: list[str] = []  # of title and role

    @property
    def status(self) -> str:
        return "completed"


def archived(todo: Todo) -> list[Any]:
    """A completed todo's ``Done`` record as the archive stores it: an array without its trailing
    defaults (msgspec writes every field of an array-like Struct; most todos keep the default role
    and nothing private, 7 bytes a record)."""
    private = [name for name in todo.private_fields if name in ("title", "role")]
    record = [todo.todo_id, todo.title, todo.priority, todo.added_sequence, todo.completed_sequence, todo.role, private]
    return record if private else record[:6] if todo.role != "agent" else record[:5]


def board_key(todo: Todo) -> tuple[int, int, int, int]:
    """The projection order: priority (P0 first), planner order when present, then append order."""
    order = todo.planner_order
    return (PRIORITY_RANK.get(todo.priority, 9), 0 if order is not None else 1, order if order is not None else 0,
            todo.added_sequence)


class Gate(msgspec.Struct, kw_only=True, gc=False):
    gate_id: str
    gate_kind: str
    title: str
    status: str  # open | deferred | approved | rejected
    added_sequence: int
    added_event_id: str
    todo_id: str | None = None
    run_id: str | None = None
    decision: str | None = None
    rationale: str | None = None
    resolved_by: str | None = None
    resolved_sequence: int | None = None
    private_fields: list[str] = []


class Run(msgspec.Struct, kw_only=True, gc=False):
    run_id: str
    status: str
    recorded_at: str
    append_sequence: int
    classification: str | None = None
    delivery_outcome: str | None = None
    todo_id: str | None = None
    summary: str | None = None
    pointer: str | None = None
    private_fields: list[str] = []


class Refresh(msgspec.Struct, kw_only=True, gc=False):
    refresh_kind: str
    summary: str
    recorded_at: str
    append_sequence: int
    pointer: str | None = None
    private_fields: list[str] = []


class Quota(msgspec.Struct, kw_only=True, gc=False):
    unit: str
    category: str
    amount: float = 0.0
    entries: int = 0


class Evidence(msgspec.Struct, kw_only=True, gc=False):
    evidence_id: str
    target_kind: str
    target_id: str
    ref: str
    append_sequence: int
    added_event_id: str
    summary: str | None = None
    pointer: str | None = None
    private_fields: list[str] = []


class Render(msgspec.Struct, kw_only=True, gc=False):
    projection_kind: str
    target: str
    checksum: str
    rendered_through_sequence: int
    public: bool
    append_sequence: int


class Snapshot(msgspec.Struct, kw_only=True, gc=False):
    through_append_sequence: int
    state_checksum: str
    append_sequence: int


class GoalState(msgspec.Struct, kw_only=True, gc=False):
    goal_id: str
    store: Head = msgspec.field(default_factory=Head)  # every event
    content: Head = msgspec.field(default_factory=Head)  # lifecycle events (projection sources)
    todos: dict[str, Todo] = {}  # todos not completed
    order: list[tuple[int, int, int, int, str]] = []  # board_key + todo_id of each todo in ``todos``, sorted
    status_counts: dict[str, int] = {}  # of the todos in ``todos``
    recent_done: list[Todo] = []  # the latest RECENT_DONE completed todos, oldest first
    done: packed.Archive = msgspec.field(default_factory=packed.Archive)  # every completed todo, keyed by completion
    done_ids: packed.TagIndex = msgspec.field(default_factory=packed.TagIndex)  # entry n: record n's todo id
    gates: dict[str, Gate] = {}
    pending_gates: list[str] = []  # open or deferred gates, in the order they were added
    resolved_order: list[str] = []  # approved or rejected gates, in the order they were resolved
    runs: list[Run] = []
    run_count: int = 0
    run_ids: dict[str, int] = {}  # every run id recorded, with how often (runs keeps only the latest)
    refreshes: list[Refresh] = []
    quota: dict[str, Quota] = {}
    evidence: dict[str, Evidence] = {}
    last_render: Render | None = None
    last_snapshot: Snapshot | None = None
    event_ids: eventids.EventIds = msgspec.field(default_factory=eventids.EventIds)


STATE_LAYOUT = 3  # bumped whenever GoalState changes shape: a snapshot of another layout is not decoded


class GoalSnapshot(msgspec.Struct, kw_only=True, gc=False):
    """A goal state as its projection snapshot holds it, with the layout it was written in.

    Layout 1 (before the live/history split) had no wrapper: its bytes do not decode as
    this type, so such a snapshot is ignored (a full fold) instead of read as a state
    that lacks its archive and event ids. Layout 2 (event ids in 24-byte slots of one
    table) has this wrapper with ``layout: 2``, which does not decode as ``Literal[3]``."""

    layout: Literal[3]
    state: GoalState


def done_record(state: GoalState, todo_id: str) -> Done | None:
    """The archive record of a completed todo, checked by id (tags may collide)."""
    for number in packed.numbers(state.done_ids, packed.tag_of(todo_id)):
        done = packed.record(state.done, number, Done)
        if done.todo_id == todo_id:
            return done
    return None


def find_todo(state: GoalState, todo_id: str) -> Todo | Done | None:
    """A todo of the goal: live in full, or completed as its compact record."""
    todo = state.todos.get(todo_id)
    return todo if todo is not None else done_record(state, todo_id)


def todo_total(state: GoalState) -> int:
    return len(state.todos) + packed.size(state.done)


def todo_statuses(state: GoalState) -> dict[str, str]:
    """Every todo id of the goal with its status: O(history), for a bulk import (backfill)."""
    out = {todo_id: todo.status for todo_id, todo in state.todos.items()}
    for number in range(packed.size(state.done)):
        out[packed.record(state.done, number, Done).todo_id] = "completed"
    return out


def todo_added_by(state: GoalState, event_id: str) -> str | None:
    """The id of the todo an earlier todo_added with this event id added (None when there is none)."""
    known = eventids.lookup(state.event_ids, event_id)
    if known is None:
        return None
    for todo in state.todos.values():
        if todo.added_sequence == known.sequence:
            return todo.todo_id
    for number in range(packed.size(state.done) - 1, -1, -1):  # a rare path: a repeated add of a completed todo
        done = packed.record(state.done, number, Done)
        if done.added_sequence == known.sequence:
            return done.todo_id
    return None


def initial(goal_id: str) -> GoalState:
    return GoalState(goal_id=goal_id)


def _private(fields: list[str], names: list[str], is_private: bool) -> list[str]:
    """Mark (or clear) the fields an event just set as private."""
    if not is_private and not fields:
        return fields  # the common case, without building a set: nothing private before or now
    current = set(fields)
    if is_private:
        current.update(names)
    else:
        current.difference_update(names)
    return sorted(current)


def _set(record: Any, payload: dict[str, Any], names: tuple[str, ...], is_private: bool) -> None:
    changed = [name for name in names if name in payload and payload[name] is not None]
    for name in changed:
        setattr(record, name, payload[name])
    record.private_fields = _private(record.private_fields, changed, is_private)


def evolve(state: GoalState, event: dict[str, Any]) -> GoalState:
    event_id = event["event_id"]
    sequence = event["append_sequence"]
    marks = envelope.body_digest(event)
    kind = event.get("event_type")
    if kind not in _APPLY:
        raise _unreadable(state, event, f"its event_type {kind!r} is not one of the fourteen this version knows")
    if event.get("goal_id") != state.goal_id:
        # One stream per goal: another goal's event here means two goal ids share a file
        # (ids differing only in case, on a case-insensitive file system) or a copied line.
        raise _unreadable(state, event, f"it belongs to goal {event.get('goal_id')!r} (goal ids that differ only in "
                          "case share one file on a case-insensitive file system; use one spelling)")
    at = eventids.find(state.event_ids, event_id)
    known = at[2]
    if known is not None:
        if known.same_body(marks) and known.same_time(event["recorded_at"]):
            return state  # the consumer rule: an identical duplicate is ignored
        raise LoopstateError(
            ErrorCode.EVENT_ID_CONFLICT,
            f"goal {state.goal_id!r}: event_id {event_id!r} at append_sequence {sequence} repeats the one at "
            f"{known.sequence} with a different body; the stream fails closed (run `loopstate verify`)",
            event_id=event_id, first_sequence=known.sequence, sequence=sequence,
        )
    checksum = "sha256:" + event["event_hash"] if event.get("event_hash") else None
    try:
        # Text of a private_pointer event is held to the public rules; only its pointer is private.
        _APPLY[kind](state, event, event["payload"], event.get("privacy") == LOCAL_PRIVATE)
    except (KeyError, TypeError, AttributeError, ValueError) as exc:
        # decide validated every event it wrote; a line that still fails here was written by
        # something else (a hand-sealed chain, an incompatible tool) and is not trusted.
        raise _unreadable(state, event, f"its payload does not fit {kind} ({type(exc).__name__}: {exc})") from None
    eventids.add(state.event_ids, at, sequence, marks, event["recorded_at"])
    _advance(state.store, event_id, sequence, checksum)
    if kind not in envelope.BOOKKEEPING:
        _advance(state.content, event_id, sequence, checksum)
    return state


def _unreadable(state: GoalState, event: dict[str, Any], why: str) -> LoopstateError:
    return LoopstateError(
        ErrorCode.CORRUPT_LEDGER,
        f"goal {state.goal_id!r}: the event at append_sequence {event.get('append_sequence')} cannot be replayed: "
        f"{why}; run `loopstate verify` and restore the stream from a backup or export",
        sequence=event.get("append_sequence"), event_type=str(event.get("event_type")),
    )


def _advance(head: Head, event_id: str, sequence: int, checksum: str | None) -> None:
    head.event_count += 1
    head.last_event_id = event_id
    head.last_append_sequence = sequence
    head.source_checksum = checksum


# One function per event type; decide has checked every rule before the append.


def _todo_added(state: GoalState, event: dict, p: dict, private: bool) -> None:
    refs = event.get("refs", {})
    source = refs.get("source")
    todo = Todo(
        todo_id=p["todo_id"], title=p["title"], role=p.get("role", "agent"), priority=p.get("priority", "P2"),
        status="open", added_sequence=event["append_sequence"], added_event_id=event["event_id"],
        planner_order=p.get("planner_order"), metadata=dict(p.get("metadata", {})),
        details=p.get("details"), pointer=p.get("pointer"),
        source=f"{source}#L{refs['source_line']}" if source and refs.get("source_line") else source,
    )
    if private:
        # A role other than the default was chosen in private, so it is private too.
        shown = ("title", "metadata", "details", "pointer", "source") + (("role",) if todo.role != "agent" else ())
        todo.private_fields = sorted(n for n in shown if getattr(todo, n))
    state.todos[todo.todo_id] = todo
    bisect.insort(state.order, (*board_key(todo), todo.todo_id))
    _count(state, "open", 1)


def _count(state: GoalState, status: str, change: int) -> None:
    left = state.status_counts.get(status, 0) + change
    if left:
        state.status_counts[status] = left
    else:
        state.status_counts.pop(status, None)


def _set_status(state: GoalState, todo: Todo, status: str) -> None:
    _count(state, todo.status, -1)
    _count(state, status, 1)
    todo.status = status


def _unorder(state: GoalState, todo: Todo) -> None:
    entry = (*board_key(todo), todo.todo_id)
    del state.order[bisect.bisect_left(state.order, entry)]


def _todo_claimed(state: GoalState, event: dict, p: dict, private: bool) -> None:
    todo = state.todos[p["todo_id"]]
    _set_status(state, todo, "claimed")
    todo.claimed_by = p["claimed_by"]
    todo.lease_expires_at = p.get("lease_expires_at")
    todo.blocker_reason, todo.gate_ids = None, []
    todo.resume_when, todo.resume_until = None, None
    todo.private_fields = _private(todo.private_fields, ["claimed_by"], private)


def _todo_updated(state: GoalState, event: dict, p: dict, private: bool) -> None:
    todo = state.todos[p["todo_id"]]
    _unorder(state, todo)
    _set(todo, p, ("title", "role", "priority", "planner_order", "details", "pointer"), private)
    bisect.insort(state.order, (*board_key(todo), todo.todo_id))
    if p.get("metadata") is not None:
        todo.metadata = {**todo.metadata, **p["metadata"]}
        todo.private_fields = _private(todo.private_fields, ["metadata"], private or "metadata" in todo.private_fields)


def _todo_blocked(state: GoalState, event: dict, p: dict, private: bool) -> None:
    todo = state.todos[p["todo_id"]]
    _set_status(state, todo, "blocked")
    todo.blocker_reason = p["reason"]
    todo.gate_ids = list(p.get("gate_ids", []))
    todo.private_fields = _private(todo.private_fields, ["blocker_reason"], private)


def _todo_deferred(state: GoalState, event: dict, p: dict, private: bool) -> None:
    todo = state.todos[p["todo_id"]]
    _set_status(state, todo, "deferred")
    todo.resume_when = p["resume_when"]
    todo.resume_until = p.get("until")
    todo.claimed_by, todo.lease_expires_at = None, None
    todo.private_fields = _private(todo.private_fields, ["resume_when"], private)


def _todo_completed(state: GoalState, event: dict, p: dict, private: bool) -> None:
    todo = state.todos[p["todo_id"]]
    _unorder(state, todo)
    _count(state, todo.status, -1)  # status_counts counts the todos in ``todos``
    todo.status = "completed"
    del state.todos[todo.todo_id]
    todo.rationale = p["rationale"]
    todo.validation_refs = list(p.get("validation_refs", []))
    todo.evidence_ids = sorted(set(todo.evidence_ids) | set(p.get("evidence_ids", [])))
    todo.completed_sequence = event["append_sequence"]
    todo.lease_expires_at = None
    todo.private_fields = _private(todo.private_fields, ["rationale", "validation_refs"], private)
    state.recent_done = [*state.recent_done[-(RECENT_DONE - 1):], todo]
    packed.append(state.done, archived(todo), todo.completed_sequence)
    packed.insert(state.done_ids, packed.tag_of(todo.todo_id))  # entry n is record n


def _gate_added(state: GoalState, event: dict, p: dict, private: bool) -> None:
    gate = Gate(
        gate_id=p["gate_id"], gate_kind=p["gate_kind"], title=p["title"], status="open",
        added_sequence=event["append_sequence"], added_event_id=event["event_id"], todo_id=p.get("todo_id"), run_id=p.get("run_id"),
        private_fields=["title"] if private else [],
    )
    state.gates[gate.gate_id] = gate
    state.pending_gates.append(gate.gate_id)


_GATE_STATUS = {"approve": "approved", "reject": "rejected", "defer": "deferred"}


def _gate_resolved(state: GoalState, event: dict, p: dict, private: bool) -> None:
    gate = state.gates[p["gate_id"]]
    gate.status = _GATE_STATUS[p["decision"]]
    gate.decision = p["decision"]
    gate.rationale = p.get("rationale")
    gate.resolved_by = p.get("resolved_by")
    gate.resolved_sequence = event["append_sequence"]
    gate.private_fields = _private(gate.private_fields, ["rationale", "resolved_by"], private)
    if gate.status in ("approved", "rejected"):
        if gate.gate_id in state.pending_gates:
            state.pending_gates.remove(gate.gate_id)
        state.resolved_order.append(gate.gate_id)


def _run_recorded(state: GoalState, event: dict, p: dict, private: bool) -> None:
    run = Run(
        run_id=p["run_id"], status=p["status"], recorded_at=event["recorded_at"],
        append_sequence=event["append_sequence"], classification=p.get("classification"),
        delivery_outcome=p.get("delivery_outcome"), todo_id=p.get("todo_id"), summary=p.get("summary"),
        pointer=p.get("pointer"), private_fields=["summary"] if private and p.get("summary") else [],
    )
    state.runs = [*state.runs[-(RECENT_LIMIT - 1):], run]
    state.run_count += 1
    state.run_ids[run.run_id] = state.run_ids.get(run.run_id, 0) + 1


def _refresh_recorded(state: GoalState, event: dict, p: dict, private: bool) -> None:
    refresh = Refresh(
        refresh_kind=p["refresh_kind"], summary=p["summary"], recorded_at=event["recorded_at"],
        append_sequence=event["append_sequence"], pointer=p.get("pointer"),
        private_fields=["summary"] if private else [],
    )
    state.refreshes = [*state.refreshes[-(RECENT_LIMIT - 1):], refresh]


def _quota_spent(state: GoalState, event: dict, p: dict, private: bool) -> None:
    category = p.get("category", "compute")
    key = f"{p['unit']}/{category}"
    line = state.quota.get(key) or Quota(unit=p["unit"], category=category)
    line.amount += float(p["amount"])
    line.entries += 1
    state.quota[key] = line


def _evidence_attached(state: GoalState, event: dict, p: dict, private: bool) -> None:
    evidence = Evidence(
        evidence_id=p["evidence_id"], target_kind=p["target_kind"], target_id=p["target_id"], ref=p["ref"],
        append_sequence=event["append_sequence"], added_event_id=event["event_id"],
        summary=p.get("summary"), pointer=p.get("pointer"),
        private_fields=[n for n in ("ref", "summary") if p.get(n)] if private else [],
    )
    state.evidence[evidence.evidence_id] = evidence
    if p["target_kind"] == "todo":
        # A completed todo keeps its evidence ids in full while it is in the completed tail;
        # its archive record (the compact view) shows none.
        todo = state.todos.get(p["target_id"]) or next(
            (t for t in state.recent_done if t.todo_id == p["target_id"]), None)
        if todo is not None:
            todo.evidence_ids = sorted({*todo.evidence_ids, evidence.evidence_id})


def _projection_rendered(state: GoalState, event: dict, p: dict, private: bool) -> None:
    state.last_render = Render(
        projection_kind=p["projection_kind"], target=p["target"], checksum=p["checksum"],
        rendered_through_sequence=p["rendered_through_sequence"], public=p.get("public", False),
        append_sequence=event["append_sequence"],
    )


def _snapshot_compacted(state: GoalState, event: dict, p: dict, private: bool) -> None:
    state.last_snapshot = Snapshot(
        through_append_sequence=p["through_append_sequence"], state_checksum=p["state_checksum"],
        append_sequence=event["append_sequence"],
    )


_APPLY = {
    "todo_added": _todo_added,
    "todo_claimed": _todo_claimed,
    "todo_updated": _todo_updated,
    "todo_blocked": _todo_blocked,
    "todo_deferred": _todo_deferred,
    "todo_completed": _todo_completed,
    "gate_added": _gate_added,
    "gate_resolved": _gate_resolved,
    "run_recorded": _run_recorded,
    "refresh_recorded": _refresh_recorded,
    "quota_spent": _quota_spent,
    "evidence_attached": _evidence_attached,
    "projection_rendered": _projection_rendered,
    "snapshot_compacted": _snapshot_compacted,
}
assert set(_APPLY) == set(envelope.EVENT_TYPES)


def state_bytes(state: GoalState) -> bytes:
    """The canonical encoding of a state (what snapshots store and checksums cover)."""
    from loopstate.core import canonical

    return canonical.encode(state)


def state_checksum(state: GoalState) -> str:
    from loopstate.core import canonical

    return "sha256:" + canonical.sha256_hex(state_bytes(state))
