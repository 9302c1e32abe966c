"""One stream of a PostgreSQL store, folded: the contract's ``StreamLedger`` (core/backend.py).

A mutation is one transaction on the calling thread's connection, pipelined: BEGIN, the
stream's advisory lock and the read of what others committed since this ledger's head go
in one round trip; a request-id lookup is one more; the append is sent without waiting
and its answer read with the COMMIT. So an append is durable when the mutation's block
ends (the COMMIT's WAL flush, synchronous_commit as the server has it), not when
``append`` returns: the service acknowledges after the block. Appended events are folded
at once: if the append is refused (only possible if a writer bypassed the lock), the commit
fails or anything after the append raises, the fold is dropped (``on_reset``) and rebuilt
from the table by the next catch-up, so it never holds an event the store does not.

``submit`` runs its work in a mutation of its own: threads of one process take turns on
the stream's lock, and PostgreSQL flushes the WAL of transactions committing together in
one write, so concurrent writers share flushes without a queue of ours.
"""

from __future__ import annotations

import contextlib
import threading
from collections.abc import Callable, Iterator
from typing import TYPE_CHECKING, Any, TypeVar

import psycopg

from loopstate_protocol.errors import ErrorCode

from loopstate.core.backend import Head, RecordFn, seal_batch
from loopstate.core.chain import REQUEST_FINGERPRINT, REQUEST_ID, ChainLayout, Position
from loopstate.core.errors import LoopstateError
from loopstate.core.idempotency import RequestIndex
from loopstate.core.news import News
from loopstate.core.postgres.rows import check_row, record_of
from loopstate.core.record import ProgressFn, Record

if TYPE_CHECKING:
    from loopstate.core.postgres.events import Connection, Events
    from loopstate.core.project import Project

T = TypeVar("T")


class PostgresLedger:
    """A stream's fold kept current from the table: every event reaches ``on_record`` once, in order."""

    def __init__(
        self, events: Events, key: str, project: Project, name: str, layout: ChainLayout, *,
        on_record: RecordFn | None,
        on_reset: Callable[[], None] | None, announce_history: bool, news_limit: int | None, keep_requests: bool,
    ) -> None:
        """``keep_requests``: index the request ids folded (core/idempotency.py's RequestIndex,
        about 11 bytes each), so that ``earlier`` answers a new id without asking the server;
        without it every lookup is a query."""
        self.events = events
        self.key = key  # the project's rows: its id
        self.project = project
        self.name = name
        self.layout = layout
        self.on_record = on_record
        self.on_reset = on_reset
        self.announce_history = announce_history
        self.news_limit = news_limit
        self.started_from: int | None = None  # no snapshots: a fold starts from the first event
        self._position = Position(0, 0, None)  # after the last folded event: its end, sequence, hash
        self._opened = False
        self.requests = RequestIndex() if keep_requests else None
        self._using = threading.Lock()  # one mutation or catch-up of this ledger at a time

    @property
    def head(self) -> tuple[int, str | None]:
        return self._position.sequence, self._position.hash

    # reading ---------------------------------------------------------------------------------

    def catch_up(self, progress: ProgressFn | None = None, *, collect: bool = True) -> News:
        with self._held():
            return self._catch_up(self.events.conn, collect)

    def refresh(self, progress: ProgressFn | None = None, *, collect: bool = True) -> list[Record]:
        return self.catch_up(progress, collect=collect).records

    def _catch_up(self, conn: Connection, collect: bool, *, lock: bool = False) -> News:
        """Fold what was committed after the head; the records as News (none on a first open
        that does not announce the history). ``lock``: take the stream's lock with the first read."""
        if not self._opened:
            self._opened = True
            collect = collect and self.announce_history
        fresh = News(self.news_limit)
        events = self.events
        try:
            if not self._fold_after_head(conn, fresh, collect, lock):
                # The event this fold ends at is gone or another (a recover or an import elsewhere
                # re-chained the stream): drop the fold and fold the stream again from its first event.
                self._forget()
                self._opened = True
                fresh = News(self.news_limit)
                self._fold_after_head(conn, fresh, collect, False)
        except psycopg.errors.LockNotAvailable:
            raise  # the mutation's transaction names the holder (LOCK_TIMEOUT)
        except psycopg.OperationalError as exc:
            events.drop()
            raise events.unreachable(exc, f"read stream {self.name!r} from") from None
        return fresh

    def _fold_after_head(self, conn: Connection, fresh: News, collect: bool, lock: bool) -> bool:
        """Fold the events after the head; False when the head's own event is not in the table as it
        was folded. The read starts at the head's event (one row more, no round trip more), so a
        stream cut back or re-chained under this fold is seen at once, not read as "nothing new"."""
        at = self._position
        check = at.sequence > 0
        for page in self.events.pages(conn, self.key, self.name, after=at.sequence - 1 if check else 0, lock=lock):
            for row in page:
                if check:
                    if row.sequence != at.sequence or row.event_hash != at.hash:
                        return False
                    check = False
                    continue
                event, after = check_row(row, self.layout, self._position, self.name)
                record = Record(event, row.start, after.offset)
                self._note(record)
                if self.on_record is not None:
                    self.on_record(record)
                self._position = after
                if collect:
                    fresh.add(record)
        return not check

    # writing ---------------------------------------------------------------------------------

    @contextlib.contextmanager
    def mutation(self) -> Iterator[PostgresMutation]:
        with self._held():
            tx: PostgresMutation | None = None
            try:
                with self.events.transaction(self.key, self.name, caller_locks=True) as conn:
                    tx = PostgresMutation(self, conn, self._catch_up(conn, collect=True, lock=True))
                    yield tx
            except BaseException:
                if tx is not None and tx.appended:
                    self._forget()  # folded, then not committed (or not known to be): rebuild from the table
                raise

    def submit(self, work: Callable[[PostgresMutation], T]) -> T:
        with self.mutation() as tx:
            return work(tx)

    def _note(self, record: Record) -> None:
        request_id = record.event.get(REQUEST_ID)
        if self.requests is not None and isinstance(request_id, str):
            self.requests.note(request_id, record.start, record.end)

    def _forget(self) -> None:
        self._position = Position(0, 0, None)
        self._opened = False
        if self.requests is not None:
            self.requests.clear()
        if self.on_reset is not None:
            self.on_reset()

    @contextlib.contextmanager
    def _held(self) -> Iterator[None]:
        if not self._using.acquire(timeout=self.project.lock_timeout):
            raise LoopstateError(
                ErrorCode.LOCK_TIMEOUT,
                f"timed out after {self.project.lock_timeout:g}s waiting for stream {self.name!r}: another "
                "thread of this process is using this ledger", stream=self.name,
            )
        try:
            yield
        finally:
            self._using.release()

    def save_snapshot(self, *, after_release: bool = False) -> bool:
        return False  # no snapshots in this store yet: a fold starts from the first event

    def snapshot_behind(self) -> bool:
        return False

    def close(self) -> None:
        """Nothing of its own to let go: connections belong to the store."""


