"""The reader loop: every frame read from stdin gets exactly the answer it is owed.

pygls's own loop drops a message it cannot parse, one without ``jsonrpc``, one
whose params its converter rejects, and every request after ``shutdown``,
without a word; and it calls ``sys.exit`` from inside a handler on ``exit``.
This loop checks the envelope first and answers each of those itself with a
stable ``data.code``; what is well formed goes to pygls's protocol
(``initialize``, ``shutdown``, the LSP notifications, and loopstate's
methods as pygls features). Notifications are never answered, as JSON-RPC
says; a request always is. Whatever the decoder or these checks raise for one
frame (a message nested too deep, any decoder error, a fault here) is
answered too, and the session goes on: no frame can end the server.
"""

from __future__ import annotations

import asyncio
import logging
from typing import Any, cast

import cattrs
import msgspec
from lsprotocol import types
from pygls.protocol.json_rpc import JsonRPCRequestMessage

from loopstate_protocol import methods
from loopstate_protocol.errors import ErrorCode

from loopstate.core.errors import quote
from loopstate.rpc import envelope
from loopstate.rpc.errors import wire_error
from loopstate.rpc.framing import BadFrame, FrameReader
from loopstate.rpc.server import LoopstateServer
from loopstate.rpc.transport import StdioWriter

log = logging.getLogger("loopstate.rpc")

LSP_REQUESTS = (types.INITIALIZE, types.SHUTDOWN)
FRAMING_HINT = "send one JSON-RPC 2.0 object per Content-Length frame"


