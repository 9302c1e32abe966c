"""A stream with everything a mutation needs: lock, tail repair, catch-up, idempotency.

The owner (the service, or a CLI command) hands in two callbacks: ``on_record``
folds each newly verified event into its projection, ``on_reset`` drops that
projection when the file was replaced by a re-chaining command. The ledger
calls them for every event exactly once, in order, whether the event came from
this process or another.

A Ledger is the JSONL store's ``StreamLedger`` (``core/backend.py``). It is used
by one thread at a time, except through ``submit``: that is the group commit
(``core/group_commit.py``), where threads of one process that want to mutate the
same stream share one write and one fsync. What a caller may do under the lock
is ``core/mutation.py``'s ``Mutation``; the per-process budget of kept
descriptors, ``core/kept_descriptors.py``. Those modules import no ledger: they
call the public methods of the mutation section below (``begin_mutation`` to
``close_if_idle``), which are there for them, not for the ledger's owner.
"""

from __future__ import annotations

import itertools
import os
import threading
import time
from array import array
from typing import TYPE_CHECKING, Any, Callable, TypeVar

from loopstate_protocol.errors import ErrorCode

from loopstate.core import canonical, checkpoint, quarantine, request_file, safefs, snapshot, verified_mark
from loopstate.core.chain import REQUEST_ID, ChainLayout, Position
from loopstate.core.clock import format_time, system_clock
from loopstate.core.errors import LoopstateError
from loopstate.core.idempotency import Applied, RequestIndex
from loopstate.core.kept_descriptors import keep_open
from loopstate.core.live_integrity import Seen, seen_in
from loopstate.core.lock import StoreLock
from loopstate.core.mutation import Mutation, Scope
from loopstate.core.news import News
from loopstate.core.project import Project, check_stream_name
from loopstate.core.record import ProgressFn, Record
from loopstate.core.stream import MarkDisagrees, Stream

if TYPE_CHECKING:
    from loopstate.core.group_commit import GroupCommit

RecordFn = Callable[[Record], None]
T = TypeVar("T")

# A ledger with a snapshot codec writes a snapshot once the verified tail since the last
# one is at least SNAPSHOT_MIN_TAIL bytes and at least 1/SNAPSHOT_TAIL_SHARE of the last
# snapshot's size (``Ledger._snapshot_due``; the rule every store's ledger follows).
SNAPSHOT_MIN_TAIL = snapshot.MIN_TAIL
SNAPSHOT_TAIL_SHARE = snapshot.TAIL_SHARE
# The request index is stored (``request_file``) once memory holds this many requests and
# 1/SNAPSHOT_TAIL_SHARE of the stored file's (``Ledger._save_requests_if_due``).
REQUESTS_MIN_HELD = 1024


