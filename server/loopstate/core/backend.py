"""The storage contract: what loopstate asks of whatever holds a project's streams.

Everything above the core (the service, the front doors, the domains through
them) reaches events only through the names in this module. A store is made
by ``core/stores.py`` from a store URL; the local JSONL store
(``core/jsonl_store.py``) is the default and the reference, and other stores
(PostgreSQL) plug in behind the same names. docs/storage.md describes the
contract in prose; tests/store/backend_contract.py is the suite every store
must pass.

Two levels, one per kind of caller:

- ``StreamLedger`` (with ``StreamMutation``): one stream as the service holds
  it, a folded projection kept current. ``mutation()`` is the exclusive section
  in which a command reads what others appended, checks its request id, decides
  and appends; ``catch_up()`` folds what others appended since, and returns it
  as ``News``.
- ``Store``: the project's streams as records, for whatever needs no fold:
  ``append`` of already sealed lines at an expected head (a changed head is a
  ``HeadConflict``), ``read`` from a sequence, ``head``, ``stream_names``,
  ``changes`` (a feed that wakes when streams grow), ``exclusive`` sections.

Every store keeps the same bytes: an event is its canonical line (sorted keys,
compact JSON) chained by its layout's sequence, previous-hash and hash fields
(``core/chain.py``). ``seal_batch`` makes those lines and ``verify_chain``
checks them (both, with ``Head`` and ``StoredEvent``, defined in ``core/chain.py``
and named here), the same functions whatever the store, so ``loopstate verify``
checks one chain on any of them and a project moved between stores keeps every
hash. What a store can do beyond the contract is a capability, found with
``isinstance`` against a ``runtime_checkable`` protocol (``Quarantines``,
``Recovers``, ``StopSwitch``, and ``LocalFile`` for a ledger whose stream is a
local JSONL file).

The shape is that of an event-sourcing recorder interface (a few methods, typed
records, one shared test suite), in loopstate's terms: streams with hash chains,
request ids and byte positions.
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Iterator, Sequence
from contextlib import AbstractContextManager
from typing import TYPE_CHECKING, Any, Protocol, TypeVar, runtime_checkable

from loopstate_protocol.errors import ErrorCode

from loopstate.core.chain import EMPTY as EMPTY
from loopstate.core.chain import ChainError as ChainError
from loopstate.core.chain import ChainLayout
from loopstate.core.chain import Head as Head
from loopstate.core.chain import StoredEvent as StoredEvent
from loopstate.core.chain import seal_batch as seal_batch
from loopstate.core.chain import verify_chain as verify_chain
from loopstate.core.errors import LoopstateError
from loopstate.core.news import News
from loopstate.core.record import ProgressFn, Record

if TYPE_CHECKING:
    from loopstate.core.project import Project
    from loopstate.core.snapshot import Codec
    from loopstate.core.stream import Stream

T = TypeVar("T")
RecordFn = Callable[[Record], None]
ChangeFn = Callable[["str | None"], None]
"""Called from a store's own thread with the stream that grew (None: any of them may have)."""


# records -------------------------------------------------------------------------------------


class HeadConflict(LoopstateError):
    """An append at a head that is no longer the stream's: someone appended first.

    Nothing of the refused batch was written. The caller reads what was appended
    (``Store.read`` after its head, or a ``StreamLedger`` catch-up) and decides again."""

    def __init__(self, stream: str, expected: Head, actual: Head) -> None:
        super().__init__(
            ErrorCode.CONFLICT,
            f"stream {stream!r} is at sequence {actual.sequence}, not at the expected {expected.sequence}: "
            "another writer appended first; read what it appended and try again",
            stream=stream, expected_sequence=expected.sequence, expected_hash=expected.hash,
            actual_sequence=actual.sequence, actual_hash=actual.hash,
        )
        self.stream = stream
        self.expected = expected
        self.actual = actual


# one stream, folded ---------------------------------------------------------------------------


