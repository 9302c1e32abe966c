"""Injected time: aware UTC, written as RFC 3339 with a ``Z`` suffix.

Domains never read the clock; the service reads it once per command and hands the
value down, so tests pin time exactly and replay stays deterministic.
"""

from __future__ import annotations

import datetime as _dt
from typing import Callable

from loopstate_protocol.errors import ErrorCode

from loopstate.core.errors import LoopstateError

UTC = _dt.timezone.utc


def system_clock() -> _dt.datetime:
    return _dt.datetime.now(UTC)


class FixedClock:
    """A clock for tests: returns ``now`` until moved with ``advance`` or ``set``."""

    def __init__(self, now: _dt.datetime | str) -> None:
        self.now = parse_time(now) if isinstance(now, str) else now

    def __call__(self) -> _dt.datetime:
        return self.now

    def advance(self, seconds: float) -> None:
        self.now = self.now + _dt.timedelta(seconds=seconds)

    def set(self, now: _dt.datetime | str) -> None:
        self.now = parse_time(now) if isinstance(now, str) else now


def format_time(moment: _dt.datetime) -> str:
    """RFC 3339 UTC with ``Z``; microseconds kept only when present."""
    if moment.tzinfo is None:
        raise LoopstateError(ErrorCode.VALIDATION_FAILED, "timestamp has no timezone; pass an aware UTC time")
    moment = moment.astimezone(UTC)
    text = moment.strftime("%Y-%m-%dT%H:%M:%S")
    if moment.microsecond:
        text += f".{moment.microsecond:06d}"
    return text + "Z"


def parse_time(text: str, *, field: str = "timestamp", require_z: bool = True) -> _dt.datetime:
    """Parse RFC 3339; with ``require_z`` only the UTC ``Z`` form is accepted."""
    if not isinstance(text, str) or not text:
        raise LoopstateError(ErrorCode.VALIDATION_FAILED, f"{field}: expected an RFC 3339 timestamp string", field=field)
    if require_z and not text.endswith("Z"):
        raise LoopstateError(
            ErrorCode.VALIDATION_FAILED,
            f"{field}: {text!r} is not UTC; write it as RFC 3339 with a Z suffix, e.g. 2026-01-01T00:00:00Z",
            field=field,
        )
    try:
        moment = _dt.datetime.fromisoformat(text[:-1] + "+00:00" if text.endswith("Z") else text)
    except ValueError:
        raise LoopstateError(ErrorCode.VALIDATION_FAILED, f"{field}: {text!r} is not an RFC 3339 timestamp", field=field) from None
    if moment.tzinfo is None:
        raise LoopstateError(ErrorCode.VALIDATION_FAILED, f"{field}: {text!r} has no UTC offset", field=field)
    return moment.astimezone(UTC)


ClockFn = Callable[[], _dt.datetime]
