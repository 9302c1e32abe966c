"""The run state machine: the transition table and its event-scoped exceptions.

Stages have a rule of their own (``require_stage_free``): one stage is open at
a time; another starts only once the open one is completed.

The ordinary graph is necessary but not sufficient: each event type also has
its own payload, lease, authority and budget rules (in ``decide``). Two events
step outside the table, and only these two: ``recovery_started`` may
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


def require_stage_free(run_id: str, open_stage: str | None, open_sequence: int | None, stage: str) -> None:
    """Refuse to start ``stage`` while another stage of the run is open (started, not completed).

    Starting the open stage again is a retry (it uses another attempt) and is allowed. Streams
    written before this rule may hold overlapping starts; they still fold (the later start is
    the open one), and only new starts are checked.
    """
    if open_stage is None or open_stage == stage:
        return
    where = f" (started at event {open_sequence})" if open_sequence is not None else ""
    raise LoopstateError(
        ErrorCode.INVALID_TRANSITION,
        f"run {run_id} has stage {open_stage} open{where}; one stage is open at a time: complete it first "
        f"(`loopstate run stage complete {run_id} {open_stage} --outcome passed|failed|blocked`), then start "
        f"{stage}; starting {open_stage} again retries it",
        open_stage=open_stage, stage=stage,
    )
