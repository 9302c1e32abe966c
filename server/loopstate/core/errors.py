"""The one exception type every layer raises for a refusal the user can act on.

It carries a stable code from ``loopstate_protocol.errors``, a message that says
what was wrong and what to do, and structured details (offsets, holders, fields)
that front doors pass through unchanged.

Messages and details quote what the client sent (a root, an id, a value), and
client input has no size bound short of the frame limit: a 10 MB root must not
make a 20 MB error. ``quote`` cuts one quoted value to a few hundred characters
and says how long it was; ``clip`` bounds a whole message the same way, keeping
its start and its end (where the advice usually is), and every LoopstateError
applies it, so a message built by any caller with a plain ``{value!r}`` is
bounded too.
"""

from __future__ import annotations

import re
from typing import Any

import msgspec

from loopstate_protocol.errors import ErrorCode

QUOTE_LIMIT = 200  # characters of one quoted value
MESSAGE_LIMIT = 600  # characters of a whole message, or of one string detail (a path may be long)
_NOTE = re.compile(r"\[\.\.\. \d+ characters in all, cut here \.\.\.\]")


def clip(text: str, limit: int = MESSAGE_LIMIT) -> str:
    """``text``, or its start and end around a note of how much was cut, in ``limit`` characters.

    A text clipped before (an error that wraps another's message) keeps its
    note, with the original length: what is over is cut just before it.
    """
    if len(text) <= limit:
        return text
    earlier = _NOTE.search(text)
    if earlier is not None and earlier.start() >= len(text) - limit:
        cut = len(text) - limit
        return text[:earlier.start() - cut] + text[earlier.start():]
    note = f"[... {len(text)} characters in all, cut here ...]"
    room = max(0, limit - len(note))
    tail = room // 4
    return f"{text[:room - tail]}{note}{text[len(text) - tail:]}"


def quote(value: Any, limit: int = QUOTE_LIMIT) -> str:
    """A value the client sent, for an error message: ``repr`` of a string, JSON of anything
    else, cut to ``limit`` characters with the full length said."""
    if isinstance(value, str):
        if len(value) <= limit:
            return repr(value)
        return f"{value[:limit]!r}... ({len(value)} characters)"
    try:
        text = msgspec.json.encode(value, enc_hook=repr).decode()
    except (RecursionError, TypeError, ValueError, msgspec.EncodeError):
        return f"a {type(value).__name__} that cannot be shown"
    if len(text) <= limit:
        return text
    return f"{text[:limit]}... ({len(text)} characters of JSON)"


def _bounded(value: Any) -> Any:
    return clip(value) if isinstance(value, str) else value


class LoopstateError(Exception):
    """A refusal with a stable code; front doors turn it into their own error shape.

    The message and each string detail are clipped to MESSAGE_LIMIT characters
    (with the full length said): they may quote client input.
    """

    def __init__(self, code: ErrorCode, message: str, **details: Any) -> None:
        message = clip(message)
        super().__init__(message)
        self.code = code
        self.message = message
        self.details = {name: _bounded(value) for name, value in details.items()}

    def to_dict(self) -> dict[str, Any]:
        return {"code": self.code.value, "message": self.message, "details": self.details}

    def __repr__(self) -> str:
        return f"LoopstateError({self.code.value}, {self.message!r}, {self.details!r})"