class Dispatcher:
    def __init__(self, server: LoopstateServer, writer: StdioWriter) -> None:
        self.server = server
        self.protocol = server.protocol
        self.writer = writer
        self.initializing = False

    async def run(self, frames: FrameReader) -> int:
        """Serve until ``exit`` or the end of stdin; returns the process exit code."""
        while True:
            if self.writer.paused:
                await self.writer.resumed()  # back-pressure: a client that does not read waits to write
            if not self.server.room.is_set():
                await self.server.room.wait()  # and one that sends faster than commands apply waits too
            frame = await frames.read()
            if frame is None:
                if not self.server.shutting_down:
                    log.warning("stdin closed before shutdown and exit; exiting with status 1")
                return 0 if self.server.shutting_down else 1
            if isinstance(frame, BadFrame):
                self.reply_error(None, ErrorCode.PARSE_ERROR, f"unreadable frame: {frame.reason}")
                continue
            code = self.answer(frame)
            if code is not None:
                return code
            await asyncio.sleep(0)  # let the handlers just started run before the next frame

    def answer(self, frame: bytes) -> int | None:
        """Decode one frame and give it what it is owed; never raises (the session outlives any frame)."""
        message: Any = None
        try:
            message = envelope.decode(frame)
        except envelope.TooDeep as deep:
            self.refuse_too_deep(deep)
            return None
        except msgspec.DecodeError as exc:
            self.reply_error(None, ErrorCode.PARSE_ERROR, f"the message is not valid JSON ({exc}); {FRAMING_HINT}")
            return None
        except Exception as exc:  # noqa: BLE001 - whatever else a decoder raises (MemoryError...)
            log.warning("a frame could not be decoded: %s: %s", type(exc).__name__, exc)
            self.reply_error(None, ErrorCode.PARSE_ERROR,
                             f"the message could not be decoded ({type(exc).__name__}: {exc}); {FRAMING_HINT}")
            return None
        try:
            return self.handle(message)
        except Exception as exc:  # noqa: BLE001 - a fault here must not end the session
            log.exception("fault while reading a message")
            msg_id = message.get("id") if isinstance(message, dict) else None
            self.reply_error(msg_id if type(msg_id) in (int, str) else None, ErrorCode.INTERNAL_ERROR,
                             f"internal error: {type(exc).__name__}: {exc}; the server is still running; "
                             "report this with the server's stderr log")
            return None

    def refuse_too_deep(self, deep: envelope.TooDeep) -> None:
        """Answer a message too deep to process, by its id when the id could be read.

        A notification (no id, a method) is not answered, as JSON-RPC says; when
        the scan could not read the whole envelope, an id it missed may exist,
        so the answer goes out with id null rather than not at all.
        """
        members = deep.members or {}
        msg_id = members.get("id")
        if type(msg_id) in (int, str):
            self.reply_error(msg_id, ErrorCode.INVALID_REQUEST, str(deep))
        elif "id" not in members and deep.complete and isinstance(members.get("method"), str):
            log.warning("ignoring notification %s: %s", quote(members["method"]), deep)
        else:
            self.reply_error(None, ErrorCode.INVALID_REQUEST, str(deep))

    def reply_error(self, msg_id: Any, code: ErrorCode, message: str, details: dict[str, Any] | None = None) -> None:
        self.protocol.send_payload({"jsonrpc": "2.0", "id": msg_id, "error": wire_error(code, message, details)})

    def handle(self, message: Any) -> int | None:
        if not isinstance(message, dict):
            kind = "an array (batches are not part of LSP)" if isinstance(message, list) else type(message).__name__
            self.reply_error(None, ErrorCode.INVALID_REQUEST, f"a message must be a JSON object, not {kind}; {FRAMING_HINT}")
            return None
        has_id = "id" in message
        msg_id = message.get("id")
        if has_id and type(msg_id) not in (int, str):
            self.reply_error(None, ErrorCode.INVALID_REQUEST, f"id must be an integer or a string, not {quote(msg_id)}")
            return None
        if message.get("jsonrpc") != "2.0":
            self.reply_error(msg_id, ErrorCode.INVALID_REQUEST,
                             f"jsonrpc must be \"2.0\", not {quote(message.get('jsonrpc'))}; loopstate speaks JSON-RPC 2.0")
            return None
        method = message.get("method")
        if "method" not in message:
            if has_id and ("result" in message or "error" in message):
                log.info("ignoring a response to %s: this server sends no requests", quote(msg_id))
                return None
            self.reply_error(msg_id, ErrorCode.INVALID_REQUEST, "the message has no method; a request needs method and id")
            return None
        if not isinstance(method, str):
            self.reply_error(msg_id, ErrorCode.INVALID_REQUEST, f"method must be a string, not {quote(method)}")
            return None
        if has_id:
            self.request(cast("int | str", msg_id), method, message)  # its type was checked above (no bool)
            return None
        return self.notification(method, message)

    # requests ----------------------------------------------------------------------

    def request(self, msg_id: int | str, method: str, message: dict[str, Any]) -> None:
        server = self.server
        if server.shutting_down or self.protocol._shutdown:
            self.reply_error(msg_id, ErrorCode.SERVER_SHUTTING_DOWN,
                             f"{method} refused: the server is shutting down after `shutdown`; send `exit` and start a new server")
            return
        if method == types.INITIALIZE:
            if self.initializing:
                self.reply_error(msg_id, ErrorCode.INVALID_REQUEST, "initialize was already called on this connection")
                return
        elif not self.protocol.initialized:
            self.reply_error(msg_id, ErrorCode.SERVER_NOT_INITIALIZED, f"{method} refused: send `initialize` first")
            return
        if method in methods.REQUESTS:
            if msg_id in self.protocol._request_futures:
                self.reply_error(msg_id, ErrorCode.INVALID_REQUEST,
                                 f"id {quote(msg_id)} is already in use by a request in flight; use a new id per request")
                return
            structured = JsonRPCRequestMessage(id=msg_id, method=method, jsonrpc="2.0", params=message.get("params"))
        elif method in LSP_REQUESTS:
            try:
                structured = self.protocol.structure_message(message)
            except Exception as exc:
                self.reply_error(msg_id, ErrorCode.INVALID_PARAMS, f"{method} params do not decode: {_why(exc)}")
                return
            if method == types.INITIALIZE:
                self.initializing = True
            else:
                server.shutting_down = True
        else:
            self.reply_error(msg_id, ErrorCode.METHOD_NOT_FOUND,
                             f"unknown method {quote(method)}; this server answers "
                             + ", ".join((*LSP_REQUESTS, *methods.REQUESTS)))
            return
        self._hand_over(structured, msg_id)

    # notifications -------------------------------------------------------------------

    def notification(self, method: str, message: dict[str, Any]) -> int | None:
        if method == types.EXIT:
            return 0 if self.server.shutting_down else 1  # a shutdown still finishing counts
        if method in methods.REQUESTS or method in LSP_REQUESTS:
            # Without an id nobody could learn the outcome: a command is never applied blind.
            log.warning("ignoring %s sent as a notification: it is a request and needs an id", method)
            return None
        if not self.protocol.initialized or self.protocol._shutdown:
            log.info("dropping notification %s (not initialized, or shut down)", quote(method))
            return None
        fm = self.protocol.fm
        if method not in fm.builtin_features and method not in fm.features and method != types.CANCEL_REQUEST:
            log.debug("ignoring notification %s", quote(method))
            return None
        try:
            structured = self.protocol.structure_message(message)
        except Exception as exc:
            log.warning("dropping notification %s: %s", quote(method), _why(exc))
            return None
        self._hand_over(structured, None)
        return None

    def _hand_over(self, structured: Any, msg_id: Any) -> None:
        try:
            self.protocol.handle_message(structured)
        except Exception as exc:  # pygls answers handler faults itself; this is anything else
            log.exception("pygls could not handle a message")
            if msg_id is not None:
                self.reply_error(msg_id, ErrorCode.INTERNAL_ERROR,
                                 f"internal error: {type(exc).__name__}: {exc}; the server is still running")


def _why(exc: Exception) -> str:
    """The useful part of a cattrs failure (pygls wraps it in JsonRpcInvalidParams)."""
    cause = exc.__cause__ or exc
    if isinstance(cause, cattrs.ClassValidationError):
        return "; ".join(cattrs.transform_error(cause))
    return f"{type(cause).__name__}: {cause}"
