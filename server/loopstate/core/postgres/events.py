"""The events table of one PostgreSQL store: connections, the append call, paged reads, heads.

Each thread gets its own connection (opened on first use, reopened after it is lost), so a
thread's exclusive section is a transaction on its connection: what the thread reads and
appends inside it commits together, and an append it makes there re-enters the section's
lock instead of waiting for itself. Connections carry ``lock_timeout`` (the project's lock
wait), so every wait for a section is bounded and ends in LOCK_TIMEOUT naming the holder.

Faults, and what a caller sees:
- The server is down or refuses us: STORE_IO_ERROR naming the URL without its password.
- The connection is lost during an append made on its own (not inside a section), so
  whether it committed is unknown: it is sent again once on a new connection, and
  ``loopstate.append`` recognises the first attempt's commit (its request id with the same
  fingerprint, or without one the batch's own hashes in place), so it never lands twice.
  If the second attempt fails too: STORE_IO_ERROR with ``outcome="unknown"``; the caller's
  retry with the same request id is just as exact.
- Another writer moved the head: a conflict with the head found, nothing written.
"""

from __future__ import annotations

import contextlib
import os
import socket
import threading
import weakref
from collections.abc import Iterator, Sequence
from typing import Any, NamedTuple

import psycopg
from psycopg import errors as pg_errors

from loopstate_protocol.errors import ErrorCode

from loopstate.core.errors import LoopstateError
from loopstate.core.postgres import schema
from loopstate.core.store_url import redacted as redact

READ_PAGE = 2000  # events fetched per round trip by ``pages``, at most
FIRST_PAGE = 100  # the first page of a read; each next one doubles, up to READ_PAGE
CONNECT_TIMEOUT = 5  # seconds before a connection attempt to a silent server gives up

Connection = psycopg.Connection[tuple[Any, ...]]


class Row(NamedTuple):
    """One stored event as the table has it."""

    sequence: int
    event_hash: str
    line: bytes
    start: int


class Outcome(NamedTuple):
    """What ``loopstate.append`` answered: ``status`` is appended, duplicate, reused or conflict;
    ``first``/``last`` the batch's sequences (the earlier request's, for duplicate and reused);
    ``head`` the stream's head after the call (for a conflict: the head found)."""

    status: str
    first: int | None
    last: int
    head_hash: str | None
    first_start: int | None


def client_name() -> str:
    """The ``application_name`` of our connections: a LOCK_TIMEOUT names the holder by it."""
    return f"loopstate {socket.gethostname()[:32]} pid {os.getpid()}"[:63]


