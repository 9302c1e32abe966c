"""Commands, queries and results of the goals domain (todos and gates).

Each goal is one ordered event stream (``goals.<goal_id>``). Every command
below appends events of the fourteen goal event types; the queries read the
projections of a goal (the board, the Markdown workbench, the bridge
to a Markdown file). The field constraints here are checked when a message is
decoded from the wire; the server checks them again on every path, so a
command built in Python is held to the same rules.
"""

from __future__ import annotations

from typing import Annotated, Any, Literal

import msgspec

from loopstate_protocol.base import Command, Query

# Shapes ---------------------------------------------------------------------------

GoalId = Annotated[str, msgspec.Meta(pattern=r"^[A-Za-z0-9][A-Za-z0-9_-]{0,79}$",
                                     description="letters, digits, '_' and '-', 1-80 chars, starting alphanumeric")]
RefId = Annotated[str, msgspec.Meta(pattern=r"^[A-Za-z0-9][A-Za-z0-9._:-]{0,79}$",
                                    description="a stable id: letters, digits, '.', '_', ':' and '-', 1-80 chars")]
Label = Annotated[str, msgspec.Meta(pattern=r"^[A-Za-z][A-Za-z0-9._-]{0,63}$",
                                    description="a compact label: a letter, then letters, digits, '.', '_' or '-'")]
Line = Annotated[str, msgspec.Meta(min_length=1, max_length=300, pattern=r"^[^\x00-\x1f\x7f]+$",
                                   description="one line of compact text (no newlines or control characters)")]
Body = Annotated[str, msgspec.Meta(min_length=1, max_length=20000,
                                   description="private detail text; only in local_private events")]
Pointer = Annotated[str, msgspec.Meta(min_length=1, max_length=500, pattern=r"^[^\x00-\x1f\x7f]+$",
                                      description="a compact pointer to private material (never the material)")]
EventId = Annotated[str, msgspec.Meta(pattern=r"^[A-Za-z0-9][A-Za-z0-9._:-]{0,127}$")]
Timestamp = Annotated[str, msgspec.Meta(min_length=1, max_length=64,
                                        description="RFC 3339 / ISO-8601 with a UTC offset")]
Priority = Literal["P0", "P1", "P2", "P3", "P4"]
Privacy = Literal["public_safe", "local_private", "private_pointer"]
GateKind = Literal["user", "owner", "operator", "controller"]
Decision = Literal["approve", "reject", "defer"]
TargetKind = Literal["todo", "gate", "run"]
RefreshKind = Literal["state_only", "progress"]
RelPath = Annotated[str, msgspec.Meta(pattern=r"^(?!/)(?!.*(^|/)\.\.(/|$))[A-Za-z0-9._/-]{1,200}$",
                                      description="a path relative to the project root, without '..'")]


class GoalCommand(Command, kw_only=True):
    """Envelope choices every goals command may make.

    ``event_id`` makes an append idempotent across request ids (the rule:
    the same id with the same body is a no-op, a different body is refused);
    when absent it is derived from the request id. ``recorded_at`` is the
    producer's timestamp (defaults to the server's clock). A goal starts with
    its first event; ``new_goal`` confirms that a goal id one edit away from an
    existing goal's (a likely typo) really names a new goal: without it such a
    first command is refused with CONFLICT. It is a confirmation, not content:
    it is not part of the request fingerprint.
    """

    goal_id: GoalId
    event_id: EventId | None = None
    recorded_at: Timestamp | None = None
    producer: Label | None = None
    privacy: Privacy = "public_safe"
    refs: dict[str, str] = {}
    new_goal: bool = False


# Commands (one per event type, plus render, backfill and compact) -------------------------


class AddTodo(GoalCommand, tag="goals.add"):
    title: Line
    todo_id: RefId | None = None
    role: Label = "agent"
    priority: Priority = "P2"
    planner_order: Annotated[int, msgspec.Meta(ge=0)] | None = None
    metadata: dict[str, str] = {}
    details: Body | None = None
    pointer: Pointer | None = None


