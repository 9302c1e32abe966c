"""loopstate's wire contract: commands, queries, results, notifications, errors.

This package depends on msgspec alone, so harness sidecars can import it (and its
stdio client) without pulling in the server.
"""

from loopstate_protocol.base import Command, ErrorData, Head, Query
from loopstate_protocol.errors import ErrorCode

PROTOCOL_VERSION = "0.1.0"

__all__ = ["Command", "ErrorCode", "ErrorData", "Head", "PROTOCOL_VERSION", "Query"]
