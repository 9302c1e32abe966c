"""stdio for the server's event loop, with back-pressure both ways.

pygls's stock stdio reads through a thread per line and writes with blocking
``write`` + ``flush``: a client that stops reading then stalls the whole
server. Here stdout is an asyncio pipe transport whose buffer raises
``paused`` above a high-water mark; the reader loop stops taking requests
while paused and subscriptions hold their notifications in one pending slot
each until ``on_drain`` fires, so memory stays bounded however slow the
client reads.
"""

from __future__ import annotations

import asyncio
import logging
import os
import stat
import threading
from typing import Callable

from loopstate.core.safefs import write_all

log = logging.getLogger("loopstate.rpc")

HIGH_WATER = 256 << 10
LOW_WATER = 64 << 10
READ_LIMIT = 1 << 16  # the StreamReader's buffer: past twice this it pauses the pipe until read


class _Flow(asyncio.Protocol):
    def __init__(self, writer: "StdioWriter") -> None:
        self.writer = writer

    def pause_writing(self) -> None:
        self.writer._set_paused(True)

    def resume_writing(self) -> None:
        self.writer._set_paused(False)

    def connection_lost(self, exc: Exception | None) -> None:
        self.writer._lost()


class StdioWriter:
    """pygls's writer interface (``write``/``close``) over stdout, thread-safe."""

    def __init__(self, loop: asyncio.AbstractEventLoop, fd: int) -> None:
        self.loop = loop
        self.fd = fd
        self.paused = False
        self.closed = asyncio.Event()
        self._transport: asyncio.WriteTransport | None = None
        self._drain_listeners: list[Callable[[], None]] = []
        self._lost_listeners: list[Callable[[], None]] = []
        self._resumed = asyncio.Event()
        self._resumed.set()
        self._thread = threading.get_ident()  # built on the loop's thread

    async def open(self) -> None:
        if stat.S_ISREG(os.fstat(self.fd).st_mode):
            return  # a regular file never blocks: plain writes
        file = os.fdopen(self.fd, "wb", buffering=0, closefd=False)
        self._transport, _ = await self.loop.connect_write_pipe(lambda: _Flow(self), file)
        self._transport.set_write_buffer_limits(high=HIGH_WATER, low=LOW_WATER)

    def on_drain(self, listener: Callable[[], None]) -> None:
        self._drain_listeners.append(listener)

    def write(self, data: bytes) -> None:
        if threading.get_ident() != self._thread:
            self.loop.call_soon_threadsafe(self.write, data)
            return
        if self.closed.is_set():
            return
        if self._transport is None:
            write_all(self.fd, data)
        else:
            self._transport.write(data)

    async def resumed(self) -> None:
        await self._resumed.wait()

    def _set_paused(self, paused: bool) -> None:
        self.paused = paused
        if paused:
            self._resumed.clear()
            return
        self._resumed.set()
        for listener in list(self._drain_listeners):
            listener()

    def on_lost(self, listener: Callable[[], None]) -> None:
        """Called once if the client closes its end of stdout."""
        self._lost_listeners.append(listener)

    def _lost(self) -> None:
        self.closed.set()
        self._set_paused(False)
        for listener in self._lost_listeners:
            listener()

    def close(self) -> None:
        if self._transport is not None and not self._transport.is_closing():
            self._transport.close()

    async def flush(self, timeout: float) -> None:
        """Let buffered output reach the client (bounded: it may have stopped reading)."""
        if self._transport is None or self.closed.is_set():
            return
        self.close()
        try:
            await asyncio.wait_for(self.closed.wait(), timeout)
        except asyncio.TimeoutError:
            self._transport.abort()


class StdinReader:
    """An asyncio StreamReader over stdin (a pipe, socket or tty; a regular file or another device through a thread).

    ``stop`` ends the input early (the client closed our stdout, so nobody
    reads the answers): reading stops at the source, then the StreamReader
    sees its end. Feeding it the end while the pipe transport still read would
    make the transport's next read fail inside asyncio (``feed_data after
    feed_eof``) with a traceback on stderr.
    """

    def __init__(self, loop: asyncio.AbstractEventLoop, fd: int) -> None:
        self.loop = loop
        self.fd = fd
        self.stream = asyncio.StreamReader(limit=READ_LIMIT, loop=loop)
        self._transport: asyncio.ReadTransport | None = None
        self._stopped = False

    async def open(self) -> asyncio.StreamReader:
        mode = os.fstat(self.fd).st_mode
        if not (stat.S_ISFIFO(mode) or stat.S_ISSOCK(mode) or os.isatty(self.fd)):
            # A regular file, or a device epoll refuses (``</dev/null``: EPERM): read through a thread,
            # whose end of input ends the server as a pipe's does, instead of never arriving.
            threading.Thread(target=self._pump, name="loopstate-stdin", daemon=True).start()
            return self.stream
        file = os.fdopen(self.fd, "rb", buffering=0, closefd=False)
        self._transport, _ = await self.loop.connect_read_pipe(
            lambda: asyncio.StreamReaderProtocol(self.stream, loop=self.loop), file)
        return self.stream

    def _pump(self) -> None:
        try:
            while chunk := os.read(self.fd, 1 << 16):
                self.loop.call_soon_threadsafe(self._feed, chunk)
        except OSError as exc:  # an unreadable input ends it, as its end would
            log.warning("stdin could not be read (%s); ending as at its end", exc.strerror or exc)
        self.loop.call_soon_threadsafe(self._end)

    def _feed(self, chunk: bytes) -> None:
        if not self._stopped:
            self.stream.feed_data(chunk)

    def _end(self) -> None:
        if not self.stream.at_eof():
            self.stream.feed_eof()

    def stop(self) -> None:
        """Read nothing more; the stream ends after what it holds already."""
        self._stopped = True
        if self._transport is not None:
            # Closing removes the reader from the loop first; the protocol's
            # connection_lost then feeds the end to the stream.
            self._transport.close()
        else:
            self._end()
