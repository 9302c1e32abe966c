"""Stdio for `loopstate mcp` that answers every request, even at the end of input.

An MCP client shuts a stdio server down by closing its stdin. The SDK's loop
then ends at once and cancels the handlers still running, so a tool call sent
just before the close (a claim that may already be durable) got no answer. And
a line that is not JSON-RPC reached the SDK as an exception it only logs,
where JSON-RPC owes a parse error. These two wrappers sit between the SDK's
stdio streams and its loop:

- ``Answering`` (the read side) notes each request id; a malformed line is
  answered with a JSON-RPC parse error (id null) instead of being passed on;
  at the end of input it waits, for at most ``DRAIN_SECONDS``, until every
  noted request has been answered, then lets the loop end;
- ``Noting`` (the write side) crosses off each id as its response goes out.
"""

from __future__ import annotations

import logging
from typing import TYPE_CHECKING, Any

import anyio

from loopstate.mcpserver.early import ACKNOWLEDGED, SUBSCRIPTION_KEY

if TYPE_CHECKING:
    from mcp.shared.message import SessionMessage

log = logging.getLogger("loopstate.mcp")

DRAIN_SECONDS = 30.0
PARSE_ERROR = -32700


class _Wrapper:
    """A stream of the SDK's, with the rest of its surface passed through unchanged."""

    def __init__(self, inner: Any) -> None:
        self.inner = inner

    async def aclose(self) -> None:
        await self.inner.aclose()

    async def __aenter__(self) -> Any:
        return self

    async def __aexit__(self, *exc: Any) -> None:
        await self.aclose()

    def __getattr__(self, name: str) -> Any:
        return getattr(self.inner, name)


class Noting(_Wrapper):
    """The write stream, crossing requests off as their responses go out.

    ``early`` are the lines mcpserver/early.py already wrote, by request id:
    the SDK's own answer to each of those requests is dropped here (the host
    has it), once, after checking that it is the same line.
    """

    def __init__(self, inner: Any, early: dict[Any, bytes] | None = None, recorder: Any = None,
                 acks: dict[Any, bytes] | None = None) -> None:
        super().__init__(inner)
        self.pending: set[Any] = set()
        self.answered = anyio.Event()
        self.early = dict(early or {})
        self.acks = dict(acks or {})  # listen streams acknowledged early, by subscription id
        self.recorder = recorder  # early.Recorder: the SDK's handshake answers, kept for the next start

    async def send(self, item: SessionMessage) -> None:
        from mcp.types import JSONRPCError, JSONRPCNotification, JSONRPCRequest, JSONRPCResponse

        message = item.message
        answer = isinstance(message, (JSONRPCResponse, JSONRPCError))  # a response or an error, to a request
        request_id = message.id if isinstance(message, (JSONRPCRequest, JSONRPCResponse, JSONRPCError)) else None
        response = answer and request_id is not None
        # A listen stream's acknowledgement (a notification), and the subscription it acknowledges.
        acknowledged = isinstance(message, JSONRPCNotification) and message.method == ACKNOWLEDGED
        subscription = (((message.params or {}).get("_meta") or {}).get(SUBSCRIPTION_KEY)
                        if isinstance(message, JSONRPCNotification) else None)
        if self.recorder is not None and not self.recorder.done:
            if response:
                self.recorder.response(request_id, _wire_line(message))
            elif acknowledged:
                self.recorder.acknowledged(subscription, _wire_line(message))
        written = None
        if response and self.early and request_id in self.early:
            written = self.early.pop(request_id)
        elif self.acks and acknowledged:
            written = self.acks.pop(subscription, None)
        if written is not None:
            ours = _wire_line(message)
            if ours != written:
                log.warning("the early answer %.300r differs from the SDK's %.300r", written, ours)
        else:
            await self.inner.send(item)
        if answer and request_id in self.pending:
            self.pending.discard(request_id)
            if not self.pending:
                self.answered.set()

    def note(self, request_id: Any) -> None:
        self.pending.add(request_id)
        self.answered = anyio.Event()


class Answering(_Wrapper):
    """The read stream: answers malformed lines, and holds back the end of input until requests are answered."""

    def __init__(self, inner: Any, writer: Noting) -> None:
        super().__init__(inner)
        self.writer = writer
        self.recorder = writer.recorder

    async def receive(self) -> Any:
        from mcp.shared.message import SessionMessage
        from mcp.types import JSONRPCError, JSONRPCRequest

        while True:
            try:
                item = await self.inner.receive()
            except (anyio.EndOfStream, anyio.ClosedResourceError):
                await self._drain()
                raise anyio.EndOfStream from None
            if isinstance(item, Exception):
                await self.writer.send(SessionMessage(JSONRPCError.model_validate({
                    "jsonrpc": "2.0", "id": None,
                    "error": {"code": PARSE_ERROR, "message": f"not a JSON-RPC message: {_first_line(item)}"},
                })))
                continue
            if isinstance(item.message, JSONRPCRequest):
                self.writer.note(item.message.id)
                if self.recorder is not None and not self.recorder.done:
                    message = item.message
                    self.recorder.request({"jsonrpc": "2.0", "id": message.id, "method": message.method,
                                           **({} if message.params is None else {"params": message.params})})
            return item

    async def _drain(self) -> None:
        if self.writer.pending:
            with anyio.move_on_after(DRAIN_SECONDS) as scope:
                await self.writer.answered.wait()
            if scope.cancelled_caught:
                log.warning("input ended; %d request(s) still unanswered after %.0f s", len(self.writer.pending), DRAIN_SECONDS)

    def __aiter__(self) -> "Answering":
        return self

    async def __anext__(self) -> Any:
        try:
            return await self.receive()
        except anyio.EndOfStream:
            raise StopAsyncIteration from None


def _wire_line(message: Any) -> bytes:
    """``message`` as the SDK's stdio transport writes it."""
    return (message.model_dump_json(by_alias=True, exclude_unset=True) + "\n").encode()


def _first_line(exc: Exception) -> str:
    return str(exc).splitlines()[0][:200] if str(exc) else type(exc).__name__
