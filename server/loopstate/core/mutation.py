"""What a caller may do under a ledger's exclusive lock, and how that lock is taken and let go.

``with ledger.mutation() as tx`` is the one way into a stream's mutation: the
``Scope`` keeps this process's threads out of each other's way, takes the
stream's exclusive lock (or, for a stream never written, its project's founding
lock: ``core/founding.py``) and hands out a ``Mutation``, whose ``earlier`` and
``append`` are all a caller can do there. Split out of ``core/ledger.py``, whose
internals these two use by design: the ledger is the stream's state, this is
its transaction.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

from loopstate_protocol.errors import ErrorCode

from loopstate.core.chain import REQUEST_FINGERPRINT, REQUEST_ID
from loopstate.core.errors import LoopstateError
from loopstate.core.kept_descriptors import keep_open
from loopstate.core.news import News
from loopstate.core.record import Record

if TYPE_CHECKING:
    from loopstate.core.backend import StoredEvent

if TYPE_CHECKING:
    from loopstate.core.ledger import Ledger


class Scope:
    """``with ledger.mutation() as tx``: this process's threads kept out of each
    other's way (``_using``), then the stream's exclusive lock, both released on exit."""

    __slots__ = ("ledger",)

    def __init__(self, ledger: Ledger) -> None:
        self.ledger = ledger

    def __enter__(self) -> "Mutation":
        ledger = self.ledger
        if not ledger._using.acquire(timeout=ledger.project.lock_timeout):
            raise LoopstateError(
                ErrorCode.LOCK_TIMEOUT,
                f"timed out after {ledger.project.lock_timeout:g}s waiting for stream {ledger.name!r}: another "
                "thread of this process is mutating it (use Ledger.submit to share a ledger between threads)",
                stream=ledger.name,
            )
        try:
            keep_open(ledger)
            ledger._lock.exclusive(defer_create=True)
            try:
                return ledger._prepare()
            except BaseException:
                ledger._lock.release()
                raise
        except BaseException:
            ledger._using.release()
            raise

    def __exit__(self, *exc_info: object) -> None:
        try:
            self.ledger._lock.release()
        finally:
            self.ledger._using.release()
        self.ledger._write_taken_snapshot()


class Mutation:
    """What a caller may do while holding a ledger's exclusive lock.

    In a group commit (``grouped``) appends are staged and folded at once, and
    the group's leader makes them durable with one write and fsync at the end.
    """

    def __init__(self, ledger: Ledger, caught_up: News | None = None) -> None:
        self.ledger = ledger
        self.grouped = False
        self._indexed = False  # whether the request index was completed (first lookup or append)
        # What other processes appended, first read (and folded) under this lock:
        # the owner tells its listeners, as it would after a refresh.
        self.caught_up: News = caught_up if caught_up is not None else News(0)

    def earlier(self, request_id: str, fp: str) -> list[Record] | None:
        """The events of an exact earlier request; raises REQUEST_ID_REUSED on a changed one."""
        ledger = self.ledger
        assert ledger.requests is not None
        self._index_ready()
        applied = ledger.requests.lookup(request_id, fp, ledger.stream.read_line_at, ledger.stream.layout.sequence_field)
        return None if applied is None else ledger.records_of(applied)

    def _index_ready(self) -> None:
        if not self._indexed:
            self._indexed = True
            self.ledger._complete_index()

    def append(self, events: list[dict[str, Any]], *, request_id: str | None = None, fp: str | None = None) -> list[Record]:
        """Seal ``events`` after the head and fold them; durable when this returns,
        or, in a group commit, when the group's leader has flushed.

        The events are folded before the write, not after the fsync: the fold
        then runs while the caches are warm, and the path from the fsync's
        return to the lock's release is a few instructions. Should the fold,
        the write or the fsync fail, nothing folded is kept: the projection is
        rebuilt from the file (``_forget_unwritten``), as in a group commit.
        """
        ledger = self.ledger
        self._index_ready()
        ledger._publish()
        extra = None if request_id is None else {REQUEST_ID: request_id, REQUEST_FINGERPRINT: fp}
        return self._write(ledger.stream.stage(events, extra))

    def append_sealed(self, lines: Sequence[StoredEvent]) -> list[Record]:
        """Append lines sealed elsewhere (``backend.seal_batch``, or another store's, as read) as
        one batch: each is checked to follow the head (canonical, hashed, linked, whole batches)
        before any is staged; then folded and made durable as ``append``'s are."""
        ledger = self.ledger
        self._index_ready()
        ledger._publish()
        return self._write(ledger.stream.stage_sealed([stored.line for stored in lines]))

    def _write(self, records: list[Record]) -> list[Record]:
        ledger = self.ledger
        stream = ledger.stream
        if self.grouped:
            for record in records:
                ledger._fold(record)
            return records
        vouched = ledger._vouched_before_write()
        try:
            for record in records:
                ledger._fold(record)
            stream.flush()
        except BaseException:
            ledger._forget_unwritten()
            raise
        ledger._after_flush(vouched)
        return records
