"""Ids given by any unique prefix, the way git takes abbreviated object names.

People copy the short ids a listing prints; a front door hands what it was
given and the ids that exist to ``resolve_prefix`` and sends the full id on.
A full-length id is passed through untouched, so the command that uses it
says itself when it names nothing.
"""

from __future__ import annotations

from typing import Iterable

from loopstate_protocol.errors import ErrorCode

from loopstate.core.errors import LoopstateError

MIN_PREFIX = 4
FULL_LENGTH = 36  # a UUID in its canonical form
SHOWN = 10  # candidates an ambiguity names


def resolve_prefix(kind: str, given: str, candidates: Iterable[str], *, hint: str = "") -> str:
    """The one candidate ``given`` is a prefix of (case-insensitive), else a clear refusal.

    NOT_FOUND when nothing starts with it; INVALID_PARAMS, naming the candidates
    (details ``candidates``), when more than one does or it is shorter than
    MIN_PREFIX characters. ``hint`` says where ids of this kind are shown.
    """
    wanted = given.strip().lower()
    if len(wanted) >= FULL_LENGTH:
        return wanted
    known = sorted({c.lower() for c in candidates})
    if len(wanted) < MIN_PREFIX:
        raise LoopstateError(ErrorCode.INVALID_PARAMS, f"{kind} id {given!r} is too short: give at least {MIN_PREFIX} "
                             f"characters of it{_hint(hint)}", kind=kind, given=given)
    matches = [c for c in known if c.startswith(wanted)]
    if len(matches) == 1:
        return matches[0]
    if not matches:
        raise LoopstateError(ErrorCode.NOT_FOUND, f"no {kind} id starts with {given!r}{_hint(hint)}", kind=kind, given=given)
    shown = ", ".join(matches[:SHOWN]) + (f" and {len(matches) - SHOWN} more" if len(matches) > SHOWN else "")
    raise LoopstateError(ErrorCode.INVALID_PARAMS, f"{kind} id prefix {given!r} is ambiguous: {len(matches)} ids start "
                         f"with it ({shown}); give more characters", kind=kind, given=given, candidates=matches)


def _hint(hint: str) -> str:
    return f"; {hint}" if hint else ""
