"""A project's streams in PostgreSQL: the storage contract's ``Store`` (core/backend.py).

Rows are keyed by the project's id, so one database holds many projects. What this
module adds to the table access in ``events.py`` is the contract's checks: sealed lines
are verified (canonical, re-hashed, linked, whole batches: ``verify_chain``) before they
are sent, reads are verified as they are read, and a head that moved is a ``HeadConflict``.
"""

from __future__ import annotations

import contextlib
from collections.abc import Callable, Iterator, Sequence
from typing import TYPE_CHECKING, Any, TypeVar

import psycopg

from loopstate_protocol.errors import ErrorCode

from loopstate.core.backend import EMPTY, ChangeFn, Head, HeadConflict, RecordFn, StoredEvent, verify_chain
from loopstate.core.chain import ChainError, ChainLayout, Position
from loopstate.core.errors import LoopstateError
from loopstate.core.postgres.events import READ_PAGE, Connection, Events, Outcome, client_name
from loopstate.core.postgres.feed import NotifyFeed
from loopstate.core.postgres.ledger import PostgresLedger
from loopstate.core.postgres.rows import check_alone, check_row, rebase, request_of
from loopstate.core.postgres.schema import channel_for
from loopstate.core.project import Project, check_stream_name
from loopstate.core.record import ProgressFn

if TYPE_CHECKING:
    from loopstate.core.snapshot import Codec

T = TypeVar("T")


def open_store(url: str, project: Project) -> PostgresStore:
    """The opener ``core/stores.py`` calls for ``postgresql://`` (and ``postgres://``) URLs.
    Connects lazily: nothing reaches the server until the first read or write."""
    return PostgresStore(url, project)


