"""One stream of a PostgreSQL store, folded: the contract's ``StreamLedger`` (core/backend.py).

A mutation is one transaction on the calling thread's connection, pipelined: the stream's
advisory lock and the read of what others committed since this ledger's head go in one
round trip; a request-id lookup is one more; the append is sent without waiting and its
answer read with the pipeline's closing sync, which commits (no BEGIN or COMMIT is sent:
``Events.transaction``). So an append is durable when the mutation's block ends (the
commit's WAL flush, synchronous_commit as the server has it), not when
``append`` returns: the service acknowledges after the block. Appended events are folded
at once: if the append is refused (only possible if a writer bypassed the lock), the commit
fails or anything after the append raises, the fold is dropped (``on_reset``) and rebuilt
from the table by the next catch-up, so it never holds an event the store does not.

``submit`` runs its work in a mutation of its own: threads of one process take turns on
the stream's lock, and PostgreSQL flushes the WAL of transactions committing together in
one write, so concurrent writers share flushes without a queue of ours.

With a snapshot codec the first catch-up starts from this machine's projection snapshot
(``snapshots.py``) when the database still holds the event it was folded through, and
folds only what follows; a new snapshot is written when the folded tail since the last one
is due (``core/snapshot.py``'s rule), after a mutation's commit or a first catch-up, and by
``save_snapshot``. A ledger that started from a snapshot has folded no request id before
it: its lookups ask the table until its second mutation fills the index from the table.
"""

from __future__ import annotations

import contextlib
import threading
from collections.abc import Callable, Iterator
from typing import TYPE_CHECKING, Any, TypeVar

import msgspec
import psycopg

from loopstate_protocol.errors import ErrorCode

from loopstate.core import snapshot
from loopstate.core.backend import Head, RecordFn, seal_batch
from loopstate.core.chain import REQUEST_FINGERPRINT, REQUEST_ID, ChainLayout, Position
from loopstate.core.errors import LoopstateError
from loopstate.core.idempotency import RequestIndex
from loopstate.core.news import News
from loopstate.core.postgres import snapshots as machine_snapshots
from loopstate.core.postgres.rows import check_row, record_of
from loopstate.core.record import ProgressFn, Record

if TYPE_CHECKING:
    from loopstate.core.postgres.events import Connection, Events
    from loopstate.core.project import Project

T = TypeVar("T")

# A ledger that started from a snapshot fills its request index from the table at its
# second mutation's lookup: a one-command process asks the table once, a long-lived
# writer stops asking.
TABLE_LOOKUPS_BEFORE_INDEX = 1


