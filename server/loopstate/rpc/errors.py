"""Every refusal on the wire: a JSON-RPC error whose ``data.code`` is a stable string.

The numeric ``code`` follows JSON-RPC (and LSP for -32002); clients branch on
``data.code`` from ``loopstate_protocol.errors.ErrorCode``. Messages say what
was wrong and what to do.
"""

from __future__ import annotations

import logging
import traceback
from typing import Any

import msgspec
from pygls.exceptions import JsonRpcException

from loopstate_protocol.errors import (
    JSONRPC_INTERNAL_ERROR,
    JSONRPC_INVALID_PARAMS,
    JSONRPC_INVALID_REQUEST,
    JSONRPC_METHOD_NOT_FOUND,
    JSONRPC_PARSE_ERROR,
    JSONRPC_SERVER_NOT_INITIALIZED,
    ErrorCode,
    jsonrpc_code,
)

from loopstate.core.errors import LoopstateError, clip

log = logging.getLogger("loopstate.rpc")

# Numeric codes pygls (or a peer) may produce, and the string code each means.
_BY_NUMBER = {
    JSONRPC_PARSE_ERROR: ErrorCode.PARSE_ERROR,
    JSONRPC_INVALID_REQUEST: ErrorCode.INVALID_REQUEST,
    JSONRPC_METHOD_NOT_FOUND: ErrorCode.METHOD_NOT_FOUND,
    JSONRPC_INVALID_PARAMS: ErrorCode.INVALID_PARAMS,
    JSONRPC_INTERNAL_ERROR: ErrorCode.INTERNAL_ERROR,
    JSONRPC_SERVER_NOT_INITIALIZED: ErrorCode.SERVER_NOT_INITIALIZED,
}


def wire_error(code: ErrorCode, message: str, details: dict[str, Any] | None = None) -> dict[str, Any]:
    """The ``error`` member of a JSON-RPC response.

    The message is clipped (``core.errors.clip``): one built from a decoder's or
    a library's text may quote the client's input at any length.
    """
    data: dict[str, Any] = {"code": code.value}
    if details:
        data["details"] = details
    return {"code": jsonrpc_code(code), "message": clip(message), "data": data}


class RpcError(JsonRpcException):
    """Raised by a handler; pygls turns it into the error response unchanged."""

    def __init__(self, code: ErrorCode, message: str, details: dict[str, Any] | None = None) -> None:
        error = wire_error(code, message, details)
        super().__init__(message=error["message"], code=error["code"], data=error["data"])
        self.error_code = code


def decode_params(method: str, params: Any, params_type: type) -> Any:
    """The request's params as ``params_type``, or INVALID_PARAMS with msgspec's message and path."""
    try:
        return msgspec.convert(params, params_type)
    except msgspec.ValidationError as exc:
        raise RpcError(
            ErrorCode.INVALID_PARAMS,
            f"{method} params do not decode: {exc}; see `loopstate schema` for the expected shape",
        ) from None


def from_exception(method: str, exc: BaseException) -> RpcError:
    """Map whatever a handler raised to an RpcError; faults (anything but a refusal) are
    logged with their traceback and answered as INTERNAL_ERROR."""
    if isinstance(exc, RpcError):
        return exc
    if isinstance(exc, LoopstateError):
        return RpcError(exc.code, exc.message, _plain(exc.details))
    log.error("fault in %s:\n%s", method, "".join(traceback.format_exception(exc)))
    return RpcError(
        ErrorCode.INTERNAL_ERROR,
        f"internal error in {method}: {type(exc).__name__}: {exc}; nothing was acknowledged, "
        "the server is still running; report this with the server's stderr log",
    )


def normalize(error: dict[str, Any]) -> dict[str, Any]:
    """Give an error pygls built itself (cancel, internal) a stable ``data.code``.

    pygls's own internal errors carry a traceback in ``data``; it stays in the
    log, not on the wire.
    """
    data = error.get("data")
    if isinstance(data, dict) and isinstance(data.get("code"), str):
        return error
    number = error.get("code")
    code = _BY_NUMBER.get(number, ErrorCode.INTERNAL_ERROR) if isinstance(number, int) else ErrorCode.INTERNAL_ERROR
    message = str(error.get("message") or code.value)
    return wire_error(code, f"{message}; the server is still running")


def _plain(details: dict[str, Any]) -> dict[str, Any]:
    """Details as JSON-able builtins (paths, enums and the like become strings)."""
    return msgspec.to_builtins(details, enc_hook=str)
