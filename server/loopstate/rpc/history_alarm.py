"""The sidecar as a witness: every stream it hears news of is checked against the history it saw.

When a followed stream changes (this server's own append or another process's,
caught up), the server's witness (service/witness.py, watcher ``sidecar``)
compares the stream's newest signed checkpoint with its own Merkle tree of the
stream. A checkpoint that does not extend what was seen, or a purge, is pushed
to every client as ``loopstate/historyAlarm`` (once per checkpoint), so an
editor can show it where the user looks. The check runs as a job of the
service worker after the news, never inside the command that caused it, and
reads two small files a stream when no new checkpoint was signed.
"""

from __future__ import annotations

import asyncio
import logging
from concurrent.futures import Executor
from typing import Any, Callable

import msgspec

from loopstate_protocol import methods
from loopstate_protocol.messages import HistoryAlarmNotification

from loopstate.core.news import News
from loopstate.core.project import Project

log = logging.getLogger("loopstate.rpc")


class HistoryAlarms:
    def __init__(self, worker: Executor, loop: asyncio.AbstractEventLoop,
                 notify: Callable[[str, Any], None]) -> None:
        self.worker = worker
        self.loop = loop
        self.notify = notify

    def on_news(self, project: Project, stream: str, news: News) -> None:
        """A service listener (on the worker thread): check this stream once the current job is done."""
        try:
            self.worker.submit(self._check, project, stream)
        except RuntimeError:  # the worker is shutting down: nothing more is pushed
            pass

    def _check(self, project: Project, stream: str) -> None:
        from loopstate.service import witness

        try:
            verdict = witness.check(project, stream, "sidecar")
        except Exception as exc:  # noqa: BLE001 (a witness fault is logged; the server goes on)
            log.warning("the history witness of %s failed: %s", stream, exc)
            return
        if verdict is None or (verdict.ok and not verdict.purged):
            return
        params = msgspec.to_builtins(HistoryAlarmNotification(
            root=project.root, stream=stream, rewritten=not verdict.ok, message=verdict.message))
        if not self.loop.is_closed():
            self.loop.call_soon_threadsafe(self.notify, methods.HISTORY_ALARM, params)