class ClaimTodo(GoalCommand, tag="goals.claim"):
    todo_id: RefId
    claimed_by: Label
    lease_seconds: Annotated[int, msgspec.Meta(gt=0, le=30 * 86400)] | None = None
    note: Line | None = None


class UpdateTodo(GoalCommand, tag="goals.update"):
    todo_id: RefId
    title: Line | None = None
    role: Label | None = None
    priority: Priority | None = None
    planner_order: Annotated[int, msgspec.Meta(ge=0)] | None = None
    metadata: dict[str, str] | None = None
    details: Body | None = None
    pointer: Pointer | None = None


class BlockTodo(GoalCommand, tag="goals.block"):
    todo_id: RefId
    reason: Line
    gate_ids: list[RefId] = []


class DeferTodo(GoalCommand, tag="goals.defer"):
    todo_id: RefId
    resume_when: Line
    until: Timestamp | None = None


class CompleteTodo(GoalCommand, tag="goals.complete"):
    todo_id: RefId
    rationale: Line
    validation_refs: list[Line] = []
    evidence_ids: list[RefId] = []


class AddGate(GoalCommand, tag="goals.gate"):
    title: Line
    gate_kind: GateKind = "user"
    gate_id: RefId | None = None
    todo_id: RefId | None = None
    run_id: RefId | None = None


class ResolveGate(GoalCommand, tag="goals.resolve"):
    gate_id: RefId
    decision: Decision
    rationale: Line | None = None
    resolved_by: Label | None = None


class RecordRun(GoalCommand, tag="goals.run"):
    run_id: RefId
    status: Label
    classification: Label | None = None
    delivery_outcome: Label | None = None
    todo_id: RefId | None = None
    summary: Line | None = None
    pointer: Pointer | None = None


class RecordRefresh(GoalCommand, tag="goals.refresh"):
    summary: Line
    refresh_kind: RefreshKind = "progress"
    pointer: Pointer | None = None


class SpendQuota(GoalCommand, tag="goals.quota"):
    amount: Annotated[float, msgspec.Meta(ge=0)]
    unit: Label
    category: Label = "compute"
    quota_id: RefId | None = None
    run_id: RefId | None = None
    todo_id: RefId | None = None


class AttachEvidence(GoalCommand, tag="goals.evidence"):
    target_kind: TargetKind
    target_id: RefId
    ref: Line
    evidence_id: RefId | None = None
    summary: Line | None = None
    pointer: Pointer | None = None


LifecycleEventType = Literal[
    "todo_added", "todo_claimed", "todo_updated", "todo_blocked", "todo_deferred", "todo_completed", "gate_added",
    "gate_resolved", "run_recorded", "refresh_recorded", "quota_spent", "evidence_attached",
]


class AppendEvent(GoalCommand, tag="goals.append"):
    """Append one lifecycle event in its raw shape (``event_type`` and ``payload``),
    as another producer of LoopX-compatible goal events writes it (dual-write). The payload is validated against its
    type and the same rules as the typed commands apply; ids are not assigned here (a
    ``todo_added`` names its ``todo_id``), and ``todo_claimed`` carries ``lease_expires_at``.
    The bookkeeping events are written only by ``goals.render`` and ``goals.compact``."""

    event_type: LifecycleEventType
    payload: dict[str, Any]


class RenderMarkdown(GoalCommand, tag="goals.render"):
    """Record a Markdown projection and (through the service) write it after the event."""

    target: RelPath = "ACTIVE_GOAL_STATE.md"
    public: bool = False
    force: bool = False


class Backfill(GoalCommand, tag="goals.backfill"):
    """Import todos and gates from ACTIVE_GOAL_STATE.md-style Markdown as events."""

    markdown: Annotated[str, msgspec.Meta(max_length=2_000_000)]
    source_label: Line = "ACTIVE_GOAL_STATE.md"


