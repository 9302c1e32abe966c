"""Streams of events in PostgreSQL: append at an expected head, read after a sequence, list heads.

One ``PostgresEvents`` holds one connection (opened on first use, reopened after it is
lost) and is used by one thread at a time. Appends are one call of ``loopstate.append``
(``schema.py``) in its own transaction, or inside ``exclusive``: a transaction that holds
the stream's lock while the caller reads what others appended, decides, and appends (what a
lease or kill-switch check needs: the check and the append commit together or not at all).

Faults, and what a caller sees:
- The server is down or refuses us: STORE_IO_ERROR naming the URL without its password.
- The connection is lost during an append, so whether it committed is unknown: the append
  is sent again once on a new connection. ``loopstate.append`` itself recognises the first
  attempt's commit (its request id with the same fingerprint, or, without a request id,
  the batch's own hashes at the expected place), so the retry never appends twice and
  answers as the first attempt would have. Only when the second attempt fails too does the
  caller get STORE_IO_ERROR with ``outcome="unknown"``, and its own retry with the same
  request id is just as exact.
- Another writer moved the head: CONFLICT with the head found, nothing written.
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from typing import Any, NamedTuple

import psycopg
from psycopg import errors as pg_errors

from loopstate_protocol.errors import ErrorCode

from loopstate.core.errors import LoopstateError
from loopstate.core.postgres import schema
from loopstate.core.postgres.url import redact

READ_PAGE = 2000  # events fetched per round trip by ``read``
CONNECT_TIMEOUT = 5  # seconds before a connection attempt to a silent server gives up

Connection = psycopg.Connection[tuple[Any, ...]]


class StoredEvent(NamedTuple):
    """One event as stored: its place in the chain and its exact canonical line."""

    sequence: int
    event_hash: str
    prev_hash: str | None
    line: bytes


class Appended(NamedTuple):
    """What an append did: ``first``..``last`` are the batch's sequences (also for a
    ``duplicate``: an exact retry, answered with the first attempt's place)."""

    first: int
    last: int
    head_hash: str | None
    duplicate: bool


