"""The run state machine: the seed's transition table and its event-scoped exceptions.

The ordinary graph is necessary but not sufficient: each event type also has
its own payload, lease, authority and budget rules (in ``decide``). Two events
step outside the table, exactly as the seed allows: ``recovery_started`` may
take a recoverable run straight to active with a fresh lease, and
``kill_switch_detected`` may reduce any recoverable nonterminal run to
``halted_kill_switch`` without lease context. Terminal states stay terminal.
"""

from __future__ import annotations

from loopstate_protocol.errors import ErrorCode

from loopstate.core.errors import LoopstateError
from loopstate.domains.runs.records import STAGES

TRANSITIONS: dict[str, frozenset[str]] = {
    "draft": frozenset({"ready", "cancelled"}),
    "ready": frozenset({"active", "cancelled"}),
    "active": frozenset({
        "waiting_approval", "waiting_external", "blocked", "failed", "halted_kill_switch", "complete", "cancelled",
    }),
    "waiting_approval": frozenset({"ready", "cancelled"}),
    "waiting_external": frozenset({"ready", "cancelled"}),
    "blocked": frozenset({"ready", "cancelled"}),
    "failed": frozenset({"ready", "cancelled"}),
    "halted_kill_switch": frozenset({"ready", "cancelled"}),
    "complete": frozenset(),
    "cancelled": frozenset(),
}

TERMINAL = frozenset({"complete", "cancelled"})
# What kill_switch_detected may reduce, lease-independently.
KILLABLE = frozenset({"ready", "active", "waiting_approval", "waiting_external", "blocked", "failed"})
# What recovery_started may take straight to active with a fresh-generation lease.
RECOVERABLE = frozenset({"waiting_approval", "waiting_external", "blocked", "failed", "halted_kill_switch"})


def _article(word: str) -> str:
    return "an" if word[0] in "aeiou" else "a"


def allowed(current: str, target: str) -> bool:
    return target in TRANSITIONS[current]


def require_transition(current: str, target: str) -> None:
    """Refuse a move the table does not have, saying which moves it does have."""
    if not allowed(current, target):
        options = ", ".join(sorted(TRANSITIONS[current])) or "none (terminal)"
        stage = (f"; {target} is a stage, not a status: start it with runs.stage_start "
                 f"(`loopstate run stage start RUN {target}`)") if target in STAGES else ""
        raise LoopstateError(
            ErrorCode.INVALID_TRANSITION,
            f"{_article(current)} {current} run cannot become {target}; allowed next states: {options}{stage}",
            current=current, target=target,
        )
