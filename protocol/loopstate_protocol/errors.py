"""Stable error codes of the loopstate wire contract.

Every refusal loopstate makes, over JSON-RPC or the CLI, carries one of these
strings as ``data.code``. They are part of the protocol: clients branch on them,
so a code is never renamed or reused for another meaning.
"""

from __future__ import annotations

import enum


class ErrorCode(str, enum.Enum):
    """The stable string codes; the value is what travels on the wire."""

    # Input and protocol
    INVALID_PARAMS = "INVALID_PARAMS"
    INVALID_REQUEST = "INVALID_REQUEST"
    PARSE_ERROR = "PARSE_ERROR"
    METHOD_NOT_FOUND = "METHOD_NOT_FOUND"
    SERVER_SHUTTING_DOWN = "SERVER_SHUTTING_DOWN"
    SERVER_NOT_INITIALIZED = "SERVER_NOT_INITIALIZED"
    INTERNAL_ERROR = "INTERNAL_ERROR"
    UNKNOWN_SUBSCRIPTION = "UNKNOWN_SUBSCRIPTION"

    # Store and paths
    INVALID_ROOT = "INVALID_ROOT"
    UNSAFE_PATH = "UNSAFE_PATH"
    NOT_FOUND = "NOT_FOUND"
    LOCK_TIMEOUT = "LOCK_TIMEOUT"
    CORRUPT_LEDGER = "CORRUPT_LEDGER"
    FUTURE_SCHEMA = "FUTURE_SCHEMA"
    STORE_IO_ERROR = "STORE_IO_ERROR"

    # Idempotency and domain rules
    REQUEST_ID_REUSED = "REQUEST_ID_REUSED"
    EVENT_ID_CONFLICT = "EVENT_ID_CONFLICT"
    RULE_VIOLATION = "RULE_VIOLATION"
    VALIDATION_FAILED = "VALIDATION_FAILED"
    CONFLICT = "CONFLICT"
    LEASE_HELD = "LEASE_HELD"
    LEASE_EXPIRED = "LEASE_EXPIRED"
    LEASE_MISMATCH = "LEASE_MISMATCH"
    CLOCK_REVERSED = "CLOCK_REVERSED"
    KILL_SWITCH = "KILL_SWITCH"
    AUTHORITY_DENIED = "AUTHORITY_DENIED"
    BUDGET_EXHAUSTED = "BUDGET_EXHAUSTED"
    INVALID_TRANSITION = "INVALID_TRANSITION"
    PRIVACY_VIOLATION = "PRIVACY_VIOLATION"


# JSON-RPC numeric codes used alongside the string codes. -32000..-32099 is the
# range JSON-RPC reserves for implementation-defined server errors.
JSONRPC_PARSE_ERROR = -32700
JSONRPC_INVALID_REQUEST = -32600
JSONRPC_METHOD_NOT_FOUND = -32601
JSONRPC_INVALID_PARAMS = -32602
JSONRPC_INTERNAL_ERROR = -32603
JSONRPC_SERVER_NOT_INITIALIZED = -32002
JSONRPC_APPLICATION_ERROR = -32000

_NUMERIC = {
    ErrorCode.PARSE_ERROR: JSONRPC_PARSE_ERROR,
    ErrorCode.INVALID_REQUEST: JSONRPC_INVALID_REQUEST,
    ErrorCode.METHOD_NOT_FOUND: JSONRPC_METHOD_NOT_FOUND,
    ErrorCode.INVALID_PARAMS: JSONRPC_INVALID_PARAMS,
    ErrorCode.INTERNAL_ERROR: JSONRPC_INTERNAL_ERROR,
    ErrorCode.SERVER_NOT_INITIALIZED: JSONRPC_SERVER_NOT_INITIALIZED,
}


def jsonrpc_code(code: ErrorCode) -> int:
    """The numeric JSON-RPC error code that accompanies a string code."""
    return _NUMERIC.get(code, JSONRPC_APPLICATION_ERROR)