class Compact(GoalCommand, tag="goals.compact"):
    """Declare a snapshot checkpoint of the goal's projection (the lineage stays)."""


COMMANDS = (
    AddTodo, ClaimTodo, UpdateTodo, BlockTodo, DeferTodo, CompleteTodo, AddGate, ResolveGate,
    RecordRun, RecordRefresh, SpendQuota, AttachEvidence, AppendEvent, RenderMarkdown, Backfill, Compact,
)


# Queries -----------------------------------------------------------------------------------


BOARD_LIMIT = 100  # todos on a board page unless the caller asks for another number
MAX_BOARD_LIMIT = 5000
BoardCursor = Annotated[str, msgspec.Meta(min_length=1, max_length=120,
                                          description="a board page's next_cursor, as given")]


class GetBoard(Query, tag="goals.board"):
    """One page of the board. Its todos are in one order: the active ones (priority,
    planner order, append order), then the completed ones, newest first. A page lists
    up to ``limit`` of them after ``cursor`` (a previous page's ``page.next_cursor``);
    the first page (no cursor) lists the active todos and at most the ten newest
    completed ones. ``limit: null`` asks for the whole board in one answer (what the
    Markdown workbench renders). Gates, runs, refreshes and evidence are the same on
    every page: the pending gates, and the latest of the rest with their totals."""

    goal_id: GoalId
    public: bool = False
    limit: Annotated[int, msgspec.Meta(ge=1, le=MAX_BOARD_LIMIT)] | None = BOARD_LIMIT
    cursor: BoardCursor | None = None


class PreviewMarkdown(Query, tag="goals.markdown"):
    """The Markdown projection as text, without writing or recording it."""

    goal_id: GoalId
    public: bool = False


class CheckMarkdown(Query, tag="goals.check"):
    """Is this Markdown text the current projection, stale, or hand-edited?"""

    goal_id: GoalId
    markdown: Annotated[str, msgspec.Meta(max_length=2_000_000)]


class BridgeMarkdown(Query, tag="goals.bridge"):
    """Every difference between the event projection and a Markdown file's parse."""

    goal_id: GoalId
    markdown: Annotated[str, msgspec.Meta(max_length=2_000_000)]
    public: bool = False


QUERIES = (GetBoard, PreviewMarkdown, CheckMarkdown, BridgeMarkdown)


# Results -------------------------------------------------------------------------------------


class ProjectionMeta(msgspec.Struct, kw_only=True):
    """The projection metadata. Heads count lifecycle events only:
    ``projection_rendered`` and ``snapshot_compacted`` describe projections and
    are not their sources; ``store_sequence`` is the stream's full head."""

    schema_version: str
    goal_id: str
    generated_at: str
    source_event_count: int
    last_event_id: str | None
    last_append_sequence: int
    projection_version: str
    source_checksum: str | None
    privacy: Privacy
    store_sequence: int = 0


class TodoView(msgspec.Struct, kw_only=True, omit_defaults=True):
    todo_id: str
    title: str
    role: str
    priority: str
    status: str
    append_sequence: int
    planner_order: int | None = None
    claimed_by: str | None = None
    lease_expires_at: str | None = None
    blocker_reason: str | None = None
    gate_ids: list[str] = []
    open_gate_ids: list[str] = []
    resume_when: str | None = None
    resume_until: str | None = None
    rationale: str | None = None
    validation_refs: list[str] = []
    evidence_ids: list[str] = []
    metadata: dict[str, str] = {}
    details: str | None = None
    pointer: str | None = None
    source: str | None = None


class RoleGroup(msgspec.Struct, kw_only=True):
    role: str
    todos: list[TodoView]


class GateView(msgspec.Struct, kw_only=True, omit_defaults=True):
    gate_id: str
    gate_kind: str
    title: str
    status: str
    append_sequence: int
    todo_id: str | None = None
    run_id: str | None = None
    decision: str | None = None
    rationale: str | None = None
    resolved_by: str | None = None


