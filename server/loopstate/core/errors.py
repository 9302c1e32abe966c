"""The one exception type every layer raises for a refusal the user can act on.

It carries a stable code from ``loopstate_protocol.errors``, a message that says
what was wrong and what to do, and structured details (offsets, holders, fields)
that front doors pass through unchanged.
"""

from __future__ import annotations

from typing import Any

from loopstate_protocol.errors import ErrorCode


class LoopstateError(Exception):
    """A refusal with a stable code; front doors turn it into their own error shape."""

    def __init__(self, code: ErrorCode, message: str, **details: Any) -> None:
        super().__init__(message)
        self.code = code
        self.message = message
        self.details = details

    def to_dict(self) -> dict[str, Any]:
        return {"code": self.code.value, "message": self.message, "details": self.details}

    def __repr__(self) -> str:
        return f"LoopstateError({self.code.value}, {self.message!r}, {self.details!r})"