class StreamMutation(Protocol):
    """What a caller may do inside ``StreamLedger.mutation()``: the stream is caught up and
    no other writer, in this process or any other, appends until the section ends."""

    caught_up: News
    """What others appended, first read (and folded) when this section began."""

    def earlier(self, request_id: str, fp: str) -> list[Record] | None:
        """The events an earlier request with this id appended (an exact retry: the caller
        answers with them and appends nothing), or None when the id is new. A request id
        seen with another fingerprint raises REQUEST_ID_REUSED."""
        ...

    def append(
        self, events: list[dict[str, Any]], *, request_id: str | None = None, fp: str | None = None,
    ) -> list[Record]:
        """Seal ``events`` as one batch after the head (``seal_batch``, with ``request_id`` and
        ``fp`` added to each), fold them, and make them durable: when this returns (or, inside
        ``StreamLedger.submit``, when the shared write is durable) they are acknowledged. If
        anything fails, nothing of the batch is kept, in the store or in the fold."""
        ...


class StreamLedger(Protocol):
    """One stream as a long-lived owner holds it: every event folded exactly once, in order,
    through ``on_record`` (``on_reset`` drops the fold when the stream was replaced by a
    re-chaining command, before it is folded again from its first event)."""

    project: Project
    name: str
    on_record: RecordFn | None
    started_from: int | None
    """The sequence of the projection snapshot the first catch-up started from (None: from the start)."""

    @property
    def head(self) -> tuple[int, str | None]:
        """(sequence, hash) of the last event folded (``(0, None)`` before any)."""
        ...

    def mutation(self) -> AbstractContextManager[StreamMutation]:
        """The exclusive section of this stream: ``with ledger.mutation() as tx:``."""
        ...

    def submit(self, work: Callable[[StreamMutation], T]) -> T:
        """``work(tx)`` inside a mutation that threads of this process submitting meanwhile may
        share (group commit: one durable write for all); returns once ``work``'s events are durable."""
        ...

    def catch_up(self, progress: ProgressFn | None = None, *, collect: bool = True) -> News:
        """Read, verify and fold what was appended since the last catch-up, without excluding
        writers for longer than a read; the new records as ``News`` (``collect=False``: folded only)."""
        ...

    def refresh(self, progress: ProgressFn | None = None, *, collect: bool = True) -> list[Record]:
        """``catch_up``'s records as a list (those kept within the news limit)."""
        ...

    def save_snapshot(self, *, after_release: bool = False) -> bool:
        """Inside a mutation: store the fold's snapshot at the head now (True when one was written
        or, ``after_release``, taken to be written when the section ends)."""
        ...

    def snapshot_behind(self) -> bool:
        """Whether enough was folded since the last snapshot that an idle owner should store one."""
        ...

    def close(self) -> None:
        """Let go of what is held between mutations (descriptors, connections); reopened on use."""
        ...


# a project's streams --------------------------------------------------------------------------


class ChangeFeed(Protocol):
    """Wakes a reader when a stream of the project may have grown. A wake may be spurious and
    several appends may share one: the reader catches up (reads after the last sequence it
    holds), which is what finds the events, so a missed or merged wake loses nothing."""

    def wait(self, timeout: float | None = None) -> bool:
        """Block until a change since the feed opened or since the last ``wait`` that returned
        True (False: ``timeout`` seconds passed without one)."""
        ...

    def close(self) -> None: ...


class Wakes:
    """The waking half every ``ChangeFeed`` shares: its watcher thread calls ``wake`` with the
    stream that grew, which sets the flag ``wait`` blocks on and calls the feed's ``on_change``.
    One flag, not a count: several wakes before a ``wait`` are one (the reader's catch-up finds
    every event they stood for)."""

    def __init__(self, on_change: ChangeFn | None) -> None:
        self._changed = threading.Event()
        self._on_change = on_change

    def wake(self, stream: str | None) -> None:
        self._changed.set()
        if self._on_change is not None:
            self._on_change(stream)

    def wait(self, timeout: float | None = None) -> bool:
        """True once a wake came since the last True (False: ``timeout`` seconds without one)."""
        if not self._changed.wait(timeout):
            return False
        self._changed.clear()
        return True


