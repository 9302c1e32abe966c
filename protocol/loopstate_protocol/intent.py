"""Commands, queries and results of the intent domain (the claims ledger).

A claim is one atomic statement of the user's intent (an outcome, a constraint,
a success signal, an unknown, a disagreement...) with its epistemic status and
minimal provenance. Commands carry only what the caller knows; the server
creates every claim, task, source and provenance id, redacts credentials and
refuses full prompts, transcript paths and tool payloads.

Field values are checked by the server (with VALIDATION_FAILED or
RULE_VIOLATION and a message naming the field), not by msgspec types alone, so
a refusal always says which rule was broken.
"""

from __future__ import annotations

from typing import Any, Literal, get_args

import msgspec

from loopstate_protocol.base import Command, Query

# The vocabulary of the claim table: the domain and every front door take it from here.
Actor = Literal["user", "agent", "evidence", "system"]
Mode = Literal["on", "off", "private"]
SourceKind = Literal["user_event", "agent_turn", "tool_result", "external_evidence", "explicit_import"]
EpistemicStatus = Literal["explicit", "inferred", "evidence", "unknown", "disputed"]
Scope = Literal["task", "project", "long_term"]
ACTORS: tuple[str, ...] = get_args(Actor)
MODES: tuple[str, ...] = get_args(Mode)
SOURCE_KINDS: tuple[str, ...] = get_args(SourceKind)
STATUSES: tuple[str, ...] = get_args(EpistemicStatus)
SCOPES: tuple[str, ...] = get_args(Scope)
# Facets travel as plain strings (``facets: list[str]``), so that the server's
# refusal of an unknown one can name the nearest facet rather than msgspec's enum error.
FACETS: tuple[str, ...] = (
    "outcome", "success_signal", "failure_signal", "hard_constraint", "soft_constraint",
    "tradeoff", "unknown", "result_feedback", "disagreement",
)


class SourceInput(msgspec.Struct, forbid_unknown_fields=True, kw_only=True, omit_defaults=True):
    """Where a claim came from, as the caller knows it.

    ``event_id`` is an opaque host or plugin event id; ``text`` is source text
    that is credential-redacted and hashed, never stored; ``excerpt`` is an
    optional redacted excerpt of at most 160 characters. ``via_hook`` marks a
    hook observation: then an event id is the sole identity and the excerpt is
    dropped unless ``keep_excerpt`` is set.
    """

    kind: SourceKind
    event_id: str | None = None
    text: str | None = None
    excerpt: str | None = None
    via_hook: bool = False
    keep_excerpt: bool = False


class ClaimInput(msgspec.Struct, forbid_unknown_fields=True, kw_only=True, omit_defaults=True):
    """One atomic claim as submitted; the server adds its id and source reference."""

    statement: str
    role: Actor
    epistemic_status: EpistemicStatus
    facets: list[str]
    scope: Scope = "task"
    confidence: float | None = None
    valid_from: str | None = None
    last_confirmed: str | None = None


# --- commands ----------------------------------------------------------------


class IntentTaskStart(Command, tag="intent.task_start"):
    """Start a task, optionally with up to 12 initial claims (one locked mutation).

    Without ``task_id`` the server derives a UUIDv5-shaped id from the project
    and the request id, so an exact retry names the same task. ``private``
    needs ``host_session_id`` and keeps every semantic event in memory.
    """

    task_id: str | None = None
    label: str | None = None
    mode: Mode = "on"
    actor: Actor = "user"
    source: SourceInput | None = None
    initial_claims: list[ClaimInput] = []
    host_session_id: str | None = None


class IntentTaskResume(Command, tag="intent.task_resume"):
    """Make an existing task the project's current task (the one new host sessions bind to).

    Resuming the task that is already current writes nothing. ``intent.task_start``
    makes the task it starts current itself.
    """

    task_id: str
    actor: Actor = "user"


class IntentModeSet(Command, tag="intent.mode_set"):
    """Switch a task between on, off and private (private needs the host session)."""

    task_id: str
    mode: Mode
    actor: Actor = "user"
    host_session_id: str | None = None


class IntentSourceObserve(Command, tag="intent.source_observe"):
    """Record that a source was observed (by id or redacted hash only)."""

    task_id: str
    source: SourceInput
    actor: Actor = "agent"


class IntentClaimAdd(Command, tag="intent.claim_add"):
    """Add one claim to a task."""

    task_id: str
    claim: ClaimInput
    actor: Actor = "user"
    source: SourceInput | None = None


