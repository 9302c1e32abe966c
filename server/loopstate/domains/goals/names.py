"""Goal names a typo should not split: reading a goal that has no events, and starting one
whose name is a near miss of an existing goal's.

A goal exists once its stream holds an event; there is no separate create step,
so a mistyped goal id would otherwise read as an empty board and its first
command would quietly start a second goal. The rules here are pure: the service
hands in the project's goal ids (``KNOWN_GOALS`` in the context).

Near miss, precisely: two different ids are near when both have at least
``MIN_TYPO_LENGTH`` characters and one edit turns one into the other (insert,
delete or replace one character, or swap two adjacent ones), unless that edit
only touches digits: ``sprint-3`` beside ``sprint-4`` or ``goal`` beside
``goal2`` is a numbered series, not a typo. Ids equal but for case are refused
outright, confirmed or not: on a case-insensitive file system they would share
one stream file.
"""

from __future__ import annotations

import difflib
from typing import Iterable

from loopstate_protocol.errors import ErrorCode

from loopstate.core.errors import LoopstateError

KNOWN_GOALS = "goals.known_goals"  # ctx.extra: the project's goal ids, filled in by the service
MIN_TYPO_LENGTH = 4
MAX_LISTED = 20


def _one_edit(a: str, b: str) -> str | None:
    """The characters one edit changes between ``a`` and ``b`` (Damerau distance 1), or None."""
    if len(a) > len(b):
        a, b = b, a
    if len(b) - len(a) > 1:
        return None
    start = 0
    while start < len(a) and a[start] == b[start]:
        start += 1
    if len(a) < len(b):  # one insertion
        return b[start] if a[start:] == b[start + 1:] else None
    if start == len(a):
        return None  # equal
    if a[start + 1:] == b[start + 1:]:  # one replacement
        return a[start] + b[start]
    if a[start + 2:] == b[start + 2:] and a[start:start + 2] == b[start:start + 2][::-1]:  # adjacent swap
        return a[start:start + 2]
    return None


def near(a: str, b: str) -> bool:
    """Is ``a`` a near miss of ``b`` (see the module docstring)?"""
    if a == b or min(len(a), len(b)) < MIN_TYPO_LENGTH:
        return False
    changed = _one_edit(a, b)
    return changed is not None and not changed.isdigit()


def near_misses(goal_id: str, known: Iterable[str]) -> list[str]:
    return sorted(other for other in known if near(goal_id, other))


def _either(names: list[str]) -> str:
    quoted = [repr(name) for name in names]
    return quoted[0] if len(quoted) == 1 else f"{', '.join(quoted[:-1])} or {quoted[-1]}"


def _listing(known: list[str]) -> str:
    shown = ", ".join(known[:MAX_LISTED])
    more = f" and {len(known) - MAX_LISTED} more (`loopstate goals list`)" if len(known) > MAX_LISTED else ""
    return f"{shown}{more}"


def missing_goal(goal_id: str, known: Iterable[str] | None) -> LoopstateError:
    """NOT_FOUND for a read of a goal that has no events, naming the goals there are."""
    goals = sorted(set(known or ()) - {goal_id})
    close = difflib.get_close_matches(goal_id, goals, n=3, cutoff=0.6) or near_misses(goal_id, goals)
    hint = f" Did you mean {_either(close)}?" if close else ""
    if goals:
        listed = f" Goals in this project: {_listing(goals)}."
    elif known is None:
        listed = " `loopstate goals list` lists the goals of this project."
    else:
        listed = " This project has no goals yet."
    return LoopstateError(
        ErrorCode.NOT_FOUND,
        f"goal {goal_id!r} has no events in this project.{hint}{listed} A goal starts with its first event, "
        f"e.g. `loopstate goals add {goal_id} TITLE`",
        goal_id=goal_id, known_goals=goals[:MAX_LISTED], suggestions=close,
    )


def check_new_goal(goal_id: str, known: Iterable[str], confirmed: bool) -> None:
    """Refuse to start goal ``goal_id`` when its name differs only in case from an existing
    goal's, or is a near miss of one and the caller did not confirm that it means a new
    goal (``new_goal``, ``--new-goal``)."""
    known = list(known)
    same = sorted(other for other in known if other != goal_id and other.casefold() == goal_id.casefold())
    if same:
        raise LoopstateError(
            ErrorCode.CONFLICT,
            f"goal {goal_id!r} differs only in case from {_either(same)}; on a case-insensitive file system "
            "both would be one stream file: use the existing name, or choose one that differs in more than case",
            goal_id=goal_id, near=same,
        )
    close = [] if confirmed else near_misses(goal_id, known)
    if close:
        raise LoopstateError(
            ErrorCode.CONFLICT,
            f"goal {goal_id!r} does not exist yet, and its name is one edit away from {_either(close)}; a typo "
            "here would start a second goal. Use the existing name, or confirm a new goal with --new-goal "
            "(new_goal: true)",
            goal_id=goal_id, near=close,
        )