class Events:
    """Connections to one store and the statements every other module sends through them."""

    def __init__(self, url: str, *, lock_timeout: float, connect_timeout: float = CONNECT_TIMEOUT) -> None:
        self.url = url
        self.where = redact(url)
        self.lock_timeout = lock_timeout
        self.connect_timeout = connect_timeout
        self._local = threading.local()
        self._all: weakref.WeakSet[Connection] = weakref.WeakSet()
        self._guard = threading.Lock()

    # connections -----------------------------------------------------------------------------

    def connect(self, *, name: str | None = None) -> Connection:
        """A new autocommit connection, the schema checked (STORE_IO_ERROR if unreachable)."""
        try:
            conn = psycopg.connect(
                self.url, autocommit=True, application_name=name or client_name(),
                connect_timeout=max(1, round(self.connect_timeout)),
                options=f"-c lock_timeout={max(1, round(self.lock_timeout * 1000))}",
            )
        except psycopg.Error as exc:
            raise self.unreachable(exc) from None
        try:
            schema.ensure(conn, self.where)
        except psycopg.Error as exc:
            conn.close()
            raise self.unreachable(exc) from None
        except BaseException:
            conn.close()
            raise
        with self._guard:
            self._all.add(conn)
        return conn

    @property
    def conn(self) -> Connection:
        """This thread's connection, opened (again) if it has none or lost it."""
        conn: Connection | None = getattr(self._local, "conn", None)
        if conn is None or conn.closed or conn.broken:
            if conn is not None:
                conn.close()
            conn = self._local.conn = self.connect()
        return conn

    def drop(self) -> None:
        """Forget this thread's connection (after it was lost: the next use opens a new one)."""
        conn: Connection | None = getattr(self._local, "conn", None)
        self._local.conn = None
        if conn is not None:
            conn.close()

    def close(self) -> None:
        with self._guard:
            every = list(self._all)
            self._all = weakref.WeakSet()
        for conn in every:
            conn.close()
        self._local = threading.local()

    def unreachable(self, exc: BaseException, doing: str = "connect to") -> LoopstateError:
        return LoopstateError(
            ErrorCode.STORE_IO_ERROR,
            f"cannot {doing} the PostgreSQL store at {self.where}: {reason_of(exc)}; check that the server is up "
            "and that LOOPSTATE_STORE (or the project's .loopstate/store.json) names it",
            store=self.where,
        )

    def outcome_unknown(self, exc: BaseException, stream: str) -> LoopstateError:
        return LoopstateError(
            ErrorCode.STORE_IO_ERROR,
            f"lost the PostgreSQL store at {self.where} during an append to stream {stream!r} ({reason_of(exc)}); "
            "whether it committed is unknown: retry it with the same request id once the server is back",
            store=self.where, stream=stream, outcome="unknown",
        )

    # statements ------------------------------------------------------------------------------

    def call_append(
        self, conn: Connection, project: str, stream: str, after: tuple[int, str | None], lines: Sequence[bytes],
        hashes: Sequence[str], prevs: Sequence[str | None], request_id: str | None, fingerprint: str | None,
    ) -> Outcome:
        """One call of ``loopstate.append`` on ``conn`` (its transaction, or one of its own)."""
        try:
            row = conn.execute(
                "SELECT status, head_sequence, head_hash, first_sequence, first_start "
                "FROM loopstate.append(%s, %s, %s, %s, %s, %s, %s, %s, %s)",
                (project, stream, after[0], after[1], list(lines), list(hashes), list(prevs), request_id, fingerprint),
            ).fetchone()
        except pg_errors.LockNotAvailable:
            raise self.lock_timeout_error(project, stream) from None
        assert row is not None
        status, last, head_hash, first, first_start = row
        return Outcome(str(status), first, int(last), head_hash, first_start)

    @property
    def in_section(self) -> bool:
        """Whether this thread is inside ``transaction`` (its statements join that transaction)."""
        return getattr(self._local, "depth", 0) > 0

    @contextlib.contextmanager
    def transaction(self, project: str, section: str, *, caller_locks: bool = False) -> Iterator[Connection]:
        """This thread's connection in a transaction holding ``section``'s lock, in two round trips.

        The pipeline is driven by hand, not by the driver's transaction helper, which syncs on
        entering and leaving each nested level (five round trips a mutation, measured): the lock
        and the first query the caller fetches (a catch-up's read) travel in one round trip and
        run in order; whatever the caller sends without fetching (an append) travels with the
        commit in the second. A section opened inside another on the same thread is a savepoint
        of the outer transaction (the lock is re-entered, nothing waits for itself).

        ``caller_locks``: the caller's first statement takes the lock itself (``pages(lock=True)``,
        a ledger's mutation: one statement less in the round trip). Such a section, outermost,
        sends no BEGIN and no COMMIT: the statements of a pipeline up to its sync are one
        transaction by the protocol's own rule, which the sync at the pipeline's end commits
        (fetching inside the pipeline asks for a flush, not a sync, so it does not end it):
        two statements less to send, parse and acknowledge (measured side by side: about 25 us
        less of the client's CPU a mutation, of some 230). Until then nothing is committed: a
        failure rolls the transaction back (``undo``), a lost connection leaves nothing behind.
        A section opened inside it turns it into a transaction block first (BEGIN inside such a
        transaction keeps what it did), as a savepoint needs one; the outer one then ends with
        a COMMIT."""
        conn = self.conn
        local = self._local
        depth: int = getattr(local, "depth", 0)
        try:
            try:
                if depth and local.implicit:
                    # Before the nested pipeline, whose start syncs: after this BEGIN, that sync commits nothing.
                    conn.execute("BEGIN")
                    local.implicit = False
                with conn.pipeline() as pipeline:
                    if depth == 0:
                        local.implicit = caller_locks
                        if not caller_locks:
                            conn.execute("BEGIN")
                    else:
                        conn.execute(f"SAVEPOINT section_{depth}")
                    if not caller_locks:
                        self.lock_section(conn, project, section)
                    local.depth = depth + 1
                    try:
                        yield conn
                        if depth:
                            conn.execute(f"RELEASE SAVEPOINT section_{depth}")
                            pipeline.sync()  # the outer transaction goes on: what failed must fail here
                        elif not local.implicit:
                            conn.execute("COMMIT")  # synced by the pipeline's end, which raises what failed
                    except BaseException:
                        undo(conn, pipeline, depth, implicit=depth == 0 and local.implicit)
                        raise
                    finally:
                        local.depth = depth
            except BaseException:
                if depth == 0 and not (conn.broken or conn.closed) \
                        and conn.info.transaction_status != psycopg.pq.TransactionStatus.IDLE:
                    conn.execute("ROLLBACK")  # a statement sent with the COMMIT failed: the COMMIT was skipped
                raise
        except psycopg.errors.LockNotAvailable:
            raise self.lock_timeout_error(project, section) from None
        except psycopg.errors.RaiseException as exc:
            raise self.refusal_of(exc) from None
        except psycopg.OperationalError as exc:
            self.drop()
            raise self.unreachable(exc, f"finish section {section!r} in") from None

    def send_append(
        self, conn: Connection, project: str, stream: str, after: tuple[int, str | None], lines: Sequence[bytes],
        hashes: Sequence[str], prevs: Sequence[str | None], request_id: str | None, fingerprint: str | None,
    ) -> None:
        """Queue ``loopstate.append_in_section`` in ``conn``'s pipelined transaction without waiting:
        its answer comes with the next sync (at the latest the commit's), and anything but an
        append raises there (``refusal_of`` names it) and rolls the transaction back."""
        conn.execute(
            "SELECT loopstate.append_in_section(%s, %s, %s, %s, %s, %s, %s, %s, %s)",
            (project, stream, after[0], after[1], list(lines), list(hashes), list(prevs), request_id, fingerprint),
        )

    def refusal_of(self, exc: psycopg.errors.RaiseException) -> LoopstateError:
        """The LoopstateError of an append refused inside a mutation (see ``send_append``)."""
        status = exc.diag.message_hint or ""
        code = ErrorCode.REQUEST_ID_REUSED if status == "reused" else ErrorCode.CONFLICT
        return LoopstateError(
            code, f"the PostgreSQL store at {self.where} refused an append: {exc.diag.message_primary}; "
            "nothing of the mutation was kept", store=self.where, status=status,
        )

    def lock_section(self, conn: Connection, project: str, section: str) -> None:
        """Take ``section``'s lock for the rest of ``conn``'s transaction (bounded by lock_timeout)."""
        try:
            conn.execute("SELECT pg_advisory_xact_lock(loopstate.section_key(%s, %s))", (project, section))
        except pg_errors.LockNotAvailable:
            raise self.lock_timeout_error(project, section) from None

    def lock_timeout_error(self, project: str, section: str) -> LoopstateError:
        holder = self.holder(project, section)
        return LoopstateError(
            ErrorCode.LOCK_TIMEOUT,
            f"timed out after {self.lock_timeout:g}s waiting for section {section!r} of the PostgreSQL store at "
            f"{self.where}: held by {holder or 'another client'}; wait for it to finish, or end that session",
            store=self.where, section=section, holder=holder,
        )

    def holder(self, project: str, section: str) -> str | None:
        """Who holds ``section``'s lock now, as the server knows them (name, pid, since when)."""
        try:
            with self.connect(name=f"{client_name()} lock probe"[:63]) as conn:
                row = conn.execute(
                    "SELECT a.application_name, a.pid, a.client_addr::text, a.xact_start "
                    "FROM pg_locks l JOIN pg_stat_activity a ON a.pid = l.pid, "
                    "     (SELECT loopstate.section_key(%s, %s) AS k) key "
                    "WHERE l.locktype = 'advisory' AND l.granted AND l.objsubid = 1 "
                    "  AND l.classid = ((key.k >> 32) & 4294967295)::bigint::oid "
                    "  AND l.objid = (key.k & 4294967295)::bigint::oid LIMIT 1",
                    (project, section),
                ).fetchone()
        except (psycopg.Error, LoopstateError):
            return None
        if row is None:
            return None
        name, pid, addr, since = row
        return f"{name or 'a client'} (server pid {pid}{', from ' + addr if addr else ''}, since {since:%H:%M:%S})"

    def pages(
        self, conn: Connection, project: str, stream: str, *, after: int = 0, size: int = READ_PAGE, lock: bool = False,
    ) -> Iterator[list[Row]]:
        """The events after ``after`` in pages of ``size``: memory stays flat however long the stream.
        Paged by sequence, not by a cursor held open: commits are gapless, so none is skipped.
        ``lock``: the first page is read by ``loopstate.lock_and_read``, which takes the stream's
        lock first and reads after it (a statement of its own, so it sees every commit before it).
        Pages grow from ``FIRST_PAGE`` to ``size``: a reader that stops early (a log page, a
        catch-up that finds a few events) is sent a few rows, a long read few round trips."""
        first, step = lock, min(FIRST_PAGE, size)
        while True:
            page = self.page(conn, project, stream, after, step, lock=first)
            first = False
            if page:
                yield page
            if len(page) < step:
                return
            after = page[-1].sequence
            step = min(step * 2, size)

    def page(self, conn: Connection, project: str, stream: str, after: int, limit: int, *, lock: bool = False) -> list[Row]:
        rows = conn.execute(
            "SELECT sequence, event_hash, line, start FROM loopstate.lock_and_read(%s, %s, %s, %s)" if lock else
            "SELECT sequence, event_hash, line, start FROM loopstate.events "
            "WHERE project = %s AND stream = %s AND sequence > %s ORDER BY sequence LIMIT %s",
            (project, stream, after, limit),
        ).fetchall()
        return [Row(int(s), str(h), bytes(line), int(start)) for s, h, line, start in rows]

    def at(self, conn: Connection, project: str, stream: str, sequence: int) -> Row | None:
        """The event at ``sequence`` (None if there is none)."""
        page = self.page(conn, project, stream, sequence - 1, 1)
        return page[0] if page and page[0].sequence == sequence else None

    def line_at(self, conn: Connection, project: str, stream: str, start: int) -> bytes | None:
        """The line of the event that starts at byte ``start`` (None if none does; index ``events_start``)."""
        row = conn.execute(
            "SELECT line FROM loopstate.events WHERE project = %s AND stream = %s AND start = %s",
            (project, stream, start),
        ).fetchone()
        return None if row is None else bytes(row[0])

    def head(self, conn: Connection, project: str, stream: str) -> Row | None:
        """The stream's last event (None for a stream with none)."""
        row = conn.execute(
            "SELECT sequence, event_hash, line, start FROM loopstate.events WHERE project = %s AND stream = %s "
            "ORDER BY sequence DESC LIMIT 1", (project, stream),
        ).fetchone()
        return None if row is None else Row(int(row[0]), str(row[1]), bytes(row[2]), int(row[3]))

    def end_of(self, conn: Connection, project: str, stream: str) -> int:
        """The byte offset after the stream's last event now (0 for none): a long read's whole."""
        row = self.head(conn, project, stream)
        return 0 if row is None else row.start + len(row.line) + 1

    def request(self, conn: Connection, project: str, stream: str, request_id: str) -> tuple[str | None, list[Row]]:
        """The fingerprint and events of an earlier request with this id (``(None, [])``: none)."""
        rows = conn.execute(
            "SELECT sequence, event_hash, line, start, fingerprint FROM loopstate.events "
            "WHERE project = %s AND stream = %s AND request_id = %s ORDER BY sequence",
            (project, stream, request_id),
        ).fetchall()
        if not rows:
            return None, []
        return rows[0][4], [Row(int(s), str(h), bytes(line), int(start)) for s, h, line, start, _ in rows]

    def request_spans(self, conn: Connection, project: str, stream: str, *, through: int) -> list[tuple[str, int, int]]:
        """Where each request up to sequence ``through`` begins: (request id, start, end) of its
        first event, in stream order (index ``events_request``; no line is sent)."""
        rows = conn.execute(
            "SELECT request_id, start, start + octet_length(line) + 1 FROM loopstate.events "
            "WHERE project = %s AND stream = %s AND request_id IS NOT NULL AND sequence <= %s ORDER BY sequence",
            (project, stream, through),
        ).fetchall()
        spans, last = [], None
        for request_id, start, end in rows:
            if request_id != last:  # a request's later events add nothing to the index
                spans.append((str(request_id), int(start), int(end)))
                last = request_id
        return spans

    def streams(self, conn: Connection, project: str) -> list[str]:
        rows = conn.execute("SELECT stream FROM loopstate.streams WHERE project = %s ORDER BY stream", (project,)).fetchall()
        return [str(row[0]) for row in rows]