class PostgresStore:
    """One project's streams in one PostgreSQL database (``Store`` in ``core/backend.py``)."""

    def __init__(self, url: str, project: Project) -> None:
        self.events = Events(url, lock_timeout=project.lock_timeout)
        self.url = self.events.where
        self.project = project
        self.key = project.project_id

    # streams -------------------------------------------------------------------------------

    def stream_names(self) -> list[str]:
        return self._reading(lambda conn: self.events.streams(conn, self.key), "list the streams of")

    def open_ledger(
        self, name: str, layout: ChainLayout, *, on_record: RecordFn | None = None,
        on_reset: Callable[[], None] | None = None, keep_requests: bool = True, announce_history: bool = True,
        snapshots: Codec | None = None, news_limit: int | None = None,
    ) -> PostgresLedger:
        """``snapshots``: start from this machine's snapshot of the stream and keep it (``snapshots.py``)."""
        return PostgresLedger(self.events, self.key, self.project, check_stream_name(name), layout, on_record=on_record, on_reset=on_reset,
                              announce_history=announce_history, news_limit=news_limit, keep_requests=keep_requests,
                              snapshots=snapshots)

    def head(self, name: str, layout: ChainLayout) -> Head:
        row = self._reading(lambda conn: self.events.head(conn, self.key, name), f"read stream {name!r} from")
        return EMPTY if row is None else Head(row.sequence, row.event_hash)

    def read(self, name: str, layout: ChainLayout, *, after: int = 0) -> Iterator[StoredEvent]:
        """The events after ``after``, each checked as the next link from the one before it.

        From a sequence (a log page, a follower), the event at ``after`` is read first and its
        own line re-hashed against its stored hash, so the read starts from a link it checked
        and no earlier event is read: a broken link anywhere in what is read is CORRUPT_LEDGER,
        one before ``after`` is what ``verify_stream`` (from the first event) finds."""
        conn = self._conn()
        position = Position(0, 0, None)
        if after > 0:
            before = self._reading(lambda c: self.events.at(c, self.key, name, after), f"read stream {name!r} from")
            if before is None:
                return
            position = check_alone(before, layout, name)
        try:
            for page in self.events.pages(conn, self.key, name, after=after):
                for row in page:
                    position = check_row(row, layout, position, name)[1]
                    yield StoredEvent(row.sequence, row.event_hash, row.line, row.start)
        except psycopg.OperationalError as exc:
            self.events.drop()
            raise self.events.unreachable(exc, f"read stream {name!r} from") from None

    def line_at(self, name: str, start: int) -> bytes | None:
        """``ReadsAt``: the stored line of ``name`` that starts at byte ``start``."""
        return self._reading(lambda conn: self.events.line_at(conn, self.key, name, start), f"read stream {name!r} from")

    def append(self, name: str, layout: ChainLayout, lines: Sequence[StoredEvent], *, expected: Head) -> Head:
        """One batch after ``expected``, checked here and linked again by the server; a lost
        connection is retried once (the retry recognises a first attempt that committed)."""
        check_stream_name(name)
        rebased = rebase(lines)
        verify_chain(rebased, layout, name, expected)
        request_id, fp = request_of(rebased[0].line) if rebased else (None, None)
        conn = self._conn()
        if self.events.in_section:
            return self._append(conn, name, expected, rebased, request_id, fp)  # inside this thread's section
        try:
            return self._append(conn, name, expected, rebased, request_id, fp)
        except psycopg.OperationalError:
            self.events.drop()  # lost mid-call: ask again on a new connection
        try:
            return self._append(self._conn(), name, expected, rebased, request_id, fp, retrying=True)
        except psycopg.OperationalError as exc:
            self.events.drop()
            raise self.events.outcome_unknown(exc, name) from None

    def _append(
        self, conn: Connection, name: str, expected: Head, lines: Sequence[StoredEvent], request_id: str | None,
        fp: str | None, *, retrying: bool = False,
    ) -> Head:
        outcome = self.call_append(conn, name, expected, lines, request_id, fp, retrying=retrying)
        return Head(outcome.last, outcome.head_hash)

    def call_append(
        self, conn: Connection, name: str, expected: Head, lines: Sequence[StoredEvent], request_id: str | None,
        fp: str | None, *, retrying: bool = False,
    ) -> Outcome:
        """Send a checked batch; answers appended (or a recognised retry of this very batch),
        else raises HeadConflict, REQUEST_ID_REUSED or the server's refusal as a ChainError.

        ``retrying``: this is the second attempt after a connection lost mid-call, so the batch
        found in place byte for byte is the first attempt's commit. Only then: two writers that
        sealed identical events at one head are otherwise a conflict, one wins."""
        try:
            outcome = self.events.call_append(
                conn, self.key, name, expected, [s.line for s in lines], [s.hash for s in lines],
                [expected.hash, *(s.hash for s in lines[:-1])], request_id, fp,
            )
        except psycopg.errors.InvalidParameterValue as exc:
            raise ChainError(name, 0, expected.sequence + 1, str(exc.diag.message_primary)) from None
        if outcome.status == "appended":
            return outcome
        hashes = [s.hash for s in lines]
        if outcome.status == "duplicate":
            earlier = self.events.request(conn, self.key, name, request_id or "")[1]
            if [row.event_hash for row in earlier] == hashes:
                return outcome  # this very batch, committed by an attempt whose answer was lost
        if outcome.status == "reused":
            raise LoopstateError(
                ErrorCode.REQUEST_ID_REUSED,
                f"request id {request_id!r} was already used in stream {name!r} for a different request "
                f"(sequences {outcome.first}-{outcome.last}); send a fresh request id for a new mutation",
                stream=name, request_id=request_id,
            )
        if retrying and outcome.status == "conflict" and outcome.last >= expected.sequence + len(lines):
            mine = self.events.page(conn, self.key, name, expected.sequence, len(lines))
            if [row.event_hash for row in mine] == hashes:
                return Outcome("duplicate", expected.sequence + 1, expected.sequence + len(lines), hashes[-1],
                               mine[0].start)
        actual = self.events.head(conn, self.key, name)
        raise HeadConflict(name, expected, EMPTY if actual is None else Head(actual.sequence, actual.event_hash))

    # exclusion and change ------------------------------------------------------------------

    @contextlib.contextmanager
    def exclusive(self, section: str) -> Iterator[None]:
        """A transaction on this thread's connection holding ``section``'s lock: another process,
        machine or thread waits (up to the lock timeout); appends this thread makes meanwhile
        join the transaction and commit when the block ends."""
        check_stream_name(section)
        with self.events.transaction(self.key, section):
            yield

    def changes(self, names: Sequence[str] | None = None, on_change: ChangeFn | None = None) -> NotifyFeed:
        return NotifyFeed(self.events, self.key, names, on_change)

    def close(self) -> None:
        self.events.close()

    # capabilities --------------------------------------------------------------------------

    def verify_stream(self, name: str, layout: ChainLayout, progress: ProgressFn | None = None) -> dict[str, Any]:
        """Every event re-checked from the first (``verify_chain``'s rules); a report, never a raise
        for damage: ``ok``, how far it held (``events``, ``sequence``, ``hash``, ``bytes``), the first error."""
        report: dict[str, Any] = {"stream": name, "ok": True}
        head = EMPTY
        offset = 0
        total = 0 if progress is None else self._reading(
            lambda conn: self.events.end_of(conn, self.key, name), f"read stream {name!r} from")
        try:
            for stored in self.read(name, layout):
                head, offset = Head(stored.sequence, stored.hash), stored.end
                if progress is not None and stored.sequence % READ_PAGE == 0:
                    progress(offset, max(total, offset))  # a page's worth at a time
        except ChainError as exc:
            report.update(ok=False, error={"code": exc.code.value, "offset": exc.offset, "sequence": exc.sequence,
                                           "reason": exc.reason})
        except LoopstateError as exc:
            if exc.code is ErrorCode.STORE_IO_ERROR:
                raise
            report.update(ok=False, error={"code": exc.code.value, "offset": offset, "sequence": head.sequence + 1,
                                           "reason": exc.message})
        if progress is not None and head.sequence:
            progress(offset, max(total, offset))
        report.update(events=head.sequence, sequence=head.sequence, hash=head.hash, bytes=offset)
        return report

    def recover_stream(self, name: str, layout: ChainLayout) -> dict[str, Any]:
        """Keep the verified prefix: the rows after it move to ``loopstate.quarantine`` (as they
        were, with the reason), in one transaction holding the stream's lock."""
        with self.events.transaction(self.key, name) as conn:
            report = self.verify_stream(name, layout)
            if report["ok"]:
                return {"stream": name, "action": "none", "events": report["events"]}
            kept, reason = report["sequence"], report["error"]["reason"]
            row = conn.execute(
                "WITH gone AS (DELETE FROM loopstate.events WHERE project = %s AND stream = %s AND sequence > %s "
                "RETURNING sequence, event_hash, start, line), "
                "moved AS (INSERT INTO loopstate.quarantine (project, stream, sequence, event_hash, start, line, reason) "
                "SELECT %s, %s, sequence, event_hash, start, line, %s FROM gone RETURNING 1) "
                "SELECT count(*) FROM moved",
                (self.key, name, kept, self.key, name, reason),
            ).fetchone()
            moved = int(row[0]) if row is not None else 0
        return {"stream": name, "action": "recovered", "events": kept, "quarantined_events": moved, "reason": reason}

    def quarantined(self, name: str) -> list[dict[str, Any]]:
        """What ``recover_stream`` set aside from ``name``: offset, length and SHA-256 of each row."""
        rows = self._reading(lambda conn: conn.execute(
            "SELECT start, octet_length(line), encode(sha256(line), 'hex'), reason, moved_at FROM loopstate.quarantine "
            "WHERE project = %s AND stream = %s ORDER BY moved_at, sequence", (self.key, name)).fetchall(), "read")
        return [{"offset": start, "length": length, "sha256": digest, "reason": reason, "time": moved.isoformat()}
                for start, length, digest, reason, moved in rows]

    def stopped(self) -> dict[str, str] | None:
        """The project's kill switch as set through any machine, or None. Inside a thread's
        section it reads in that transaction, so a check and the append it allows commit together."""
        row = self._reading(lambda conn: conn.execute(
            "SELECT reason, set_by, set_at FROM loopstate.stops WHERE project = %s", (self.key,)).fetchone(), "read")
        if row is None:
            return None
        reason, by, at = row
        return {"by": str(by), "state": "present", "reason": str(reason), "time": at.isoformat(), "store": self.url}

    def set_stop(self, reason: str) -> None:
        """Set the switch (again: the newest reason wins) and wake every feed of the project."""
        def write(conn: Connection) -> None:
            conn.execute(
                "INSERT INTO loopstate.stops (project, reason, set_by) VALUES (%s, %s, %s) ON CONFLICT (project) "
                "DO UPDATE SET reason = excluded.reason, set_by = excluded.set_by, set_at = clock_timestamp()",
                (self.key, reason, client_name()))
            conn.execute("SELECT pg_notify(%s, %s)", (channel_for(self.key), '{"stop": true}'))
        self._reading(write, "set the kill switch in")

    def clear_stop(self) -> None:
        def clear(conn: Connection) -> None:
            conn.execute("DELETE FROM loopstate.stops WHERE project = %s", (self.key,))
            conn.execute("SELECT pg_notify(%s, %s)", (channel_for(self.key), '{"stop": false}'))
        self._reading(clear, "clear the kill switch in")

    # helpers -------------------------------------------------------------------------------

    def _conn(self) -> Connection:
        return self.events.conn

    def _reading(self, read: Callable[[Connection], T], doing: str) -> T:
        try:
            return read(self._conn())
        except psycopg.OperationalError as exc:
            self.events.drop()
            raise self.events.unreachable(exc, doing) from None
