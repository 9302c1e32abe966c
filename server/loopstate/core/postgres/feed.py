"""The PostgreSQL store's change feed: LISTEN on the project's channel, wake on NOTIFY.

``loopstate.append`` queues a NOTIFY with ``{"project", "stream", "sequence"}``, which the
server delivers to listeners when the append's transaction commits (never for one rolled
back). A notification is only a wake: readers then catch up after the last sequence they
hold, which is what finds the events. So a notification that never arrives loses nothing
as long as something wakes the reader, and the feed makes sure something does: when its
connection is lost (the server restarted, the backend was killed, the network dropped) it
reconnects with a doubling delay, LISTENs again, and wakes its readers once (``None``:
"anything may have grown while I was away"), so they pull what they missed.

The feed's thread sleeps in ``select`` on the connection's socket, so a notification wakes it
the moment its bytes arrive and an idle feed wakes not at all (the driver's own wait for
notifications wakes ten times a second to look at its timeout); ``close`` NOTIFYs the
channel itself to wake it at once.
"""

from __future__ import annotations

import secrets
import select
import threading
from collections.abc import Sequence
from typing import Any

import psycopg
from psycopg import sql

from loopstate.core import canonical
from loopstate.core.backend import ChangeFn, Wakes
from loopstate.core.errors import LoopstateError
from loopstate.core.postgres.events import Connection, Events, client_name
from loopstate.core.postgres.schema import channel_for

RECONNECT_FIRST = 0.05  # seconds before the first reconnect; doubled per failure, up to RECONNECT_MOST
RECONNECT_MOST = 2.0
IDLE_WAKE = 30.0  # seconds a quiet connection's thread sleeps between checks (close() does not wait for it)


class NotifyFeed:
    """``ChangeFeed`` (core/backend.py) of one project's streams in one PostgreSQL store."""

    def __init__(self, events: Events, project: str, names: Sequence[str] | None, on_change: ChangeFn | None) -> None:
        self._events = events
        self._project = project
        self._channel = channel_for(project)
        self._names = None if names is None else frozenset(names)
        self._wakes = Wakes(on_change)
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
        return self._wakes.wait(timeout)

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
                    self._wakes.wake(None)  # back after a loss: whatever grew meanwhile is pulled now
                self._listening.set()
                delay = RECONNECT_FIRST
                while not self._closing.is_set():
                    # What arrived (or was buffered with LISTEN's answer), without waiting; then
                    # sleep until the socket has more (a lost connection is readable too).
                    for note in conn.notifies(timeout=0):
                        self._heard(note.payload)
                    if not self._closing.is_set():
                        select.select([conn.fileno()], [], [], IDLE_WAKE)
            except (psycopg.Error, LoopstateError, OSError, ValueError) as exc:  # ValueError: select on a closed fd
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
            self._wakes.wake(None)  # not a payload of ours: a wake costs a catch-up, a missed one could cost more
            return
        if project == self._project and (self._names is None or stream in self._names):
            self._wakes.wake(stream)