class PostgresMutation:
    """Inside ``PostgresLedger.mutation()``: the stream's lock is held by this transaction."""

    def __init__(self, ledger: PostgresLedger, conn: Connection, caught_up: News) -> None:
        self.ledger = ledger
        self.conn = conn
        self.caught_up = caught_up
        self.appended = False

    def earlier(self, request_id: str, fp: str) -> list[Record] | None:
        """From the ledger's request index when it says the id is new (it has folded every event
        to the head, under this lock); from the table when the id may be there."""
        ledger = self.ledger
        if ledger.requests is not None:
            try:
                ledger.requests.lookup(request_id, fp, _may_be_there, ledger.layout.sequence_field)
                return None  # no event was ever noted under this id's tag
            except _MayBeThere:
                pass
        found, rows = ledger.events.request(self.conn, ledger.key, ledger.name, request_id)
        if not rows:
            return None
        if found != fp:
            raise LoopstateError(
                ErrorCode.REQUEST_ID_REUSED,
                f"request id {request_id!r} was already used in stream {ledger.name!r} for a different request; "
                "send a fresh request id for a new mutation",
                stream=ledger.name, request_id=request_id,
            )
        return [record_of(row.line, row.start, ledger.layout) for row in rows]

    def append(
        self, events: list[dict[str, Any]], *, request_id: str | None = None, fp: str | None = None,
    ) -> list[Record]:
        ledger = self.ledger
        at = ledger._position
        extra = None if request_id is None else {REQUEST_ID: request_id, REQUEST_FINGERPRINT: fp}
        lines = seal_batch(events, ledger.layout, Head(at.sequence, at.hash), start=at.offset, extra=extra)
        if not lines:
            return []
        self.appended = True  # from here on a failure drops the fold: the batch may be in the transaction
        ledger.events.send_append(self.conn, ledger.key, ledger.name, (at.sequence, at.hash), [s.line for s in lines],
                                 [s.hash for s in lines], [at.hash, *(s.hash for s in lines[:-1])], request_id, fp)
        records = [record_of(stored.line, stored.start, ledger.layout) for stored in lines]
        for record, stored in zip(records, lines):
            ledger._note(record)
            if ledger.on_record is not None:
                ledger.on_record(record)
            ledger._position = Position(record.end, stored.sequence, stored.hash)
        return records


class _MayBeThere(Exception):
    """Raised by ``_may_be_there``: the request index has a candidate, so the table is asked."""


def _may_be_there(start: int, end: int) -> bytes:
    """The request index's reader, asked only when a noted event may carry the id."""
    raise _MayBeThere
