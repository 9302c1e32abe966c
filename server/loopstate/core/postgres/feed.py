"""The PostgreSQL store's change feed: LISTEN on the project's channel, wake on NOTIFY.

``loopstate.append`` queues a NOTIFY with ``{"project", "stream", "sequence"}``, which the
server delivers to listeners when the append's transaction commits (never for one rolled
back). A notification is only a wake: readers then catch up after the last sequence they
hold, which is what finds the events. So a notification that never arrives loses nothing
as long as something wakes the reader, and the feed makes sure something does: when its
connection is lost (the server restarted, the backend was killed, the network dropped) it
reconnects with a doubling delay, LISTENs again, and wakes its readers once (``None``:
"anything may have grown while I was away"), so they pull what they missed.

The feed's thread sleeps in the server's socket; ``close`` NOTIFYs the channel itself to
wake it at once, so an idle feed spends no CPU on polling.
"""

from __future__ import annotations

import secrets
import threading
from collections.abc import Sequence
from typing import Any

import psycopg
from psycopg import sql

from loopstate.core import canonical
from loopstate.core.backend import ChangeFn
from loopstate.core.errors import LoopstateError
from loopstate.core.postgres.events import Connection, Events, client_name
from loopstate.core.postgres.schema import channel_for

RECONNECT_FIRST = 0.05  # seconds before the first reconnect; doubled per failure, up to RECONNECT_MOST
RECONNECT_MOST = 2.0
IDLE_WAKE = 30.0  # seconds between the thread's checks on a quiet connection (close() does not wait for it)


class NotifyFeed:
    """``ChangeFeed`` (core/backend.py) of one project's streams in one PostgreSQL store."""

    def __init__(self, events: Events, project: str, names: Sequence[str] | None, on_change: ChangeFn | None) -> None:
        self._events = events
        self._project = project
        self._channel = channel_for(project)
        self._names = None if names is None else frozenset(names)
        self._on_change = on_change
        self._changed = threading.Event()
        self._closing = threading.Event()
        self._listening = threading.Event()
        self._token = secrets.token_hex(8)  # close()'s own wake, told apart from appends' notifications
        self.connects = 0  # (re)connections made: a view may show it, the fault tests read it
        self.lost: str | None = None  # why the last connection went, while it is being replaced
        self._thread = threading.Thread(target=self._run, name="loopstate-pg-feed", daemon=True)
        self._thread.start()
        # Listening before the constructor returns (or the first attempt failed): an append
        # committed after this is seen, as a file watcher sees a write after it is armed.
        self._listening.wait(events.connect_timeout + 1)

    def wait(self, timeout: float | None = None) -> bool:
        if not self._changed.wait(timeout):
            return False
        self._changed.clear()
        return True

    def close(self) -> None:
        self._closing.set()
        try:
            with self._events.connect(name=f"{client_name()} feed close"[:63]) as conn:
                conn.execute("SELECT pg_notify(%s, %s)", (self._channel, self._token))
        except (psycopg.Error, LoopstateError):
            pass  # the server is gone: the thread's connection is failing too, and sees _closing
        self._thread.join(IDLE_WAKE + 5)

    # the thread ----------------------------------------------------------------------------

    def _run(self) -> None:
        delay = RECONNECT_FIRST
        while not self._closing.is_set():
            conn: Connection | None = None
            try:
                conn = self._events.connect(name=f"{client_name()} feed"[:63])
                conn.execute(sql.SQL("LISTEN {}").format(sql.Identifier(self._channel)))
                self.connects += 1
                if self.connects > 1:
                    self.lost = None
                    self._wake(None)  # back after a loss: whatever grew meanwhile is pulled now
                self._listening.set()
                delay = RECONNECT_FIRST
                while not self._closing.is_set():
                    for note in conn.notifies(timeout=IDLE_WAKE):
                        self._heard(note.payload)
                        if self._closing.is_set():
                            break
            except (psycopg.Error, LoopstateError) as exc:
                self.lost = " ".join(str(exc).split()) or type(exc).__name__
                self._listening.set()
                if self._closing.wait(delay):
                    break
                delay = min(delay * 2, RECONNECT_MOST)
            finally:
                if conn is not None:
                    conn.close()

    def _heard(self, payload: str) -> None:
        if payload == self._token:
            return
        try:
            hint: Any = canonical.decode(payload)
            project, stream = hint["project"], hint["stream"]
        except (ValueError, KeyError, TypeError):
            self._wake(None)  # not a payload of ours: a wake costs a catch-up, a missed one could cost more
            return
        if project == self._project and (self._names is None or stream in self._names):
            self._wake(stream)

    def _wake(self, stream: str | None) -> None:
        self._changed.set()
        if self._on_change is not None:
            self._on_change(stream)