class Store(Protocol):
    """One project's streams in one store."""

    url: str
    """Where the store is, as the user gave it, with any password left out (for messages)."""
    project: Project

    def stream_names(self) -> list[str]:
        """The project's streams that hold at least one event, sorted."""
        ...

    def open_ledger(
        self, name: str, layout: ChainLayout, *, on_record: RecordFn | None = None,
        on_reset: Callable[[], None] | None = None, keep_requests: bool = True, announce_history: bool = True,
        snapshots: Codec | None = None, news_limit: int | None = None,
    ) -> StreamLedger:
        """A ``StreamLedger`` of stream ``name`` (nothing is read or made until its first use).

        ``announce_history=False``: the history found by the first catch-up is folded but not
        returned as news; ``snapshots``: the owner's state codec (``core/snapshot.py``), to start
        from a stored snapshot and store new ones; ``news_limit``: the most records one
        catch-up returns (``core/news.py``); ``keep_requests=False``: no request index (a
        reader that never checks request ids)."""
        ...

    def head(self, name: str, layout: ChainLayout) -> Head:
        """The stream's verified head (``Head()`` for a stream with no events)."""
        ...

    def read(self, name: str, layout: ChainLayout, *, after: int = 0) -> Iterator[StoredEvent]:
        """The stream's events with a sequence above ``after``, in order, each verified as the
        store reads it; ``verify_chain`` checks them again from any head."""
        ...

    def append(self, name: str, layout: ChainLayout, lines: Sequence[StoredEvent], *, expected: Head) -> Head:
        """Append sealed ``lines`` (``seal_batch`` after ``expected``) as one batch, in one
        exclusive section, durably; returns the new head. Raises ``HeadConflict`` when the
        stream's head is not ``expected`` and ``ChainError`` when the lines do not follow it
        (nothing written either way). Must not be called inside that stream's own
        ``exclusive`` section or mutation in the same process."""
        ...

    def exclusive(self, section: str) -> AbstractContextManager[None]:
        """Hold exclusive section ``section`` (a stream name, or a name of the same form) against
        every other holder in any process or machine using this store, until the block ends.
        A stream's section is the one its appends and mutations take; waits are bounded by the
        project's lock timeout (LOCK_TIMEOUT naming the holder)."""
        ...

    def changes(self, names: Sequence[str] | None = None, on_change: ChangeFn | None = None) -> ChangeFeed:
        """A feed of growth of streams ``names`` (None: any stream of the project), also calling
        ``on_change`` from the store's own thread when given."""
        ...

    def close(self) -> None:
        """Let go of everything this store holds open."""
        ...


# capabilities a store may have ----------------------------------------------------------------


@runtime_checkable
class Quarantines(Protocol):
    """A store that cuts what a crash left half-written and keeps a summary of each cut
    (its byte offset, length and SHA-256, never the bytes)."""

    def quarantined(self, name: str) -> list[dict[str, Any]]:
        """The summaries of what was cut from stream ``name``, oldest first."""
        ...


@runtime_checkable
class Recovers(Protocol):
    """A store whose damaged stream can be verified in full and cut back to its verified prefix."""

    def verify_stream(self, name: str, layout: ChainLayout, progress: ProgressFn | None = None) -> dict[str, Any]:
        """Every event re-checked from the first; a report (``ok``, counts, the first error), never a raise for damage."""
        ...

    def recover_stream(self, name: str, layout: ChainLayout) -> dict[str, Any]:
        """Keep the verified prefix as the stream and set the damaged rest aside; what was done."""
        ...


@runtime_checkable
class LocalFile(Protocol):
    """A ``StreamLedger`` whose stream is a JSONL file on this machine (``core/stream.Stream``).

    What only such a stream has uses this: the Merkle tree kept beside the file
    (``service/tree_heads``), reading claims back by byte offset, and the commands that
    re-chain a stream by replacing its file (purge, recover). Check once, with ``isinstance``,
    where the ledger is opened."""

    stream: Stream


@runtime_checkable
class ReadsAt(Protocol):
    """A store that reads one stored line back by its place, the byte offset ``start`` it has in the
    stream's canonical serialization (``core/record.py``: the same number on every store).

    The intent domain keeps a retired claim as the places of the records that added and retired it;
    on a store without a local file this is how they are read back (``service/intent_effects``).
    The caller checks the line (``core/chain.check_line``) and that its hash is the one it folded."""

    def line_at(self, name: str, start: int) -> bytes | None:
        """The line (without its newline) of stream ``name`` that starts at byte ``start``; None if none does."""
        ...


@runtime_checkable
class StopSwitch(Protocol):
    """A store that holds the project's kill switch itself, so that a stop set through any
    machine using the store is seen by every other one (a local store's switch is a file in
    the project's work tree instead: ``core/killswitch.py``)."""

    def stopped(self) -> dict[str, str] | None:
        """The switch that is set, as ``{"path" or "by": ..., "state": "present", ...}``, or None."""
        ...

    def set_stop(self, reason: str) -> None: ...

    def clear_stop(self) -> None: ...
