"""What a caller may do under a ledger's exclusive lock, and the scope that holds it.

``with ledger.mutation() as tx`` is the one way into a stream's mutation: the
``Scope`` asks the ledger to begin one (this process's threads kept out of
each other's way, the stream's exclusive lock taken, or, for a stream never
written, its project's founding lock: ``core/founding.py``) and to end it, and
hands out a ``Mutation``, whose ``earlier``, ``append`` and ``append_sealed``
are all a caller can do there (``StreamMutation`` in ``core/backend.py``).

The ledger is the stream's state, this is its transaction: the two meet only
through the public methods ``Host`` names, so this module imports no ledger and
reads none of its private state.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING, Any, Protocol

from loopstate.core.chain import REQUEST_FINGERPRINT, REQUEST_ID
from loopstate.core.news import News
from loopstate.core.record import Record

if TYPE_CHECKING:
    from loopstate.core.chain import StoredEvent


class Host(Protocol):
    """What a mutation asks of its ledger (``core/ledger.py``), each step under the exclusive lock."""

    def begin_mutation(self) -> Mutation:
        """Take the ledger for this thread and the stream's exclusive lock; catch up and repair."""
        ...

    def end_mutation(self) -> None:
        """Release the lock and the ledger; write a snapshot taken under the lock."""
        ...

    def complete_index(self) -> None:
        """Make the request index hold every request of the stream (before a lookup or an append)."""
        ...

    def earlier(self, request_id: str, fp: str) -> list[Record] | None:
        """The records of an exact earlier request; REQUEST_ID_REUSED for a changed one."""
        ...

    def stage(self, events: list[dict[str, Any]], extra: dict[str, Any] | None) -> list[Record]:
        """Seal ``events`` after the staged head, in memory (the store founded first if need be)."""
        ...

    def stage_sealed(self, lines: list[bytes]) -> list[Record]:
        """Check and stage lines sealed elsewhere, in memory."""
        ...

    def fold(self, record: Record) -> None:
        """Fold one staged record into the owner's projection and the request index."""
        ...

    def commit(self, records: list[Record]) -> None:
        """Fold ``records`` and make every staged line durable (one write, one fsync); on failure
        nothing folded or staged is kept."""
        ...


class Scope:
    """``with ledger.mutation() as tx``: the ledger's mutation begun on entry, ended on exit."""

    __slots__ = ("ledger",)

    def __init__(self, ledger: Host) -> None:
        self.ledger = ledger

    def __enter__(self) -> Mutation:
        return self.ledger.begin_mutation()

    def __exit__(self, *exc_info: object) -> None:
        self.ledger.end_mutation()


class Mutation:
    """What a caller may do while holding a ledger's exclusive lock.

    In a group commit (``grouped``) appends are staged and folded at once, and
    the group's leader makes them durable with one write and fsync at the end.
    """

    def __init__(self, ledger: Host, caught_up: News | None = None) -> None:
        self.ledger = ledger
        self.grouped = False
        self._indexed = False  # whether the request index was completed (first lookup or append)
        # What other processes appended, first read (and folded) under this lock:
        # the owner tells its listeners, as it would after a refresh.
        self.caught_up: News = caught_up if caught_up is not None else News(0)

    def earlier(self, request_id: str, fp: str) -> list[Record] | None:
        """The events of an exact earlier request; raises REQUEST_ID_REUSED on a changed one."""
        self._index_ready()
        return self.ledger.earlier(request_id, fp)

    def _index_ready(self) -> None:
        if not self._indexed:
            self._indexed = True
            self.ledger.complete_index()

    def append(self, events: list[dict[str, Any]], *, request_id: str | None = None, fp: str | None = None) -> list[Record]:
        """Seal ``events`` after the head and fold them; durable when this returns,
        or, in a group commit, when the group's leader has flushed.

        The events are folded before the write, not after the fsync: the fold
        then runs while the caches are warm, and the path from the fsync's
        return to the lock's release is a few instructions. Should the fold,
        the write or the fsync fail, nothing folded is kept: the projection is
        rebuilt from the file, as in a group commit.
        """
        self._index_ready()
        extra = None if request_id is None else {REQUEST_ID: request_id, REQUEST_FINGERPRINT: fp}
        return self._write(self.ledger.stage(events, extra))

    def append_sealed(self, lines: Sequence[StoredEvent]) -> list[Record]:
        """Append lines sealed elsewhere (``chain.seal_batch``, or another store's, as read) as
        one batch: each is checked to follow the head (canonical, hashed, linked, whole batches)
        before any is staged; then folded and made durable as ``append``'s are."""
        self._index_ready()
        return self._write(self.ledger.stage_sealed([stored.line for stored in lines]))

    def _write(self, records: list[Record]) -> list[Record]:
        if self.grouped:
            fold = self.ledger.fold
            for record in records:
                fold(record)
            return records
        self.ledger.commit(records)
        return records