class IntentClaimReplace(Command, tag="intent.claim_replace"):
    """Add a claim that supersedes ``supersedes`` in one locked mutation."""

    task_id: str
    supersedes: list[str]
    claim: ClaimInput
    actor: Actor = "user"
    source: SourceInput | None = None


class IntentClaimInvalidate(Command, tag="intent.claim_invalidate"):
    """Make a claim inactive; it stays in the audit view."""

    task_id: str
    claim_id: str
    reason: str | None = None
    actor: Actor = "user"
    source: SourceInput | None = None


class IntentClaimConfirm(Command, tag="intent.claim_confirm"):
    """A direct user review of a claim: re-issued with ``last_confirmed`` set to now."""

    task_id: str
    claim_id: str
    actor: Actor = "user"
    source: SourceInput | None = None


class IntentCandidateAdd(Command, tag="intent.candidate_add"):
    """A repeated signal that may become a long-term claim once seen in 3 tasks and confirmed."""

    task_id: str
    statement: str
    facets: list[str]
    actor: Actor = "agent"
    source: SourceInput | None = None


class IntentCandidatePromote(Command, tag="intent.candidate_promote"):
    """The user's confirmation of a candidate signal; ``confirmation`` must be ``explicit``.

    ``acceptance``, ``silence`` and ``single_choice`` are named so that a
    harness can send what it saw and get a clear refusal: none of them confirms.
    """

    task_id: str
    signal_key: str
    confirmation: Literal["explicit", "acceptance", "silence", "single_choice"]
    confidence: float
    actor: Actor = "user"
    source: SourceInput | None = None


class IntentCompactionObserve(Command, tag="intent.compaction_observe"):
    """The host compacted its context (recorded so a handoff can be audited)."""

    task_id: str
    trigger: Literal["manual", "auto"] = "auto"
    host_event_id: str | None = None
    actor: Actor = "system"


class IntentResultSignal(Command, tag="intent.result_signal"):
    """A success/failure/feedback signal about the work's result; its note is evidence."""

    task_id: str
    signal: Literal["success", "failure", "feedback"]
    note: str | None = None
    actor: Actor = "evidence"
    source: SourceInput | None = None


class IntentImport(Command, tag="intent.import"):
    """Import an exported graph: validated, fresh ids, ``explicit_import`` provenance."""

    graph: dict[str, Any]
    actor: Actor = "user"


class IntentPurge(Command, tag="intent.purge"):
    """User-confirmed physical deletion of one claim or one task (re-chains the stream)."""

    target: Literal["claim", "task"]
    id: str
    confirm: bool = False
    actor: Actor = "user"


class IntentPrivateRecover(Command, tag="intent.private_recover"):
    """After a restart: resume an empty private task, make it durable (on/off), or delete it."""

    host_session_id: str
    action: Literal["resume", "durable_on", "durable_off", "delete"]
    actor: Actor = "user"


# --- queries -------------------------------------------------------------------


SNAPSHOT_PAGE = 100


class IntentSnapshot(Query, tag="intent.snapshot"):
    """The current view of one task (of the whole project without ``task_id``), a page of active claims at a time.

    ``limit`` (1-1000) active claims per page, in the view's handoff order;
    ``cursor`` is the ``next_cursor`` of the page before (none: the first page).
    The result counts the active claims after the page.
    """

    task_id: str | None = None
    limit: int = SNAPSHOT_PAGE
    cursor: str | None = None


AUDIT_PAGE = 200


class IntentAudit(Query, tag="intent.audit"):
    """Claims with their lifecycle and supersession edges, in ledger order, a page at a time.

    ``limit`` (1-1000) claims per page; ``cursor`` is the ``next_cursor`` of the
    page before (none: the first page). The result counts the claims after the page.
    """

    task_id: str | None = None
    limit: int = AUDIT_PAGE
    cursor: str | None = None


class IntentCompact(Query, tag="intent.compact"):
    """The manual compact handoff, capped by record count and characters."""

    task_id: str
    max_records: int = 24
    max_chars: int = 4000


class IntentHookContext(Query, tag="intent.hook_context"):
    """What a hook may inject: direct user-explicit claims as text, the rest as counts."""

    task_id: str
    max_chars: int = 2000


class IntentTasks(Query, tag="intent.tasks"):
    """The project's durable tasks; with ``task_id``, only that task (an empty list when the project has
    no such task): what a hook asks on each prompt, whatever the number of tasks."""

    task_id: str | None = None


class IntentCurrent(Query, tag="intent.current"):
    """The project's current task: the task last started or resumed, from any front door."""


class IntentCandidates(Query, tag="intent.candidates"):
    """Candidate signals grouped by signal key, with their distinct task counts."""


