"""The intent domain's vocabulary and the records its folded state is made of.

The vocabulary is the claim table (roles, epistemic statuses, scopes,
facets, source kinds; intent-loop's, for compatibility), defined once in the protocol package
(``loopstate_protocol.intent``), where the rules import it from. The records (tasks, claims with their lifecycle,
candidates) are what ``evolve`` folds from the verified ledger into the indexed
state (state.py). None of it is authoritative: the ledger is the only authority.
"""

from __future__ import annotations

from typing import Any

import msgspec

SCHEMA_VERSION = 1
STREAM = "intent"

COMPAT_EVENT_TYPES = (
    "task_started", "mode_set", "source_observed", "candidate_added", "claim_added", "claim_replaced",
    "claim_invalidated", "graph_imported", "compaction_observed", "result_signal_observed",
)
# loopstate's own event type beside the ten compatible ones: which task is the project's current one (the task a new
# host session binds to), so that every front door, and the audit log, agree on it.
CURRENT_TASK_SET = "current_task_set"
EVENT_TYPES = (*COMPAT_EVENT_TYPES, CURRENT_TASK_SET)
# How a task became current: started or resumed by a front door, or picked once from a store written
# before tasks were current (the newest task with the user's own claims).
CURRENT_REASONS = ("started", "resumed", "migrated")

# Which epistemic statuses each role may carry. explicit records what the user
# said, so only the user's role has it; a tool result (role evidence) is only
# ever evidence.
LEGAL_STATUSES = {
    "user": ("explicit", "unknown", "disputed"),
    "agent": ("inferred", "evidence", "unknown", "disputed"),
    "evidence": ("evidence",),
    "system": ("inferred", "evidence", "unknown"),
}

MAX_INITIAL_CLAIMS = 12
MAX_STATEMENT = 500
MAX_EXCERPT = 160
MAX_LABEL = 200
STALE_DAYS = 90
PROMOTION_TASKS = 3


class Task(msgspec.Struct, kw_only=True, array_like=True, gc=False):
    task_id: str
    project_id: str
    mode: str
    started_at: str
    label: str | None = None
    history_incomplete: bool = False
    sequence: int = 0


class Claim(msgspec.Struct, kw_only=True, array_like=True, gc=False):
    """One claim and its lifecycle, as folded from the ledger.

    A msgspec Struct rather than a dataclass: a project holds one per claim it
    ever recorded, and a Struct is half the size of a dataclass and its dict,
    encodes to a projection snapshot as a plain array and is skipped by the
    garbage collector (it holds no reference cycle). ``added_sequence`` and
    ``added_index`` (the claim's place in the event that added it) are the
    claim's position in the ledger: audit views are ordered, and paged, by it.
    """

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
    added_index: int = 0
    state: str = "active"  # active | superseded | invalidated
    superseded_by: str | None = None
    invalidated_at: str | None = None
    invalidation_reason: str | None = None
    imported: bool = False
    # Where the record that added the claim starts in the stream (offset, event_hash), so that retiring
    # it keeps that place instead of the claim (retired.py); None for a claim folded from memory.
    place: tuple[int, str] | None = None

    @property
    def active(self) -> bool:
        return self.state == "active"

    @property
    def project_wide(self) -> bool:
        """Shown in every task's view of the project (not only its own task's)."""
        return self.scope != "task"

    @property
    def position(self) -> tuple[int, int]:
        return (self.added_sequence, self.added_index)

    @property
    def user_explicit(self) -> bool:
        return self.role == "user" and self.epistemic_status == "explicit"


class Candidate(msgspec.Struct, kw_only=True, array_like=True, gc=False):
    candidate_id: str
    task_id: str
    signal_key: str
    statement: str
    facets: list[str]
    source_ref: dict[str, Any]
    promoted: bool = False
