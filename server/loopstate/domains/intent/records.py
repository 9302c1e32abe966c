"""The intent domain's vocabulary and its folded state.

The vocabulary is seed 000's claim table (roles, epistemic statuses, scopes,
facets, source kinds), defined once in the protocol package and re-exported here
beside the rules that use it. The state is what ``evolve`` folds from the verified
ledger: tasks, claims with their lifecycle, candidates and supersession edges.
It is never written anywhere: the ledger is the only authority.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from loopstate_protocol.intent import ACTORS as ROLES
from loopstate_protocol.intent import FACETS, SCOPES, SOURCE_KINDS, STATUSES

SCHEMA_VERSION = 1
STREAM = "intent"

EVENT_TYPES = (
    "task_started", "mode_set", "source_observed", "candidate_added", "claim_added", "claim_replaced",
    "claim_invalidated", "graph_imported", "compaction_observed", "result_signal_observed",
)

# Which epistemic statuses each role may carry. explicit records what the user
# said, so only the user's role has it; a tool result (role evidence) is only
# ever evidence.
LEGAL_STATUSES = {
    "user": ("explicit", "unknown", "disputed"),
    "agent": ("inferred", "evidence", "unknown", "disputed"),
    "evidence": ("evidence",),
    "system": ("inferred", "evidence", "unknown"),
}

# Which source kinds each actor may cite for its own claims.
ACTOR_SOURCES = {
    "user": ("user_event",),
    "agent": ("agent_turn",),
    "evidence": ("tool_result", "external_evidence"),
    "system": ("agent_turn", "tool_result", "external_evidence"),
}

MAX_INITIAL_CLAIMS = 12
MAX_STATEMENT = 500
MAX_EXCERPT = 160
MAX_LABEL = 200
STALE_DAYS = 90
PROMOTION_TASKS = 3


@dataclass
class Task:
    task_id: str
    project_id: str
    mode: str
    started_at: str
    label: str | None = None
    history_incomplete: bool = False
    sequence: int = 0


@dataclass
class Claim:
    """One claim and its lifecycle, as folded from the ledger."""

    claim_id: str
    task_id: str
    statement: str
    role: str
    epistemic_status: str
    scope: str
    facets: list[str]
    valid_from: str
    last_confirmed: str | None
    confidence: float | None
    supersedes: list[str]
    source_ref: dict[str, Any]
    direct_user: bool
    added_sequence: int
    state: str = "active"  # active | superseded | invalidated
    superseded_by: str | None = None
    invalidated_at: str | None = None
    invalidation_reason: str | None = None
    imported: bool = False

    @property
    def active(self) -> bool:
        return self.state == "active"

    @property
    def user_explicit(self) -> bool:
        return self.role == "user" and self.epistemic_status == "explicit"


@dataclass
class Candidate:
    candidate_id: str
    task_id: str
    signal_key: str
    statement: str
    facets: list[str]
    source_ref: dict[str, Any]
    promoted: bool = False


@dataclass
class IntentState:
    """Everything folded from one project's intent ledger.

    ``private`` is not folded from the ledger: it is the serving process's
    in-memory store of private tasks, attached by the service's intent effects
    (see service/intent_effects.py) and never written to disk. Likewise
    ``private_controls`` / ``controls_unreadable`` mirror the control files, so
    that the hook context of a task private in another process injects nothing.
    """

    sequence: int = 0
    head: str | None = None
    tasks: dict[str, Task] = field(default_factory=dict)
    claims: dict[str, Claim] = field(default_factory=dict)
    candidates: dict[str, Candidate] = field(default_factory=dict)
    edges: list[tuple[str, str]] = field(default_factory=list)  # (new, old)
    project_ids: set[str] = field(default_factory=set)  # every project id the ledger's tasks were recorded under
    private: Any = None
    # Task ids that have a private-session control beside the ledger, and whether
    # a control could not be read; attached by the service's effects on each read.
    private_controls: frozenset[str] = frozenset()
    controls_unreadable: bool = False