class IntentExport(Query, tag="intent.export"):
    """The project's claim graph (or one task's) in the import format."""

    task_id: str | None = None


# --- results ----------------------------------------------------------------------


class SourceRef(msgspec.Struct, kw_only=True, omit_defaults=True):
    kind: str
    event_id: str | None = None
    sha256: str | None = None
    excerpt: str | None = None


class ClaimView(msgspec.Struct, kw_only=True, omit_defaults=True):
    claim_id: str
    task_id: str
    statement: str
    role: str
    epistemic_status: str
    scope: str
    facets: list[str]
    valid_from: str
    last_confirmed: str | None = None
    confidence: float | None = None
    supersedes: list[str] = []
    source_ref: SourceRef | None = None
    direct_user: bool = False
    state: str = "active"
    superseded_by: str | None = None
    invalidated_at: str | None = None
    invalidation_reason: str | None = None
    stale: bool = False
    imported: bool = False


class TaskView(msgspec.Struct, kw_only=True, omit_defaults=True):
    task_id: str
    mode: str
    started_at: str
    label: str | None = None
    history_incomplete: bool = False
    active_claims: int = 0
    current: bool = False  # the project's current task (intent.current)


class CurrentTask(msgspec.Struct, kw_only=True):
    """The project's current task. ``task_id`` is null when the project has no task a session could bind to;
    ``reason`` says how it became current: ``started``, ``resumed``, ``migrated`` (picked once from a store
    written before tasks were current: the newest task with direct user claims), or ``pending_migration``
    (that pick, computed on read: the next write records it); ``sequence`` is the event that made it current
    (0 when pending)."""

    task_id: str | None
    reason: str | None
    sequence: int
    task: TaskView | None = None


class Disagreement(msgspec.Struct, kw_only=True):
    claim_id: str
    statement: str
    epistemic_status: str


class StaleWarning(msgspec.Struct, kw_only=True):
    claim_id: str
    statement: str
    last_confirmed: str | None
    days_unconfirmed: int


class CurrentView(msgspec.Struct, kw_only=True):
    """One page of the active claims by facet and status, with their unknowns and sources; every open
    disagreement and stale warning of the view (whatever page its claim is on); ``active_count`` active
    claims in all, ``remaining`` after this page and the cursor of the next page (null on the last)."""

    project_id: str
    task_id: str | None
    sequence: int
    tasks: list[TaskView]
    current_task_id: str | None
    by_facet: dict[str, dict[str, list[ClaimView]]]
    disagreements: list[Disagreement]
    unknowns: list[ClaimView]
    sources: list[SourceRef]
    stale: list[StaleWarning]
    active_count: int
    remaining: int
    next_cursor: str | None


class Edge(msgspec.Struct, kw_only=True):
    new: str
    old: str
    relation: str = "supersedes"


class AuditView(msgspec.Struct, kw_only=True):
    """One page of the audit: ``claims`` in ledger order, the ``edges`` that touch them,
    ``total`` claims in the audit, ``remaining`` after this page and the cursor of the next
    page (null on the last)."""

    project_id: str
    task_id: str | None
    sequence: int
    claims: list[ClaimView]
    edges: list[Edge]
    total: int
    remaining: int
    next_cursor: str | None


class CompactItem(msgspec.Struct, kw_only=True, omit_defaults=True):
    claim_id: str
    facet: str
    epistemic_status: str
    statement: str
    direct_user: bool = False


class CompactView(msgspec.Struct, kw_only=True):
    task_id: str
    items: list[CompactItem]
    omitted: dict[str, int]
    chars: int
    open_disputes: int


class HookContext(msgspec.Struct, kw_only=True):
    task_id: str
    text: str
    claim_ids: list[str]
    omitted: dict[str, int]
    open_disputes: int


class CandidateGroup(msgspec.Struct, kw_only=True):
    signal_key: str
    statement: str
    facets: list[str]
    task_ids: list[str]
    distinct_tasks: int
    promotable: bool
    promoted: bool


COMMANDS = (
    IntentTaskStart,
    IntentTaskResume,
    IntentModeSet,
    IntentSourceObserve,
    IntentClaimAdd,
    IntentClaimReplace,
    IntentClaimInvalidate,
    IntentClaimConfirm,
    IntentCandidateAdd,
    IntentCandidatePromote,
    IntentCompactionObserve,
    IntentResultSignal,
    IntentImport,
    IntentPurge,
    IntentPrivateRecover,
)
QUERIES = (
    IntentSnapshot,
    IntentAudit,
    IntentCompact,
    IntentHookContext,
    IntentTasks,
    IntentCurrent,
    IntentCandidates,
    IntentExport,
)
