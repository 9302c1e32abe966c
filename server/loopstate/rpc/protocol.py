"""pygls's LanguageServerProtocol, with the paths that could leave a request unanswered closed.

- ``initialize`` advertises ``capabilities.experimental.loopstate`` and no
  text document sync (a sidecar does not want every open file's content).
- ``shutdown`` lets in-flight loopstate requests finish instead of cancelling
  them: a cancelled ``execute`` may already be durable, so its real result is
  the only honest answer. For the same reason ``$/cancelRequest`` is
  acknowledged by the normal response (LSP allows this).
- Every outgoing message is encoded here: a result that cannot be encoded
  becomes an INTERNAL_ERROR response for the same id (pygls would log it and
  send nothing), every error gets a stable ``data.code``, and the
  Content-Length counts bytes.
"""

from __future__ import annotations

import logging
from typing import TYPE_CHECKING, Any, Callable, Generator

import attrs
import msgspec
from lsprotocol import types
from lsprotocol.types import ResponseErrorMessage
from pygls.protocol import LanguageServerProtocol
from pygls.protocol.json_rpc import JsonRPCNotification, JsonRPCResponseMessage
from pygls.protocol.language_server import lsp_method

from loopstate_protocol.errors import ErrorCode

from loopstate.core.errors import quote
from loopstate.rpc.errors import normalize, wire_error
from loopstate.rpc.framing import encode_frame

if TYPE_CHECKING:
    from cattrs import Converter

    from loopstate.rpc.server import LoopstateServer

log = logging.getLogger("loopstate.rpc")

_encode = msgspec.json.Encoder().encode


class LoopstateProtocol(LanguageServerProtocol):
    """The protocol object of a LoopstateServer."""

    _server: LoopstateServer  # pygls types it as its own LanguageServer

    def __init__(self, server: LoopstateServer, converter: Converter) -> None:
        super().__init__(server, converter)
        self.after_response: dict[Any, Callable[[bool], None]] = {}
        self.initialized = False

    @lsp_method(types.INITIALIZE)
    def lsp_initialize(self, params: types.InitializeParams) -> Generator[Any, Any, types.InitializeResult]:
        result = yield from super().lsp_initialize(params)
        result.capabilities.text_document_sync = None
        result.capabilities.execute_command_provider = None
        result.capabilities.experimental = {self._server.capability_key: self._server.capability()}
        self.initialized = True
        return result

    # A coroutine where pygls has a generator: pygls runs either kind of handler, and waiting
    # for the running requests must await.
    @lsp_method(types.SHUTDOWN)
    async def lsp_shutdown(self, *args: Any) -> None:  # type: ignore[override]
        await self._server.finish_requests()
        self._shutdown = True
        return None

    def _handle_cancel_notification(self, msg_id: Any) -> None:
        log.info("request %s: cancellation noted; loopstate requests run to completion", quote(msg_id))

    # outgoing ------------------------------------------------------------------

    def _payload(self, data: Any) -> dict[str, Any]:
        if isinstance(data, JsonRPCResponseMessage):
            result = data.result
            if attrs.has(type(result)):
                result = self._converter.unstructure(result)
            return {"jsonrpc": "2.0", "id": data.id, "result": result}
        if isinstance(data, JsonRPCNotification):
            return {"jsonrpc": "2.0", "method": data.method, "params": data.params}
        payload = self._converter.unstructure(data)
        if isinstance(data, ResponseErrorMessage):
            return {"jsonrpc": "2.0", "id": data.id, "error": normalize(payload.get("error") or {})}
        return payload

    def _send_data(self, data: Any) -> None:
        if not data or self.writer is None:
            return
        msg_id = getattr(data, "id", None)
        sent = True
        try:
            body = _encode(self._payload(data))
        except Exception as exc:  # a result that cannot be encoded must still be answered
            log.exception("cannot encode an outgoing message")
            if msg_id is None:
                return
            sent = False
            body = _encode({"jsonrpc": "2.0", "id": msg_id, "error": wire_error(
                ErrorCode.INTERNAL_ERROR,
                f"the result could not be encoded as JSON ({type(exc).__name__}: {exc}); "
                "the server is still running; report this with the server's stderr log",
            )})
        self.writer.write(encode_frame(body))
        if msg_id is not None and self.after_response:
            callback = self.after_response.pop(msg_id, None)
            if callback is not None:
                callback(sent and not isinstance(data, ResponseErrorMessage))

    def send_payload(self, payload: dict[str, Any]) -> None:
        """Send a message built here (errors the reader answers itself, notifications)."""
        if self.writer is not None:
            self.writer.write(encode_frame(_encode(payload)))
