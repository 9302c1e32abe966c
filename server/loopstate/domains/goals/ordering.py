"""The two orders of a goal: how events replay, and how todos are shown.

Replay: ``append_sequence``, then ``recorded_at`` (compared as instants, so
``+02:00`` and ``Z`` forms sort correctly), then ``event_id`` as the final
deterministic tie-breaker. Within one stream the sequence alone decides; the
other keys matter when events from several sources (an export, a merge of
backfilled files) are replayed together.

Projection: priority (P0 first), then ``planner_order`` when present (todos
without one come after those with one), then ``append_sequence``: that is
``state.board_key``, which the fold keeps the live todos sorted by.
"""

from __future__ import annotations

import datetime as dt
from typing import Any, Iterable

from loopstate_protocol.errors import ErrorCode

from loopstate.core.errors import LoopstateError
from loopstate.domains.goals.state import GoalState, evolve, initial


def instant(text: str) -> dt.datetime:
    """An offset-aware ISO-8601 timestamp as a UTC instant (naive times are refused)."""
    try:
        moment = dt.datetime.fromisoformat(text[:-1] + "+00:00" if text.endswith(("Z", "z")) else text)
        utc = moment.astimezone(dt.timezone.utc) if moment.tzinfo is not None else None
    except (TypeError, ValueError, OverflowError):
        raise LoopstateError(
            ErrorCode.VALIDATION_FAILED,
            f"recorded_at {text!r} is not an ISO-8601 timestamp; use UTC (…Z) or an explicit offset",
            field="recorded_at",
        ) from None
    if moment.tzinfo is None:
        raise LoopstateError(
            ErrorCode.VALIDATION_FAILED,
            f"recorded_at {text!r} has no UTC offset; give it in UTC (…Z) or with an explicit offset, e.g. 2026-03-02T13:00:00+01:00",
            field="recorded_at",
        )
    return utc


def replay_key(event: dict[str, Any]) -> tuple[int, dt.datetime, str]:
    return event["append_sequence"], instant(event["recorded_at"]), event["event_id"]


def replay_order(events: Iterable[dict[str, Any]]) -> list[dict[str, Any]]:
    return sorted(events, key=replay_key)


def replay(goal_id: str, events: Iterable[dict[str, Any]], state: GoalState | None = None) -> GoalState:
    """Fold events in replay order (identical duplicates ignored, conflicts refused)."""
    state = initial(goal_id) if state is None else state
    for event in replay_order(events):
        state = evolve(state, event)
    return state

