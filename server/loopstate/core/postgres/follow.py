"""Following a project's appends: LISTEN for the hint, then pull after the last sequence seen.

A notification is only a hint that a stream grew; the pull is the truth. On (re)connecting,
the follower LISTENs first and then compares every stream's head with the last sequence it
delivered, so whatever was committed while it was away (or whose notification was lost) is
delivered then, and nothing twice. Events are delivered in order, per stream, exactly once
per follower, through ``on_events(stream, events)``.

Two connections: one only LISTENs (and waits in ``notifies``), the other reads. A
notification that arrives while the reader is busy waits in the listening connection's
socket; none is dropped by reading on the same connection.
"""

from __future__ import annotations

import threading
from collections.abc import Callable
from typing import Any

import psycopg
from psycopg import sql

from loopstate.core import canonical
from loopstate.core.errors import LoopstateError
from loopstate.core.postgres.schema import channel_for
from loopstate.core.postgres.store import PostgresEvents, StoredEvent

EventsFn = Callable[[str, list[StoredEvent]], None]
RECONNECT_FIRST = 0.05  # seconds before the first reconnect; doubled per failure up to RECONNECT_MOST
RECONNECT_MOST = 2.0
IDLE_WAKE = 1.0  # seconds a quiet follower sleeps in the server's socket before checking it should stop (~0 CPU)


class Follower:
    """Delivers every event appended to ``project`` after ``known`` (stream -> last sequence)."""

    def __init__(
        self, url: str, project: str, on_events: EventsFn, *, known: dict[str, int] | None = None,
        on_state: Callable[[str, str | None], None] | None = None,
    ) -> None:
        """``on_state(state, detail)``: told "listening" after each (re)connect and catch-up and
        "lost" (with the reason) when the connection goes; a live view shows it."""
        self.reader = PostgresEvents(url, application_name="loopstate-follow")
        self.where = self.reader.where
        self.project = project
        self.on_events = on_events
        self.on_state = on_state
        self.known: dict[str, int] = dict(known or {})
        self.listener: psycopg.Connection[tuple[Any, ...]] | None = None
        self.connects = 0  # how many times it has (re)connected: the fault tests read it
        self._stop = threading.Event()

    def stop(self) -> None:
        """Ask ``run`` to return; it does within IDLE_WAKE seconds."""
        self._stop.set()

    def run(self) -> None:
        """Follow until ``stop``: connect, LISTEN, catch up, then pull on every hint; on a lost
        connection wait a little (doubling) and do it all again."""
        delay = RECONNECT_FIRST
        while not self._stop.is_set():
            try:
                self._listen()
                delay = RECONNECT_FIRST
                self._wait_loop()
            except (psycopg.Error, LoopstateError) as exc:
                self._drop(exc)
                if self._stop.wait(delay):
                    break
                delay = min(delay * 2, RECONNECT_MOST)
        self._drop(None)
        self.reader.close()

    def _listen(self) -> None:
        self.listener = self.reader.connect()
        self.listener.execute(sql.SQL("LISTEN {}").format(sql.Identifier(channel_for(self.project))))
        self.connects += 1
        # LISTEN first, then the pull: whatever commits after this point is both notified and pulled.
        self.catch_up()
        if self.on_state is not None:
            self.on_state("listening", None)

    def _wait_loop(self) -> None:
        listener = self.listener
        assert listener is not None
        while not self._stop.is_set():
            grown: dict[str, int] = {}
            for note in listener.notifies(timeout=IDLE_WAKE, stop_after=1):
                self._note(note.payload, grown)
            # Whatever else has arrived by now is taken in the same pass, without waiting.
            for note in listener.notifies(timeout=0):
                self._note(note.payload, grown)
            for stream, sequence in grown.items():
                if sequence > self.known.get(stream, 0):
                    self.pull(stream)

    def _note(self, payload: str, grown: dict[str, int]) -> None:
        try:
            hint = canonical.decode(payload)
            project, stream, sequence = hint["project"], hint["stream"], int(hint["sequence"])
        except (ValueError, KeyError, TypeError):
            return  # not ours (someone NOTIFYing on the channel): the pull is the truth anyway
        if project == self.project:
            grown[stream] = max(sequence, grown.get(stream, 0))

    def catch_up(self) -> None:
        """Pull every stream whose head is past what was delivered."""
        for stream, (sequence, _) in self.reader.heads(self.project).items():
            if sequence > self.known.get(stream, 0):
                self.pull(stream)

    def pull(self, stream: str) -> None:
        for page in self.reader.pages(self.project, stream, after=self.known.get(stream, 0)):
            self.known[stream] = page[-1].sequence
            self.on_events(stream, page)

    def _drop(self, exc: BaseException | None) -> None:
        listener, self.listener = self.listener, None
        if listener is not None:
            listener.close()
        self.reader.close()
        if exc is not None and self.on_state is not None:
            self.on_state("lost", " ".join(str(exc).split()))