class PostgresEvents:
    """The event table of one PostgreSQL store, through one connection."""

    def __init__(self, url: str, *, application_name: str = "loopstate", connect_timeout: float = CONNECT_TIMEOUT) -> None:
        self.url = url
        self.where = redact(url)
        self.application_name = application_name
        self.connect_timeout = connect_timeout
        self._conn: Connection | None = None

    # -- connections ---------------------------------------------------------------------

    def connect(self, *, autocommit: bool = True) -> Connection:
        """A new connection to the store, with the schema checked (STORE_IO_ERROR if unreachable)."""
        try:
            conn = psycopg.connect(
                self.url, autocommit=autocommit, application_name=self.application_name,
                connect_timeout=max(1, int(self.connect_timeout)),
            )
        except psycopg.Error as exc:
            raise self.unreachable(exc) from None
        try:
            schema.ensure(conn, self.where)
        except psycopg.Error as exc:
            conn.close()
            raise self.unreachable(exc) from None
        return conn

    def unreachable(self, exc: BaseException, doing: str = "connect to") -> LoopstateError:
        reason = " ".join(str(exc).split()) or type(exc).__name__
        return LoopstateError(
            ErrorCode.STORE_IO_ERROR,
            f"cannot {doing} the PostgreSQL store at {self.where}: {reason}; check that the server is up and "
            "that LOOPSTATE_STORE (or the project's store setting) names it",
            store=self.where,
        )

    @property
    def conn(self) -> Connection:
        """The connection, opened (again) if there is none or it was lost."""
        if self._conn is None or self._conn.closed or self._conn.broken:
            if self._conn is not None:
                self._conn.close()
            self._conn = self.connect()
        return self._conn

    def close(self) -> None:
        if self._conn is not None:
            self._conn.close()
            self._conn = None

    # -- appends -------------------------------------------------------------------------

    def append(
        self,
        project: str,
        stream: str,
        after: tuple[int, str | None],
        events: Sequence[tuple[bytes, str, str | None]],
        *,
        request_id: str | None = None,
        fingerprint: str | None = None,
    ) -> Appended:
        """Append ``events`` (line, its hash, the previous hash) right after ``after``
        (sequence, hash), in one transaction; see the module docstring for the faults."""
        try:
            return self._append_once(self.conn, project, stream, after, events, request_id, fingerprint)
        except psycopg.OperationalError:
            self.close()  # lost mid-call (or the server ended it): ask again on a new connection
        try:
            return self._append_once(self.conn, project, stream, after, events, request_id, fingerprint)
        except psycopg.OperationalError as exc:
            self.close()
            raise self._outcome_unknown(exc, stream) from None

    def _outcome_unknown(self, exc: BaseException, stream: str) -> LoopstateError:
        reason = " ".join(str(exc).split()) or type(exc).__name__
        return LoopstateError(
            ErrorCode.STORE_IO_ERROR,
            f"lost the PostgreSQL store at {self.where} during an append to stream {stream!r} ({reason}); "
            "whether it committed is unknown: retry it with the same request id once the server is back",
            store=self.where, stream=stream, outcome="unknown",
        )

    def _append_once(
        self, conn: Connection, project: str, stream: str, after: tuple[int, str | None],
        events: Sequence[tuple[bytes, str, str | None]], request_id: str | None, fingerprint: str | None,
    ) -> Appended:
        lines = [line for line, _, _ in events]
        hashes = [event_hash for _, event_hash, _ in events]
        prevs = [prev for _, _, prev in events]
        try:
            row = conn.execute(
                "SELECT status, head_sequence, head_hash, first_sequence FROM loopstate.append(%s, %s, %s, %s, %s, %s, %s, %s, %s)",
                (project, stream, after[0], after[1], lines, hashes, prevs, request_id, fingerprint),
            ).fetchone()
        except pg_errors.InvalidParameterValue as exc:
            raise LoopstateError(ErrorCode.INVALID_PARAMS, f"refused by the PostgreSQL store at {self.where}: "
                                 f"{exc.diag.message_primary}", store=self.where, stream=stream) from None
        assert row is not None
        status, head_sequence, head_hash, first = row
        if status == "appended":
            return Appended(first, head_sequence, head_hash, duplicate=False)
        if status == "duplicate":
            return Appended(first, head_sequence, head_hash, duplicate=True)
        if status == "reused":
            raise LoopstateError(
                ErrorCode.REQUEST_ID_REUSED,
                f"request id {request_id!r} was already used in stream {stream!r} for a different request "
                f"(sequences {first}-{head_sequence}); send a fresh request id for a new mutation",
                stream=stream, request_id=request_id,
            )
        # A conflict: unless it is this very batch, committed by an attempt whose answer was lost.
        if head_sequence >= after[0] + len(events):
            mine = self.read(project, stream, after=after[0], limit=len(events), conn=conn)
            if [e.event_hash for e in mine] == hashes:
                return Appended(after[0] + 1, after[0] + len(events), hashes[-1], duplicate=True)
        raise LoopstateError(
            ErrorCode.CONFLICT,
            f"stream {stream!r} moved on: its head is sequence {head_sequence}, not {after[0]}; "
            "catch up and decide again",
            stream=stream, expected=after[0], head=head_sequence,
        )

    @contextmanager
    def exclusive(self, project: str, stream: str) -> Iterator[Connection]:
        """A transaction holding the stream's append lock: what the caller reads in it stays
        the head until it commits, and appends made through ``append_in`` commit with it."""
        conn = self.conn
        try:
            with conn.transaction():
                conn.execute("SELECT pg_advisory_xact_lock(hashtextextended(%s || '/' || %s, 0))", (project, stream))
                yield conn
        except psycopg.OperationalError as exc:
            self.close()
            raise self.unreachable(exc, f"finish an exclusive section on stream {stream!r} in") from None

    def append_in(
        self, conn: Connection, project: str, stream: str, after: tuple[int, str | None],
        events: Sequence[tuple[bytes, str, str | None]], *, request_id: str | None = None,
        fingerprint: str | None = None,
    ) -> Appended:
        """``append`` inside an ``exclusive`` section: not retried (the section's transaction
        is the unit; a lost connection aborts all of it)."""
        return self._append_once(conn, project, stream, after, events, request_id, fingerprint)

    # -- reads ---------------------------------------------------------------------------

    def read(
        self, project: str, stream: str, *, after: int = 0, limit: int | None = None, conn: Connection | None = None,
    ) -> list[StoredEvent]:
        """The events after sequence ``after`` (at most ``limit``), in order."""
        if limit is not None:
            return self._page(conn or self.conn, project, stream, after, limit)
        out: list[StoredEvent] = []
        for page in self.pages(project, stream, after=after, conn=conn):
            out.extend(page)
        return out

    def pages(
        self, project: str, stream: str, *, after: int = 0, conn: Connection | None = None, size: int = READ_PAGE,
    ) -> Iterator[list[StoredEvent]]:
        """The events after ``after`` in pages of ``size``: memory stays flat however long the stream.
        Pages by sequence, not by an open cursor: commits are gapless, so none is skipped."""
        while True:
            page = self._page(conn or self.conn, project, stream, after, size)
            if not page:
                return
            yield page
            after = page[-1].sequence
            if len(page) < size:
                return

    def _page(self, conn: Connection, project: str, stream: str, after: int, limit: int) -> list[StoredEvent]:
        try:
            rows = conn.execute(
                "SELECT sequence, event_hash, prev_hash, line FROM loopstate.events "
                "WHERE project = %s AND stream = %s AND sequence > %s ORDER BY sequence LIMIT %s",
                (project, stream, after, limit),
            ).fetchall()
        except psycopg.OperationalError as exc:
            self.close()
            raise self.unreachable(exc, f"read stream {stream!r} from") from None
        return [StoredEvent(int(s), str(h), p, bytes(line)) for s, h, p, line in rows]

    def head(self, project: str, stream: str) -> tuple[int, str | None]:
        """(sequence, hash) of the stream's last event; (0, None) for a stream with none."""
        rows = self._query(
            "SELECT sequence, event_hash FROM loopstate.events WHERE project = %s AND stream = %s "
            "ORDER BY sequence DESC LIMIT 1", (project, stream), stream,
        )
        return (int(rows[0][0]), str(rows[0][1])) if rows else (0, None)

    def heads(self, project: str) -> dict[str, tuple[int, str]]:
        """Every stream of the project with its head, one index probe per stream."""
        rows = self._query(
            "SELECT s.stream, h.sequence, h.event_hash FROM loopstate.streams s "
            "CROSS JOIN LATERAL (SELECT e.sequence, e.event_hash FROM loopstate.events e "
            "  WHERE e.project = s.project AND e.stream = s.stream ORDER BY e.sequence DESC LIMIT 1) h "
            "WHERE s.project = %s ORDER BY s.stream", (project,), None,
        )
        return {str(name): (int(sequence), str(event_hash)) for name, sequence, event_hash in rows}

    def streams(self, project: str) -> list[str]:
        """The project's streams, by name."""
        rows = self._query("SELECT stream FROM loopstate.streams WHERE project = %s ORDER BY stream", (project,), None)
        return [str(row[0]) for row in rows]

    def _query(self, sql: str, params: tuple[Any, ...], stream: str | None) -> list[tuple[Any, ...]]:
        try:
            return self.conn.execute(sql, params).fetchall()  # type: ignore[arg-type]
        except psycopg.OperationalError as exc:
            self.close()
            raise self.unreachable(exc, f"read stream {stream!r} from" if stream else "read") from None