class Ledger:
    def __init__(
        self,
        project: Project,
        name: str,
        layout: ChainLayout,
        *,
        on_record: RecordFn | None = None,
        on_reset: Callable[[], None] | None = None,
        keep_requests: bool = True,
        announce_history: bool = True,
        snapshots: snapshot.Codec | None = None,
        news_limit: int | None = None,
    ) -> None:
        """``announce_history=False``: the records found on the first catch-up (the
        history before this ledger opened the stream) are folded but not returned by
        ``refresh`` nor listed in ``Mutation.caught_up``; only what is read after
        that is. A service's listeners want news, and collecting a whole large
        stream on its first open would hold every event in memory at once.

        ``snapshots``: the owner's state codec. With one, the first open starts
        from the stream's projection snapshot when it still matches the file
        (``core/snapshot.py``), folding only the events after it; it writes a
        snapshot with the checkpoint of its head whenever the tail since the last one
        is due (``_snapshot_due``), and stores its request index beside it
        (``core/request_file.py``).

        ``news_limit``: the most records one catch-up hands back (``catch_up``,
        ``Mutation.caught_up``); past it only the first, the last and the count are
        kept (``core/news.py``). None: all of them.

        A catch-up outside a mutation (``refresh``, ``catch_up``: a reader's) folds but
        does not index request ids: only a mutation's lookup or append needs them, so
        the requests read since are indexed at the next one (``complete_index``), and a
        reader that never writes (idle snapshots included) holds no index growing with
        the stream."""
        self.project = project
        self.name = check_stream_name(name)
        self.stream = Stream(project.dir, name, layout)
        self.on_record = on_record
        self.on_reset = on_reset
        self.requests = RequestIndex() if keep_requests else None
        self.announce_history = announce_history
        self.snapshots = snapshots
        self.news_limit = news_limit
        # A start from a snapshot indexes only the requests after it: the index is
        # rebuilt from byte 0 before the first mutation, the only thing that reads it.
        self._requests_from = 0
        # A catch-up that did not index (a read outside a mutation, or any catch-up while
        # such a range waits) leaves the requests from this offset on unindexed, until a
        # mutation's first lookup or append (None: every request read is indexed, or will
        # be by ``_complete_requests``).
        self._requests_deferred_from: int | None = None
        self.started_from: int | None = None  # the sequence of the snapshot the first open started from
        self._swept = False
        self._temp_targets = [
            (os.fspath(path.parent), path.name)
            for path in (
                self.stream.path, checkpoint.path_for(self.stream), snapshot.path_for(self.stream),
                request_file.path_for(self.stream), quarantine.path_for(project.dir, name),
                project.dir / "locks" / f"{self.name}.lock",  # a founding writer's, cut short (StoreLock.publish)
            )
        ]
        self._opened = False
        # The lock file's descriptor stays open between mutations (re-checked
        # each time); ``_using`` keeps the threads of this
        # process out of each other's mutation, as the flock on separate
        # descriptors used to, and keeps an idle-ledger sweep from closing them mid-use.
        # A mutation of a stream that has no lock file yet makes nothing until its first
        # write (``_publish``): a refused command leaves the data dir as it was.
        self._lock = StoreLock(
            project.dir / "locks" / f"{self.name}.lock", project.dir, timeout=project.lock_timeout, keep_open=True,
            founding=project.root,
        )
        self._lock.before_open, self._lock.before_create = project.check_existing, project.ensure
        self._using = threading.Lock()
        self._checkpoint_offset = 0
        self._last_line_start = 0
        # The snapshot file's size, as last written or started from: the next one is due
        # when the tail since it passes a share of that (``_snapshot_due``).
        self._snapshot_bytes = 0
        self._taken_snapshot: snapshot.Pending | None = None  # written once the lock is released
        # The verified mark (``verified_mark``): written after each durable append to a file
        # this ledger vouches for, and renewed by a read that verified every byte of a file
        # whose mark was stale.
        self._marks = verified_mark.MarkWriter(self.stream)
        # The file's stat (``Seen``) at which this ledger knows every byte before its head
        # was verified: it hashed them all, or a mark matching that stat vouched for them,
        # or it appended to such a file. Growth by another process leaves it behind: that
        # growth is vouched for only by the mark its writer left (``_vouched_before_write``).
        self._vouched_at: Seen | None = None
        self._marked: Seen | None = None  # the stat the mark on disk is known to describe
        self._mark_vouched: Seen | None = None  # the stat at which the last catch-up's growth was vouched by the mark
        self._group_commit: GroupCommit | None = None  # made by the first ``submit``

    @property
    def layout(self) -> ChainLayout:
        return self.stream.layout

    @property
    def head(self) -> tuple[int, str | None]:
        return self.stream.position.sequence, self.stream.position.hash

    def _catch_up(self, progress: ProgressFn | None = None, collect: bool = True, *, index: bool = True) -> News:
        """Read, verify and fold what was appended since the last catch-up; the records
        read, as far as ``news_limit`` (with ``collect=False``, or on a first open that does
        not announce the history, an empty ``News``: nothing to tell). ``index=False``
        (a read outside a mutation) leaves their request ids for the next mutation."""
        if self._opened and self.stream.unchanged():
            return News(0)  # the common case before an append: one stat call, nothing new
        # Growth since an earlier look may be vouched for by its writer's mark (``_vouched_head``).
        vouched_by = self._vouched_head if self._opened else None
        self._mark_vouched = None
        trusted = 0
        # Whether a read from byte 0 hashes every byte it trusts: not past a checkpoint from
        # before prefix digests, whose prefix only the links vouch for.
        every_byte_hashed = True
        if not self._opened and not self.announce_history:
            collect = False
        if not self._opened and self.snapshots is not None and self._start_from_snapshot():
            self._opened = True
        if not self._opened:
            saved = checkpoint.load(self.stream)
            if saved is not None:
                # The digest of the bytes before the checkpoint is computed in a
                # thread while the scan below reads them, and checked when the scan
                # gets to the checkpoint (PrefixChanged, handled below).
                trusted = checkpoint.validate(self.stream, saved, concurrent=True)
                self._checkpoint_offset = trusted
                every_byte_hashed = not trusted or bool(saved.prefix_sha256)
            self._opened = True
        stream = self.stream
        resets = read_resets = stream.resets
        from_zero = stream.position.offset == 0
        fresh = News(self.news_limit)
        add = fresh.add if collect else None  # not collected: not news either (no count, no bounds)
        # What fold does, with its lookups hoisted out of the loop: a cold open
        # runs this once per event of the stream.
        # Noted as read only while no earlier range waits to be indexed (that range then
        # just grows, and is indexed in one pass when a lookup or an append needs it).
        requests = self.requests
        noting = requests is not None and index and self._requests_deferred_from is None
        note = requests.note if requests is not None and noting else None
        if self.requests is not None and not noting and self._requests_deferred_from is None:
            self._requests_deferred_from = stream.position.offset
        on_record = self.on_record
        start = self._last_line_start
        mark_disagreed = False
        try:
            # Re-hashing a lot (a first open with no usable checkpoint) is shared with
            # worker processes; catching up on a few appends never is.
            records = stream.read_new(verify_hash_until=trusted, progress=progress, parallel=True, vouched_by=vouched_by)
            for record in records:
                if stream.resets != resets:
                    resets = stream.resets
                    self._restart()
                    on_record = self.on_record
                    if note is None and self.requests is not None:
                        self._requests_deferred_from = 0  # the new file's requests, from its start
                event, start, end = record
                if note is not None and REQUEST_ID in event:
                    note(event[REQUEST_ID], start, end)
                if on_record is not None:
                    try:
                        on_record(record)
                    except LoopstateError:
                        raise
                    except Exception:
                        # A record the fold cannot take may be one whose bytes are not verified yet
                        # (a checkpointed prefix is hashed as a whole, and worker processes hash
                        # from the end): read the rest first, so corruption is reported as what it
                        # is (CORRUPT_LEDGER) rather than as the fold's fault; an intact stream
                        # lets the fold's own error out.
                        for _ in records:
                            pass
                        raise
                if add is not None:
                    add(record)
        except MarkDisagrees:
            # The mark vouched for bytes that do not end at its head: nothing folded from
            # them is kept. A full verify names a bad record; if every record verifies, only
            # the mark was wrong, and the stream is read again from byte 0, hashing it all.
            stream.forget()
            self._restart()
            self._opened = False
            for _ in Stream(self.project.dir, self.name, stream.layout).read_new():
                pass
            mark_disagreed = True
        except checkpoint.PrefixChanged:
            # Some byte before the checkpoint changed: nothing folded from there is
            # kept, the next open starts over, and a full verify names the record.
            stream.forget()
            self._restart()
            self._opened = False
            for _ in Stream(self.project.dir, self.name, stream.layout).read_new():
                pass
            raise
        finally:
            self._last_line_start = start
        if mark_disagreed:  # read again from byte 0 (a first open: no mark vouches for a catch-up there)
            return self._catch_up(progress, collect, index=index)
        if stream.resets != resets:
            self._restart()
        if ((from_zero and every_byte_hashed) or stream.resets != read_resets) and stream.prefix_digest() is not None:
            self._vouched_at = stream.live.seen  # every byte hashed, and the digest checked where one was due
        seen = stream.live.seen
        if seen is not None and seen == self._mark_vouched:
            # Caught up over growth its writer's mark vouched for: the whole file as it is
            # now is vouched for (this ledger's head by its own reads, the rest by the mark).
            self._vouched_at = self._marked = seen
        if seen is not None and seen == self._vouched_at and seen != self._marked and not self._mark_describes(seen):
            # The mark found was stale (a writer crashed before writing its own): renewed in place.
            self._write_mark(create=False)
        return fresh

    def _vouched_head(self, info: os.stat_result) -> Position | None:
        """The head that the stream's verified mark vouches for, when it describes the file
        exactly as ``info`` (its fstat under the lock) shows it and covers the growth past
        this ledger's head; else None (the growth is then hashed line by line).

        The mark's writer verified every byte through that head at that very stat (it
        writes a mark only over bytes it vouches for: ``_vouched_before_write``), and equal
        size, mtime and ctime mean nobody wrote the file since. So a catch-up over those
        bytes need not re-hash them: it decodes, links, numbers and folds each line, hashes
        the last, and must end at the mark's head (``Stream.read_new``). Any difference
        (another inode or stat, a torn or foreign mark, a mark short of the file's end)
        gives None."""
        stream = self.stream
        mark = self._marks.read(stream)
        if mark is None or mark.offset != info.st_size or mark.offset <= stream.position.offset or not mark.matches(info):
            return None
        self._mark_vouched = seen_in(info)
        return Position(mark.offset, mark.sequence, mark.hash)

    def _start_from_snapshot(self) -> bool:
        """Start from the stream's snapshot if the file is still the one it was folded from.

        Checked in full before anything is trusted (``checkpoint.vouch``): the file's
        identity and first record, the head record, and then either the verified mark
        (nobody wrote the file since a process verified it through that head: O(1)) or
        the SHA-256 of every byte before the head (one pass of hashlib); any mismatch
        leaves the ledger as it was, to fold from byte 0.
        """
        assert self.snapshots is not None
        loaded = snapshot.load(self.stream, self.snapshots)
        if loaded is None:
            return False
        binding, state, size = loaded
        vouched = checkpoint.vouch(self.stream, binding)
        if vouched is None:
            return False
        self.snapshots.restore(state)
        self.stream.resume_at(
            Position(binding.offset, binding.sequence, binding.hash), (binding.dev, binding.ino), vouched.digest, vouched.seen,
        )
        self._last_line_start = binding.line_start
        self._checkpoint_offset = binding.offset
        self._snapshot_bytes = size
        self._requests_from = binding.offset if self.requests is not None else 0
        self.started_from = binding.sequence
        self._vouched_at = seen_in(vouched.seen)
        if vouched.digest is None:
            self._marked = self._vouched_at  # the mark that vouched is the file's
        return True

    def _complete_requests(self) -> None:
        """Make the request index hold every request of the stream again, for a ledger that
        started from a snapshot (it noted only those after it). Runs under the exclusive
        lock, after the catch-up that checked the file still holds the verified bytes.

        With the stored request file (``request_file``: whole, and bound to this verified
        chain) only the requests between its head and the snapshot's are read; without
        one, every request from byte 0, in stream order."""
        requests = self.requests
        assert requests is not None
        stored = request_file.load(self.stream, requests.offset_bits) if self._stores_requests() else None
        if stored is not None:
            requests.attach(stored)
            if stored.binding.offset < self._requests_from:
                self._index_requests(stored.binding.offset, self._requests_from, requests.note_earlier)
        else:
            requests.clear()
            self._index_requests(0, self.stream.position.offset, requests.note)
            self._requests_deferred_from = None
        self._requests_from = 0

    def _index_deferred(self) -> None:
        """Index the requests that catch-ups folded without indexing, from
        ``_requests_deferred_from`` to the head. Under the exclusive lock, caught up,
        nothing staged."""
        begin, self._requests_deferred_from = self._requests_deferred_from, None
        end = self.stream.position.offset
        if begin is not None and self.requests is not None and begin < end:
            self._index_requests(begin, end, self.requests.note_earlier)

    def _index_requests(self, begin: int, end: int, note: Callable[[str, int, int], None]) -> None:
        """Note each request id of the verified lines in [begin, end) (``begin`` a line start):
        a decode of each line carrying one, no fold, no re-hash."""
        stream = self.stream
        fd = safefs.open_read(stream.path, stream.base)
        if fd is None:
            return
        marker = REQUEST_ID.encode()
        try:
            offset, start, pending = begin, begin, b""
            while offset < end:
                block = os.pread(fd, min(1 << 20, end - offset), offset)
                if not block:
                    break
                offset += len(block)
                lines = (pending + block).split(b"\n")
                pending = lines.pop()
                for line in lines:
                    if marker in line:
                        request_id = canonical.decode(line).get(REQUEST_ID)
                        if isinstance(request_id, str):
                            note(request_id, start, start + len(line) + 1)
                    start += len(line) + 1
        finally:
            os.close(fd)

    def _stores_requests(self) -> bool:
        """Whether this ledger keeps a stored request file: one with a request index and a
        snapshot codec (its cold starts need it), whose words fit the stored layout."""
        return self.requests is not None and self.snapshots is not None and self.requests.storable()

    def _save_requests_if_due(self) -> None:
        """Store the request index once the requests held in memory pass both
        REQUESTS_MIN_HELD and 1/SNAPSHOT_TAIL_SHARE of the stored file's: then this
        process holds only the words after it (the amortized cost of a rewrite per request
        is a constant, as a snapshot's per byte). Under the exclusive lock, after a flush."""
        requests = self.requests
        if requests is None or self._requests_from or not self._stores_requests():
            return
        held, stored = requests.in_memory(), requests.base
        if held < REQUESTS_MIN_HELD or held * SNAPSHOT_TAIL_SHARE < (stored.count if stored is not None else 0):
            return
        binding = checkpoint.current(self.stream, self._last_line_start)
        if binding is None or binding.first_hash is None:
            return
        words = array("Q", sorted(itertools.chain(stored.words() if stored is not None else (), requests.words())))
        request_file.save(self.stream, binding, words, requests.offset_bits)
        reopened = request_file.load(self.stream, requests.offset_bits)
        if reopened is not None and reopened.binding == binding:
            requests.stand_on(reopened)

    def _restart(self) -> None:
        self._vouched_at = self._marked = None
        if self.requests is not None:
            self.requests.clear()
        self._checkpoint_offset = 0
        self._requests_from = 0
        self._requests_deferred_from = None
        if self.on_reset is not None:
            self.on_reset()

    def fold(self, record: Record) -> None:
        """Fold one staged record into the owner's projection and the request index (``Mutation``'s)."""
        event = record.event
        self._last_line_start = record.start
        if self.requests is not None and REQUEST_ID in event:
            self.requests.note(event[REQUEST_ID], record.start, record.end)
        if self.on_record is not None:
            self.on_record(record)

    def refresh(self, progress: ProgressFn | None = None, *, collect: bool = True) -> list[Record]:
        """Read and verify what others appended, under a shared lock.

        Returns the new records (as far as ``news_limit``: see ``catch_up``); with
        ``collect=False`` they are only folded (through ``on_record``) and an empty
        list is returned, so opening a large stream holds no per-event objects.
        """
        return self.catch_up(progress, collect=collect).records

    def catch_up(self, progress: ProgressFn | None = None, *, collect: bool = True) -> News:
        """``refresh``, returning the ``News``: every new record up to ``news_limit``,
        past it only the first, the last and the count."""
        with self.project.lock(self.name).shared():
            return self._catch_up(progress, collect, index=False)

    def records_of(self, applied: Applied) -> list[Record]:
        """Re-read the events of an earlier request (for an idempotent retry)."""
        data = self.stream.read_line_at(applied.start, applied.end)
        out = []
        offset = applied.start
        for line in data.split(b"\n")[:-1]:
            out.append(Record(canonical.decode(line), offset, offset + len(line) + 1))
            offset += len(line) + 1
        return out

    def mutation(self) -> Scope:
        """Exclusive lock; catch up; quarantine and cut a torn tail; remove our orphans.

        Use as ``with ledger.mutation() as tx:``; the lock is released when the
        block ends. A small class, not a generator context manager: this runs
        once per append, where every microsecond is paid twice on the caches an
        fsync leaves cold.
        """
        return Scope(self)

    # the mutation section: what Scope, Mutation and GroupCommit call -----------------------

    def begin_mutation(self) -> Mutation:
        """This process's threads kept out of each other's way (``_using``), then the stream's
        exclusive lock, then ``_prepare``; on any failure both are let go again."""
        if not self._using.acquire(timeout=self.project.lock_timeout):
            raise LoopstateError(
                ErrorCode.LOCK_TIMEOUT,
                f"timed out after {self.project.lock_timeout:g}s waiting for stream {self.name!r}: another "
                "thread of this process is mutating it (use Ledger.submit to share a ledger between threads)",
                stream=self.name,
            )
        try:
            keep_open(self)
            self._lock.exclusive(defer_create=True)
            try:
                return self._prepare()
            except BaseException:
                self._lock.release()
                raise
        except BaseException:
            self._using.release()
            raise

    def end_mutation(self) -> None:
        """Release the exclusive lock and the ledger, then write a snapshot taken under the lock."""
        try:
            self._lock.release()
        finally:
            self._using.release()
        self._write_taken_snapshot()

    def earlier(self, request_id: str, fp: str) -> list[Record] | None:
        """The records of an exact earlier request (None: a new id); REQUEST_ID_REUSED for a
        changed one. The index is complete (``complete_index``) and the lock held."""
        requests = self.requests
        assert requests is not None
        applied = requests.lookup(request_id, fp, self.stream.read_line_at, self.stream.layout.sequence_field)
        return None if applied is None else self.records_of(applied)

    def stage(self, events: list[dict[str, Any]], extra: dict[str, Any] | None) -> list[Record]:
        """Seal ``events`` (with ``extra``'s fields) after the staged head, in memory; a mutation
        founding the stream makes the store first (``_publish``)."""
        self._publish()
        return self.stream.stage(events, extra)

    def stage_sealed(self, lines: list[bytes]) -> list[Record]:
        """Stage lines sealed elsewhere once they are checked to follow the staged head."""
        self._publish()
        return self.stream.stage_sealed(lines)

    def commit(self, records: list[Record]) -> None:
        """Fold ``records`` (staged by this mutation) and write every staged line with one write
        and one fsync; if the fold, the write or the fsync fails, nothing folded is kept
        (``forget_unwritten``). Then the verified mark, and a checkpoint or snapshot when due."""
        vouched = self._vouched_before_write()
        try:
            for record in records:
                self.fold(record)
            self.stream.flush()
        except BaseException:
            self.forget_unwritten()
            raise
        self._after_flush(vouched)

    def flush_staged(self) -> float:
        """A group commit's write: every staged (and already folded) line in one write and one
        fsync, then as ``commit``; returns the seconds the write and fsync took."""
        try:
            vouched = self._vouched_before_write()
            started = time.monotonic()
            self.stream.flush()
            took = time.monotonic() - started
        except BaseException:
            self.forget_unwritten()
            raise
        self._after_flush(vouched)
        return took

    def _prepare(self) -> Mutation:
        """Under the exclusive lock: catch up, cut a torn tail, sweep our temps.

        The project folder is checked (Project.ensure) whenever the lock file is
        opened afresh; while the kept lock descriptor is still the file at its
        path, the folder holding it is the one that was checked.
        """
        resets = self.stream.resets
        caught_up = self._catch_up()
        if self.stream.resets != resets:
            self._swept = False  # the file was replaced: a re-chaining command ran, maybe crashed
        torn = self.stream.torn
        if torn is not None:
            self._publish()
            # Summarized before it is cut; a crash in between leaves the summary,
            # which the retry finds instead of writing it twice.
            summary = (torn.offset, torn.length, torn.sha256)
            known = quarantine.entries(self.project.dir, self.name)
            if not known or (known[-1].get("offset"), known[-1].get("length"), known[-1].get("sha256")) != summary:
                quarantine.record(self.project.dir, self.name, {
                    "offset": torn.offset, "length": torn.length, "sha256": torn.sha256,
                    "reason": torn.reason, "at": format_time(system_clock()),
                })
            self.stream.cut_torn_tail()
        # Only this stream's own temps: another stream's writer may be mid-write.
        # Temps only cost disk (nothing ever reads them), so they are swept on
        # this ledger's first mutation and after the file was replaced (what a
        # recover, purge or migration does), not with a listdir per append.
        if not self._swept:
            for folder, target in self._temp_targets:
                safefs.remove_orphan_temps(folder, target)
            self._swept = True
        return Mutation(self, caught_up)

    def _publish(self) -> None:
        """Before this mutation's first write: make the store and the lock file if this
        mutation is founding the stream (``StoreLock.publish``); otherwise nothing."""
        if self._lock.founded:
            self._lock.publish()

    def complete_index(self) -> None:
        """Make the request index hold every request of the stream: those before a snapshot
        start (``_complete_requests``) and those catch-ups left unindexed (``_index_deferred``).
        Under the exclusive lock, caught up, before anything is staged: at a mutation's first
        lookup or append, so one that does neither (an idle snapshot, ``compact``) builds no
        index."""
        if self._requests_from:
            self._complete_requests()
        self._index_deferred()

    def close(self) -> None:
        """Close the lock and stream descriptors kept between mutations (they reopen on the next one)."""
        with self._using:
            self._close_kept()

    def _close_kept(self) -> None:
        self._lock.close()
        self.stream.close()
        self._marks.close()

    def close_if_idle(self) -> bool:
        """Close the kept descriptors unless a mutation holds this ledger; whether they were
        closed (``kept_descriptors``' budget, for ledgers other than the one it is marking)."""
        if not self._using.acquire(blocking=False):
            return False
        try:
            self._close_kept()
        finally:
            self._using.release()
        return True

    def _vouched_before_write(self) -> bool:
        """Whether every byte before the head is vouched for, as the file is now (under the
        exclusive lock, caught up, before a write): none at all, or this ledger verified
        the file at this very stat, or the mark on disk (its last writer's) describes it.
        Growth by a process that left no mark (one that crashed before it, or one that
        does not take the lock) is vouched for by nobody: the mark stays as it was."""
        stream = self.stream
        if stream.position.offset == 0:
            return True
        seen = stream.live.seen
        return seen is not None and (seen == self._vouched_at or self._mark_describes(seen))

    def _after_flush(self, vouched: bool) -> None:
        """After a durable append, under the exclusive lock: the verified mark of the file
        as this write left it (one pwrite) when the file before it was ``vouched`` for;
        then a checkpoint and snapshot when one is due."""
        if vouched:
            self._vouched_at = self.stream.live.seen
            self._write_mark()
        if self._snapshot_due():
            self.save_snapshot(after_release=True)
        self._save_requests_if_due()

    def _mark_describes(self, seen: Seen) -> bool:
        """Whether the mark on disk vouches for the file as ``seen`` (this ledger's identity)."""
        if seen == self._marked:
            return True
        mark = verified_mark.load(self.stream)
        identity = self.stream.identity
        return mark is not None and identity is not None and mark.describes(identity, seen)

    def _write_mark(self, *, create: bool = True) -> None:
        """Write the verified mark of the file as last seen under the lock (which this
        ledger vouches for: the caller checked ``_vouched_at``); ``create=False`` for a
        read, which creates no file."""
        if self._marks.write(self.stream, create=create):
            self._marked = self.stream.live.seen

    def _snapshot_due(self) -> bool:
        """Whether the verified bytes past the last checkpoint call for a new one.

        Without a snapshot codec: every CHECKPOINT_EVERY bytes (the checkpoint spares
        re-hashing only). With one: once the tail passes both SNAPSHOT_MIN_TAIL and
        1/SNAPSHOT_TAIL_SHARE of the last snapshot's size. A cold reader then folds at most
        that tail after decoding the snapshot (its fold is bounded by a fixed share of
        what it decodes anyway, and by 64 KiB for a small state), and a writer pays one
        snapshot of S bytes per S/SNAPSHOT_TAIL_SHARE appended bytes: its amortized cost
        per appended byte is a constant (SNAPSHOT_TAIL_SHARE times the encode cost of a
        byte), whatever the state's size.
        """
        tail = self.stream.position.offset - self._checkpoint_offset
        if self.snapshots is None:
            return tail >= checkpoint.CHECKPOINT_EVERY
        return tail >= SNAPSHOT_MIN_TAIL and tail * SNAPSHOT_TAIL_SHARE >= self._snapshot_bytes

    def snapshot_behind(self) -> bool:
        """Whether the verified tail since this ledger's last checkpoint calls for a new
        snapshot (``_snapshot_due``): for a long-lived reader that has folded others'
        appends, so it can write one while idle. Without a codec, or before a first read, no."""
        return self._opened and self.snapshots is not None and self._snapshot_due()

    def save_snapshot(self, *, after_release: bool = False) -> bool:
        """Write the checkpoint of the current head and, with a codec, the snapshot of the
        state folded through it (caller holds the exclusive lock, with every staged
        event flushed). True when a snapshot was written, or, ``after_release``, taken:
        then only the binding and the state's encoding are taken now, and the checksum,
        envelope and file write happen once the mutation's lock is released
        (``_write_taken_snapshot``)."""
        stream = self.stream
        self._publish()
        binding = checkpoint.save(stream, self._last_line_start)
        if binding is None:
            return False
        self._checkpoint_offset = stream.position.offset
        if self.snapshots is None:
            return False
        taken = snapshot.capture(stream.name, binding, self.snapshots)
        if taken is None:
            return False
        self._snapshot_bytes = taken.size()
        if after_release:
            self._taken_snapshot = taken
            return True
        written = taken.write(stream)
        if written:
            self._snapshot_bytes = written
        return bool(written)

    def _write_taken_snapshot(self) -> None:
        """Write the snapshot taken under the lock just released, if any (outside the lock:
        the snapshot checks itself against the stream when read, see core/snapshot.py)."""
        taken, self._taken_snapshot = self._taken_snapshot, None
        if taken is not None:
            written = taken.write(self.stream)
            if written:
                self._snapshot_bytes = written

    def forget_unwritten(self) -> None:
        """Staged events were folded but never became durable: rebuild from the file
        as a first open does, from the checkpoint when there is one, and without
        handing the events already there out again as news."""
        self.stream.forget()
        self._restart()
        self._opened = False

    def submit(self, work: Callable[[Mutation], T]) -> T:
        """Run ``work(tx)`` under the exclusive lock, sharing one write+fsync with other threads
        of this process that submit to this ledger meanwhile (``core/group_commit.py``)."""
        group = self._group_commit
        if group is None:
            with _making_group_commit:
                if self._group_commit is None:
                    from loopstate.core.group_commit import GroupCommit  # a server's: a command never imports it

                    self._group_commit = GroupCommit(self)
                group = self._group_commit
        return group.submit(work)


_making_group_commit = threading.Lock()
