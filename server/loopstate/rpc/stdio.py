"""Run a LoopstateServer on a pair of file descriptors until ``exit`` or end of input."""

from __future__ import annotations

import asyncio
import logging

from loopstate.rpc.dispatch import Dispatcher
from loopstate.rpc.framing import FrameReader
from loopstate.rpc.history_alarm import HistoryAlarms
from loopstate.rpc.server import LoopstateServer
from loopstate.rpc.subscriptions import Hub
from loopstate.rpc.transport import StdinReader, StdioWriter
from loopstate.service.engine import Service
from loopstate.service.watch import Watcher

log = logging.getLogger("loopstate.rpc")

FLUSH_TIMEOUT = 2.0


async def serve(service: Service, stdin_fd: int, stdout_fd: int) -> int:
    """Serve one client; returns the exit code (0 after shutdown, 1 without)."""
    loop = asyncio.get_running_loop()
    server = LoopstateServer(service)
    service.add_listener(server.on_news)  # another process's append arms the idle snapshot check
    service.add_listener(HistoryAlarms(server.worker, loop, server.protocol.notify).on_news)
    writer = StdioWriter(loop, stdout_fd)
    await writer.open()
    stdin = StdinReader(loop, stdin_fd)
    stream = await stdin.open()
    writer.on_lost(stdin.stop)  # nobody is reading: stop as if stdin had closed
    server.protocol.set_writer(writer)
    hub = server.hub = Hub(service, server.worker, loop, server.protocol.notify, lambda: writer.paused)
    hub.watcher = Watcher(loop, hub.on_folder_change)
    writer.on_drain(hub.flush_all)
    try:
        return await Dispatcher(server, writer).run(FrameReader(stream))
    finally:
        # Requests already taken are answered before the process goes (a command
        # may be durable already); then nothing more is pushed.
        await server.finish_requests()
        await writer.flush(FLUSH_TIMEOUT)
        server.worker.shutdown(wait=False, cancel_futures=True)


def run(service: Service, stdin_fd: int, stdout_fd: int) -> int:
    return asyncio.run(serve(service, stdin_fd, stdout_fd))