class PostgresLedger:
    """A stream's fold kept current from the table: every event reaches ``on_record`` once, in order."""

    def __init__(
        self, events: Events, key: str, project: Project, name: str, layout: ChainLayout, *,
        on_record: RecordFn | None,
        on_reset: Callable[[], None] | None, announce_history: bool, news_limit: int | None, keep_requests: bool,
        snapshots: snapshot.Codec | None = None,
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
        self.snapshots = snapshots
        self.started_from: int | None = None  # the sequence of the snapshot the first catch-up started from
        self._position = Position(0, 0, None)  # after the last folded event: its end, sequence, hash
        self._opened = False
        self.requests = RequestIndex() if keep_requests else None
        self._using = threading.Lock()  # one mutation or catch-up of this ledger at a time
        self._restore: Any = None  # a snapshot's state, restored once its head is seen in the table
        self._snapshot_offset = 0  # where the last snapshot (written or started from) ends
        self._snapshot_bytes = 0  # that snapshot's size: the next is due at a share of it
        self._taken: snapshot.Pending | None = None  # taken in a mutation, written after its commit
        self._requests_partial = False  # started from a snapshot: the ids before it are only in the table
        self._table_lookups = 0
        self._tx: PostgresMutation | None = None  # the mutation under way
        self._swept = snapshots is None  # the snapshot's orphan temp files: swept at the first mutation

    @property
    def head(self) -> tuple[int, str | None]:
        return self._position.sequence, self._position.hash

    # reading ---------------------------------------------------------------------------------

    def catch_up(self, progress: ProgressFn | None = None, *, collect: bool = True) -> News:
        with self._held():
            first = not self._opened
            news = self._catch_up(self.events.conn, collect, progress=progress)
            if first and self._snapshot_due():
                self._write(self._take())  # a cold reader's long fold: the next one starts from it
            return news

    def refresh(self, progress: ProgressFn | None = None, *, collect: bool = True) -> list[Record]:
        return self.catch_up(progress, collect=collect).records

    def _catch_up(
        self, conn: Connection, collect: bool, *, lock: bool = False, progress: ProgressFn | None = None,
    ) -> News:
        """Fold what was committed after the head; the records as News (none on a first open
        that does not announce the history). ``lock``: take the stream's lock with the first read."""
        if not self._opened:
            self._opened = True
            collect = collect and self.announce_history
            if self.snapshots is not None:
                self._resume_from_snapshot()
        fresh = News(self.news_limit)
        events = self.events
        try:
            total = self.events.end_of(conn, self.key, self.name) if progress is not None else 0
            if not self._fold_after_head(conn, fresh, collect, lock, progress, total):
                # The event this fold ends at is gone or another (a recover or an import elsewhere
                # re-chained the stream, or a snapshot's head is not this database's): drop the
                # fold and fold the stream again from its first event.
                self._forget()
                self._opened = True
                fresh = News(self.news_limit)
                self._fold_after_head(conn, fresh, collect, False, progress, total)
        except psycopg.errors.LockNotAvailable:
            raise  # the mutation's transaction names the holder (LOCK_TIMEOUT)
        except psycopg.OperationalError as exc:
            events.drop()
            raise events.unreachable(exc, f"read stream {self.name!r} from") from None
        return fresh

    def _fold_after_head(
        self, conn: Connection, fresh: News, collect: bool, lock: bool, progress: ProgressFn | None, total: int,
    ) -> bool:
        """Fold the events after the head; False when the head's own event is not in the table as it
        was folded. The read starts at the head's event (one row more, no round trip more), so a
        stream cut back or re-chained under this fold is seen at once, not read as "nothing new";
        a snapshot's state is restored only once its head is seen there."""
        at = self._position
        check = at.sequence > 0
        for page in self.events.pages(conn, self.key, self.name, after=at.sequence - 1 if check else 0, lock=lock):
            for row in page:
                if check:
                    if row.sequence != at.sequence or row.event_hash != at.hash:
                        return False
                    check = False
                    if self._restore is not None:
                        self._started_at(at.sequence)
                    continue
                event, after = check_row(row, self.layout, self._position, self.name)
                record = Record(event, row.start, after.offset)
                self._note(record)
                if self.on_record is not None:
                    self.on_record(record)
                self._position = after
                if collect:
                    fresh.add(record)
            if progress is not None:
                progress(self._position.offset, max(total, self._position.offset))
        return not check

    # snapshots -------------------------------------------------------------------------------

    def _resume_from_snapshot(self) -> None:
        """Take this machine's snapshot of the stream as the fold's starting head, its state held
        back until the read that follows finds that head's event in the table (``_started_at``)."""
        assert self.snapshots is not None
        loaded = machine_snapshots.load(self.project, self.name, self.snapshots)
        if loaded is None:
            return
        binding, state, size = loaded
        if binding.store != self.events.where or binding.sequence < 1:
            return
        self._position = Position(binding.offset, binding.sequence, binding.hash)
        self._restore = state
        self._snapshot_offset, self._snapshot_bytes = binding.offset, size

    def _started_at(self, sequence: int) -> None:
        assert self.snapshots is not None
        state, self._restore = self._restore, None
        self.snapshots.restore(state)
        self.started_from = sequence
        self._requests_partial = self.requests is not None

    def _snapshot_due(self) -> bool:
        """Whether the tail folded since the last snapshot calls for a new one (``core/snapshot.py``)."""
        if self.snapshots is None or self._position.sequence == 0:
            return False
        tail = self._position.offset - self._snapshot_offset
        return tail >= snapshot.MIN_TAIL and tail * snapshot.TAIL_SHARE >= self._snapshot_bytes

    def _take(self) -> snapshot.Pending:
        """The state folded through the head now, encoded, with its binding."""
        assert self.snapshots is not None
        at = self._position
        assert at.hash is not None
        binding = machine_snapshots.Binding(self.events.where, at.sequence, at.hash, at.offset)
        return snapshot.Pending(self.name, self.snapshots.domain, binding, msgspec.msgpack.encode(self.snapshots.capture()))

    def _write(self, taken: snapshot.Pending) -> bool:
        size = machine_snapshots.write(self.project, taken)
        self._snapshot_offset = taken.binding.offset
        if size:
            self._snapshot_bytes = size
        return size > 0

    # writing ---------------------------------------------------------------------------------

    @contextlib.contextmanager
    def mutation(self) -> Iterator[PostgresMutation]:
        with self._held():
            if not self._swept:
                machine_snapshots.sweep(self.project, self.name)
                self._swept = True
            tx: PostgresMutation | None = None
            try:
                with self.events.transaction(self.key, self.name, caller_locks=True) as conn:
                    tx = self._tx = PostgresMutation(self, conn, self._catch_up(conn, collect=True, lock=True))
                    yield tx
            except BaseException:
                self._tx = self._taken = None
                if tx is not None and tx.appended:
                    self._forget()  # folded, then not committed (or not known to be): rebuild from the table
                raise
            # Committed: a snapshot taken in it, or due now, binds a head the table holds.
            taken, self._taken, self._tx = self._taken, None, None
            if taken is None and self._snapshot_due():
                taken = self._take()
            if taken is not None:
                self._write(taken)

    def submit(self, work: Callable[[PostgresMutation], T]) -> T:
        with self.mutation() as tx:
            return work(tx)

    def _index_from_table(self, conn: Connection) -> None:
        """For a ledger that started from a snapshot: count a lookup the table answers, and at the
        next after ``TABLE_LOOKUPS_BEFORE_INDEX`` note every request before the snapshot's head
        from the table (its ids and offsets only), so lookups are answered here again."""
        assert self.requests is not None and self.started_from is not None
        self._table_lookups += 1
        if self._table_lookups <= TABLE_LOOKUPS_BEFORE_INDEX:
            return
        for request_id, start, end in self.events.request_spans(conn, self.key, self.name, through=self.started_from):
            self.requests.note_earlier(request_id, start, end)
        self._requests_partial = False

    def _note(self, record: Record) -> None:
        request_id = record.event.get(REQUEST_ID)
        if self.requests is not None and isinstance(request_id, str):
            self.requests.note(request_id, record.start, record.end)

    def _forget(self) -> None:
        self._position = Position(0, 0, None)
        self._opened = False
        self._restore = None
        self.started_from = None
        self._snapshot_offset = 0
        self._requests_partial = False
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
        """Inside a mutation: the snapshot of the fold at the head now. Written at once when the
        mutation has appended nothing (the head is committed; True when the file was written),
        else taken now and written after the commit (True: taken)."""
        if self.snapshots is None or self._position.sequence == 0:
            return False
        taken = self._take()
        if after_release or (self._tx is not None and self._tx.appended):
            self._taken = taken
            return True
        return self._write(taken)

    def snapshot_behind(self) -> bool:
        return self._opened and self._snapshot_due()

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
        if ledger._requests_partial:
            ledger._index_from_table(self.conn)
        if ledger.requests is not None and not ledger._requests_partial:
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