class RunView(msgspec.Struct, kw_only=True, omit_defaults=True):
    run_id: str
    status: str
    recorded_at: str
    append_sequence: int
    classification: str | None = None
    delivery_outcome: str | None = None
    todo_id: str | None = None
    summary: str | None = None


class RefreshView(msgspec.Struct, kw_only=True, omit_defaults=True):
    refresh_kind: str
    summary: str
    recorded_at: str
    append_sequence: int


class QuotaLine(msgspec.Struct, kw_only=True):
    unit: str
    category: str
    amount: float
    entries: int


class EvidenceView(msgspec.Struct, kw_only=True, omit_defaults=True):
    evidence_id: str
    target_kind: str
    target_id: str
    ref: str
    append_sequence: int
    summary: str | None = None


class RenderView(msgspec.Struct, kw_only=True):
    projection_kind: str
    target: str
    checksum: str
    rendered_through_sequence: int
    public: bool
    append_sequence: int


class BoardPage(msgspec.Struct, kw_only=True):
    """Where a board page sits in the goal's todos, and the counts of what it leaves out.

    ``before`` todos come before this page in the board order (earlier pages),
    ``after`` after it: ``next_cursor`` continues there (null: nothing is left).
    A cursor stays valid across appends: the next page starts after the todo it
    names, in the order as it is then (a todo that changed place meanwhile may be
    on neither page or on both; the counts are always of the current state)."""

    limit: int | None
    cursor: str | None
    next_cursor: str | None
    before: int
    after: int
    active_total: int
    completed_total: int
    status_counts: dict[str, int]  # every todo of the goal, by status
    resolved_gates_total: int
    evidence_total: int


class Board(msgspec.Struct, kw_only=True):
    """The goal's event projection: what the Markdown workbench and dashboards show.

    One page of it (``page``): ``completed`` holds the page's todos among the ten
    newest completed, in full; ``archive_candidates`` the older completed ones, in
    their compact form (id, title, role, priority, status). ``resolved_gates`` and
    ``evidence`` hold the latest ten unless the whole board was asked for."""

    meta: ProjectionMeta
    active: list[RoleGroup]
    completed: list[TodoView]
    archive_candidates: list[TodoView]
    user_inbox: list[GateView]
    controller_inbox: list[GateView]
    resolved_gates: list[GateView]
    runs: list[RunView]
    run_count: int
    refreshes: list[RefreshView]
    quota: list[QuotaLine]
    evidence: list[EvidenceView]
    omissions: list[str]
    page: BoardPage
    last_render: RenderView | None = None


class MarkdownText(msgspec.Struct, kw_only=True):
    meta: ProjectionMeta
    text: str
    checksum: str


class MarkdownStatus(msgspec.Struct, kw_only=True):
    """``current``: matches the store; ``stale``: the store moved on; ``edited``:
    the text was changed by hand (edits are not state changes); ``foreign``: not a
    loopstate projection of this goal."""

    status: Literal["current", "stale", "edited", "foreign"]
    message: str
    file_sequence: int | None
    store_sequence: int
    events_since: int | None


class Difference(msgspec.Struct, kw_only=True, omit_defaults=True):
    kind: Literal["missing_in_markdown", "missing_in_events", "field_differs", "duplicate_in_markdown", "unparsed_line"]
    subject: str
    field: str | None = None
    events_value: str | None = None
    markdown_value: str | None = None
    line: int | None = None


class BridgeReport(msgspec.Struct, kw_only=True):
    """The migration bridge (``event_store_migration_bridge_v0``): the event
    projection compared with a Markdown file's parse, every difference listed."""

    schema_version: Literal["event_store_migration_bridge_v0"] = "event_store_migration_bridge_v0"
    goal_id: str
    clean: bool
    differences: list[Difference]
    events_todos: int
    markdown_todos: int
    events_gates: int
    markdown_gates: int
    markdown_sequence: int | None
    store_sequence: int