def undo(conn: Connection, pipeline: psycopg.Pipeline, depth: int, *, implicit: bool = False) -> None:
    """Roll back what a section sent (the whole transaction, or to its savepoint when nested).
    An ``implicit`` transaction (no BEGIN sent) would be committed by a sync, so it is made a
    transaction block first (a no-op after a failed statement: the server skips to the sync).
    Then a sync, which ends the pipeline's aborted state after a failed statement (its own error
    is the one already raised), then the rollback; a connection already lost is left as it is."""
    if conn.broken or conn.closed:
        return
    if implicit:
        with contextlib.suppress(psycopg.Error):
            conn.execute("BEGIN")
    with contextlib.suppress(psycopg.Error):
        pipeline.sync()
    if conn.info.transaction_status == psycopg.pq.TransactionStatus.IDLE:
        return  # the COMMIT itself failed, which ends the transaction (or a failed statement did)
    with contextlib.suppress(psycopg.Error):
        conn.execute("ROLLBACK" if depth == 0 else f"ROLLBACK TO SAVEPOINT section_{depth}")
        pipeline.sync()


def reason_of(exc: BaseException) -> str:
    """A one-line reason from a driver error (its text, without libpq's line breaks)."""
    return " ".join(str(exc).split()) or type(exc).__name__
