"""One append-only JSONL stream: verified reads from a known head, O(1) appends.

A Stream object remembers the verified head (byte offset, sequence, hash) and
the file's identity, so a long-lived process only reads and verifies what was
appended since; and the file's stat as last seen, so it notices when bytes it
already verified change under it (``live_integrity``). Appends open with O_APPEND|O_NOFOLLOW, write every line of a
command in one write, and fsync before returning: cost does not grow with the
stream's length. A group commit stages the lines of several commands and
flushes them with one write and one fsync. Callers hold the stream's lock
(shared to read, exclusive to append); the lock, not this class, keeps readers
from seeing half an append.
"""

from __future__ import annotations

import hashlib
import os
import stat
import sys
import threading
from collections.abc import Generator
from pathlib import Path
from typing import Any, Callable, Iterator

import msgspec

from loopstate.core import canonical, safefs
from loopstate.core.chain import (
    BATCH,
    ChainError,
    ChainLayout,
    HashCut,
    Head,
    Position,
    StoredEvent,
    batch_part,
    check_line,
    seal,
    verify_chain,
)
from loopstate.core.live_integrity import LiveIntegrity
from loopstate.core.record import ProgressFn as ProgressFn
from loopstate.core.record import Record as Record

CHUNK = 1 << 20
# Beyond any file offset: "no checkpoint to reach" in the scan.
_NO_OFFSET = 1 << 63
# No decoded value is this object: the scan's schema memo starts out matching nothing.
_UNJUDGED = object()
# From this many bytes to scan, the running prefix digest is fed from a thread.
DIGEST_THREAD_MIN_BYTES = 8 << 20


PARTIAL_LINE = "partial final line"
SHORT_BATCH = "incomplete final batch"


class MarkDisagrees(ChainError):
    """A catch-up over bytes a verified mark vouched for did not end at the mark's head:
    the mark lies about the file, or the bytes under it changed without changing its stat.
    Whatever was folded from that read is not to be kept (``Ledger._catch_up``)."""


class TornTail(msgspec.Struct, frozen=True):
    """What a crash mid-append leaves behind: a final line with no newline, or the
    complete lines of a command's batch that ends before its last event (and
    maybe a partial line after them). Either way that append was never acknowledged."""

    offset: int
    length: int
    sha256: str
    reason: str = PARTIAL_LINE




class _DigestFeeder:
    """Feeds a scan's verified bytes to the running prefix digest in a thread.

    The digest is a SHA-256 over every byte, ~0.4 us of a ~730-byte event;
    hashlib lets go of the GIL while it hashes a big buffer, so on a second CPU
    this overlaps the decoding instead of adding to it. The updates keep
    their order (one thread, one queue); ``finish`` waits for the last one, so
    the digest is complete when the scan writes it back. At most a few chunks
    wait in the queue.
    """

    def __init__(self, digest: Any) -> None:
        self._digest = digest
        import queue  # only a long scan feeds a digest thread: a short-lived read never imports it

        self._queue: queue.Queue[memoryview | None] = queue.Queue(maxsize=4)
        self._thread = threading.Thread(target=self._run, name="loopstate-prefix-digest", daemon=True)
        self._thread.start()

    def _run(self) -> None:
        while (view := self._queue.get()) is not None:
            self._digest.update(view)

    def update(self, view: memoryview) -> None:
        self._queue.put(view)

    def finish(self) -> None:
        self._queue.put(None)
        self._thread.join()


# parallel_verify's smallest span worth worker processes (its PARALLEL_MIN_BYTES; a test holds them equal):
# below it no worker is started, so a read of a small stream (every hook and CLI read) never imports it.
PARALLEL_FLOOR = 16 << 20


def _voucher_for(fd: int, path: str, identity: tuple[int, int], start: int, size: int, fields: Any, **kw: Any) -> Any:
    """parallel_verify.voucher_for, imported only when the span could be worth workers (once imported,
    its own thresholds decide)."""
    if size - start < PARALLEL_FLOOR and "loopstate.core.parallel_verify" not in sys.modules:
        return None
    from loopstate.core import parallel_verify

    return parallel_verify.voucher_for(fd, path, identity, start, size, fields, **kw)


class Stream:
    """A stream file below a project folder, with its verified head."""

    def __init__(self, base: Path, name: str, layout: ChainLayout) -> None:
        self.base = base
        self.name = name
        self.layout = layout
        self.path = base / "streams" / f"{name}.jsonl"
        self._path_str = os.fspath(self.path)
        self._fields = (layout.sequence_field, layout.prev_field, layout.hash_field, layout.schema_field)
        self.position = Position()
        self.identity: tuple[int, int] | None = None
        self.torn: TornTail | None = None
        self.resets = 0
        self._staged: list[bytes] = []
        self._staged_head: Position | None = None
        self._append = safefs.HeldDescriptor()
        self._reader = safefs.HeldDescriptor()
        # SHA-256 over every verified byte [0, position.offset), when this process
        # has seen them all (or was handed a checked digest of a prefix: _adopt).
        # It counts only while _digest_at is the head's offset, so a caller that
        # moves the head by hand (a snapshot) simply has no digest.
        self.digest: Any = None
        self._digest_at = -1
        self._adopt: tuple[int, Callable[[], Any]] | None = None
        # The file's stat as last seen holding only verified bytes: an edit of them is noticed.
        self.live = LiveIntegrity()

    # reading ---------------------------------------------------------------

    def read_new(
        self, *, verify_hash_until: int | None = None, progress: ProgressFn | None = None, parallel: bool = False,
        vouched_by: Callable[[os.stat_result], Position | None] | None = None,
    ) -> Generator[Record, None, None]:
        """Yield every complete event after the verified head, verifying as it goes.

        The head advances only past records that verified. Hashes are recomputed
        for every record, except records ending at or before
        ``verify_hash_until`` (a checkpointed prefix whose links are still
        checked). A trailing partial line is remembered in ``torn``, not
        returned and not repaired. With ``parallel``, when there are many bytes
        to re-hash, worker processes check hashes from the file's end backwards
        while the scan comes from the front (``parallel_verify``); the outcome,
        errors included, is the same.

        ``vouched_by(info)`` (a catch-up's: ``Ledger._vouched_head``) is asked, with the
        file's fstat under the lock, for a head whose every byte a verifier already
        checked at exactly that stat (the verified mark its last writer left). Then the
        lines up to it are decoded, linked, numbered and folded but not re-hashed, except
        the last, which is hashed in full; the scan must end exactly at that head
        (offset, sequence, hash), else ``MarkDisagrees``.
        """
        if self.unchanged():
            return
        if self.position.offset == 0 and self._digest_at != 0 and self._adopt is None:
            self.digest, self._digest_at = hashlib.sha256(), 0  # every byte will pass through this process
        # A writer keeps the read descriptor between catch-ups and re-checks it with one lstat
        # (the path still names that regular file, with one link); opened the safe way otherwise.
        reader = self._reader
        info = reader.still_at(self._path_str)
        if info is None:
            fd = safefs.open_read(self.path, self.base)
            if fd is None:
                if self.identity is not None or self.position.offset:
                    raise ChainError(self.name, 0, None, "the stream file disappeared")
                return
            info = os.fstat(fd)
            reader.hold(fd, info)
        fd = reader.fd
        assert fd is not None
        try:
            identity = (info.st_dev, info.st_ino)
            if self.identity is not None and identity != self.identity:
                # Replaced by a re-chaining command (purge, recover): start over, and let
                # go of the old file's descriptor (its disk space is freed only then).
                self.position = Position()
                self.digest, self._digest_at, self._adopt = hashlib.sha256(), 0, None
                self.resets += 1
                self._append.close()
                self.live.forget()
            self.identity = identity
            if info.st_size < self.position.offset:
                raise ChainError(
                    self.name, info.st_size, self.position.sequence,
                    f"the file is {info.st_size} bytes, shorter than its verified head at byte {self.position.offset}",
                )
            vouched_head = None if vouched_by is None or info.st_size <= self.position.offset else vouched_by(info)
            # The bytes verified before are still those. Growth a mark vouches for needs no
            # look at the head line: the scan's first line must link to this head's hash,
            # and the mark's writer verified the whole chain it belongs to.
            self.live.check(self, fd, info, grown_vouched=vouched_head is not None)
            if info.st_size == self.position.offset:
                self.torn = None  # nothing new since the verified head
                self.live.saw(info)
                return
            if vouched_head is not None:
                # Every line ending before the vouched head skips the hash; the one ending at it is hashed.
                verify_hash_until, parallel = max(verify_hash_until or 0, vouched_head.offset - 1), False
            voucher = None
            if parallel:
                voucher = _voucher_for(
                    fd, self._path_str, identity, max(self.position.offset, verify_hash_until or 0), info.st_size,
                    self._fields, from_end=True,
                )
            try:
                yield from self._scan(fd, info.st_size, verify_hash_until or 0, progress, voucher)
                if vouched_head is not None and (self.position != vouched_head or self.torn is not None):
                    raise MarkDisagrees(
                        self.name, self.position.offset, self.position.sequence,
                        f"the verified mark vouches for a head at byte {vouched_head.offset} (sequence "
                        f"{vouched_head.sequence}) that the file's bytes do not end in",
                    )
                self.live.saw(info)
            finally:
                if voucher is not None:
                    voucher.close()
        except BaseException:
            reader.close()  # after a failed read, trust nothing about the descriptor either
            raise
        finally:
            if self._append.fd is None:
                # Kept only by a writer (which keeps its append descriptor on the same file too):
                # a reader that may never read again must not keep a replaced file's space.
                reader.close()

    def reopened(self) -> Stream:
        """A new reader of this stream's file, with nothing verified yet (``live_integrity``'s fresh checks)."""
        return Stream(self.base, self.name, self.layout)

    def verify_ahead(self, progress: ProgressFn | None = None) -> None:
        """Move the head past everything worker processes verify completely (a big stream
        only; see ``parallel_verify``), for a caller that needs no events, only the verdict
        (``loopstate verify``). The next ``read_new`` goes on from there sequentially:
        it checks the first span the workers did not pass, and reports exactly what a
        sequential scan from byte 0 would. The head's running digest is dropped.
        """
        fd = safefs.open_read(self.path, self.base)
        if fd is None:
            return
        try:
            info = os.fstat(fd)
            identity = (info.st_dev, info.st_ino)
            if self.identity not in (None, identity) or self.torn is not None:
                return  # replaced or torn since the last read: read_new sorts that out
            voucher = _voucher_for(fd, self._path_str, identity, self.position.offset, info.st_size, self._fields)
            if voucher is None:
                return
            try:
                at = voucher.stitched(self.position, self.layout.classify_schema, progress, info.st_size)
            finally:
                voucher.close()
            if at != self.position:
                at = self._before_open_batch(fd, at)
            if at != self.position:
                self.identity, self.position = identity, at
                self.digest, self._digest_at, self._adopt = None, -1, None
                self.live.forget()
        finally:
            os.close(fd)

    def _before_open_batch(self, fd: int, at: Position) -> Position:
        """``at`` (a line end the workers verified) when no batch is open there; else the
        head before that batch's first event, so the sequential scan checks the batch whole."""
        window = 1 << 16
        while True:
            low = max(0, at.offset - window)
            lines = os.pread(fd, at.offset - low, low)[:-1].split(b"\n")
            if low > 0:
                lines.pop(0)  # may have begun before the window
                if not lines:  # not one whole line in it
                    window *= 4
                    continue
            part = batch_part(canonical.decode(lines[-1]).get(BATCH)) if lines else None
            if part is None or part[0] == part[1]:
                return at
            index = part[0]
            if len(lines) >= index or low == 0:
                index = min(index, len(lines))
                first = canonical.decode(lines[-index])
                start = at.offset - sum(len(line) + 1 for line in lines[-index:])
                return Position(start, first[self.layout.sequence_field] - 1, first[self.layout.prev_field])
            window *= 4

    def unchanged(self) -> bool:
        """True when the file is still the verified one, has not grown (so there
        is no torn tail either) and was not written since it was last seen (its
        size, mtime and ctime: ``LiveIntegrity``), and ``read_new`` would yield nothing.

        One ``fstat`` of the kept append descriptor when there is one (its inode
        is the verified file; a re-chaining command's rename over the path leaves
        it unlinked, which counts as changed; the path itself is checked right
        before any write), else one ``lstat`` of the path. Anything else (a new
        file, growth, a link, a second name) goes the long way through
        ``read_new``'s opened-descriptor checks.
        """
        identity = self.identity
        if identity is None:
            return False
        held = self._append
        if held.fd is not None and held.identity == identity:
            # The held file's inode, and so its type and identity, cannot change.
            info = os.fstat(held.fd)
        else:
            try:
                info = os.lstat(self._path_str)
            except FileNotFoundError:
                return False
            if not stat.S_ISREG(info.st_mode) or (info.st_dev, info.st_ino) != identity:
                return False
        if info.st_nlink == 1 and info.st_size == self.position.offset and self.live.unchanged(info):
            self.torn = None
            return True
        return False

    def _scan(
        self, fd: int, size: int, verify_hash_until: int, progress: ProgressFn | None, voucher: Any = None,
    ) -> Iterator[Record]:
        """The verify loop, kept tight: a few microseconds per event (one decode, one
        canonical encode and a SHA-256 when hashes are checked; one decode when not).

        A fast path accepts a line only when it is exactly what ``check_line``
        would accept; anything else goes to ``check_line`` itself, which raises
        the precise diagnostic. The head lives in locals and is written back
        when the generator stops for any reason, so it always names the last
        record that verified. On a long scan the running prefix digest is fed
        from a thread (``_DigestFeeder``).

        The events of a command's batch (``BATCH`` markers) are held back until
        its last one verified, and the head only ever moves past whole batches:
        a batch still open at a chunk's end is read again with the next chunk
        (which is then read larger, so a huge batch costs no quadratic re-reads),
        and one still open at the file's end is a torn tail like a partial line.
        """
        layout = self.layout
        seq_f, prev_f, hash_f, schema_f = layout.sequence_field, layout.prev_field, layout.hash_field, layout.schema_field
        batch_f = BATCH
        # The open batch: its records so far (None when no batch is open), its size and the head before it.
        held: list[Record] | None = None
        batch_size = batch_at = batch_seq = 0
        batch_prev: str | None = None
        classify = layout.classify_schema
        decode, encode_into = canonical.decode, canonical.encode_into
        cut_span = HashCut(hash_f).span
        buf = bytearray()  # the line re-encoded, then cut down to the hash-less bytes
        sha256 = hashlib.sha256
        new_record = tuple.__new__  # Record(...) goes through a Python-level __new__
        ok_type, ok_value = None, _UNJUDGED  # the type and value of the last schema judged "ok"
        offset, sequence, prev = self.position
        # The digest takes whole verified runs of bytes, once per chunk (and once
        # more if the scan stops early), not one call per line.
        digest, hashed = (self.digest if self._digest_at == offset else None), offset
        # With a lot to read, a thread feeds the digest (hashlib lets go of the GIL for big updates).
        threaded, feeder = size - offset >= DIGEST_THREAD_MIN_BYTES, None
        # Where a checked digest of the bytes before it vouches for them (a checkpoint).
        adopt_at, adopted = self._adopt or (_NO_OFFSET, None)
        os.lseek(fd, offset, os.SEEK_SET)
        pending = data = b""
        base = offset  # the file offset of data[0]
        self.torn = None
        try:
            while True:
                chunk = os.read(fd, CHUNK if len(pending) < CHUNK else len(pending))
                if not chunk:
                    break
                data, base = (pending + chunk if pending else chunk), offset
                if voucher is not None:  # lines the workers found canonical and hashing right
                    verify_hash_until = max(verify_hash_until, voucher.vouched_at(offset))
                lines = data.split(b"\n")
                pending = lines.pop()
                for line in lines:
                    end = offset + len(line) + 1
                    # Fast path: accept only what check_line would accept; on any
                    # doubt, check_line decides and raises the precise diagnostic.
                    try:
                        event = decode(line)
                        # Subscripts, not .get: a missing field (or a record that is
                        # not an object) leaves the line to check_line.
                        schema, claimed, number, linked = event[schema_f], event[hash_f], event[seq_f], event[prev_f]
                    except Exception:
                        event = None
                    else:
                        # ``is`` first: the usual schema value is a small int, the very object judged before.
                        if schema is not ok_value and (type(schema) is not ok_type or schema != ok_value):
                            if classify(schema) == "ok":
                                ok_type, ok_value = type(schema), schema
                            else:
                                claimed = None
                        if (
                            type(claimed) is not str or linked != prev
                            or type(number) is not int or number != sequence + 1
                        ):
                            event = None
                        elif end > verify_hash_until:
                            # The line must be the canonical encoding, and the hash that
                            # of the canonical encoding without the hash field: the line
                            # with that member cut out (HashCut), or when HashCut cannot
                            # prove where the member is, the hash-less event encoded.
                            encode_into(event, buf)
                            if buf != line:
                                event = None
                            else:
                                cut = cut_span(line, claimed)
                                del event[hash_f]
                                if cut is not None:
                                    del buf[cut[0]:cut[1]]
                                else:
                                    encode_into(event, buf)
                                # The hash field last, as check_line leaves it (and as
                                # services have always shown re-hashed events).
                                event[hash_f] = claimed
                                if sha256(buf).hexdigest() != claimed:
                                    event = None
                    if event is None:
                        event = check_line(line, layout, Position(offset, sequence, prev), self.name, verify_hash=end > verify_hash_until)
                        claimed = event[hash_f]
                    if held is not None or batch_f in event:
                        part = batch_part(event.get(batch_f))
                        if held is None:
                            if part is None or part[0] != 1:
                                raise ChainError(self.name, offset, sequence + 1, f"{batch_f} {event.get(batch_f)!r} does not open a batch")
                            held, batch_size, batch_at, batch_seq, batch_prev = [], part[1], offset, sequence, prev
                        elif part is None or part != (len(held) + 1, batch_size):
                            raise ChainError(
                                self.name, offset, sequence + 1,
                                f"event {len(held) + 1} of a batch of {batch_size} was due, but {batch_f} is {event.get(batch_f)!r}",
                            )
                    start = offset
                    offset = end
                    sequence += 1
                    prev = claimed
                    record = new_record(Record, (event, start, end))
                    if held is not None:
                        held.append(record)
                        if len(held) < batch_size:
                            if end >= adopt_at:
                                raise ChainError(self.name, start, sequence, "the checkpoint falls inside a batch")
                            continue
                    if end >= adopt_at:  # the bytes so far are vouched for by a checked digest, or PrefixChanged
                        vouched = adopted()  # type: ignore[misc]
                        if end != adopt_at:  # past it without a line ending there: those bytes changed
                            raise ChainError(self.name, start, sequence, "no line ends where the checkpoint says one does")
                        adopt_at, self._adopt = _NO_OFFSET, None
                        if digest is None:
                            digest, hashed = vouched, end
                    if held is None:
                        yield record
                    else:  # the batch's last event: the whole batch verified
                        batch, held = held, None
                        yield from batch
                if held is not None:  # a batch still open: its lines are read again with the next chunk
                    pending = data[batch_at - base:]
                    offset, sequence, prev, held = batch_at, batch_seq, batch_prev, None
                if digest is not None:
                    if threaded and feeder is None:
                        feeder = _DigestFeeder(digest)
                    (feeder or digest).update(memoryview(data)[hashed - base:offset - base])
                    hashed = offset
                if progress is not None:
                    progress(offset, size)
        finally:
            if held is not None:  # stopped inside a batch: the head stays before it
                offset, sequence, prev = batch_at, batch_seq, batch_prev
            if digest is not None and offset > hashed:
                (feeder or digest).update(memoryview(data)[hashed - base:offset - base])
            if feeder is not None:
                feeder.finish()
            self.position = Position(offset, sequence, prev)
            self.digest, self._digest_at = digest, (offset if digest is not None else -1)
        if adopt_at != _NO_OFFSET:  # shorter now than when its checkpoint was checked
            raise ChainError(
                self.name, offset, sequence,
                f"the file ends before byte {adopt_at}, where its checkpoint says verified events end: "
                "acknowledged events are gone",
            )
        if pending:
            reason = SHORT_BATCH if b"\n" in pending else PARTIAL_LINE
            self.torn = TornTail(offset, len(pending), hashlib.sha256(pending).hexdigest(), reason)

    def read_line_at(self, start: int, end: int) -> bytes:
        """The bytes of lines already verified or staged, from ``start`` to ``end``."""
        durable = self.position.offset
        staged = b""
        if end > durable:
            staged = b"".join(self._staged)[max(start, durable) - durable:end - durable]
            if start >= durable:
                return staged
            end = durable
        fd = safefs.open_read(self.path, self.base)
        if fd is None:
            raise ChainError(self.name, start, None, "the stream file disappeared")
        try:
            return os.pread(fd, end - start, start) + staged
        finally:
            os.close(fd)

    # writing (exclusive lock held) -------------------------------------------

    def cut_torn_tail(self) -> TornTail | None:
        """Truncate a partial final line found by the last read; returns it."""
        torn = self.torn
        if torn is None:
            return None
        fd, _ = safefs.open_append(self.path, self.base)
        try:
            if os.fstat(fd).st_size != torn.offset + torn.length:
                raise ChainError(self.name, torn.offset, self.position.sequence, "the partial tail changed while being repaired")
            os.ftruncate(fd, torn.offset)
            os.fsync(fd)
            self.live.saw(os.fstat(fd))
        finally:
            os.close(fd)
        self.torn = None
        return torn

    def stage(self, fields_list: list[dict[str, Any]], extra: dict[str, Any] | None = None) -> list[Record]:
        """Seal events (each with the fields of ``extra`` added) after the verified
        (and already staged) head, in memory only. Two or more events are marked
        as one batch (``BATCH``: index and size), so a crash that leaves only some
        of them is a torn tail, never a half-applied command.

        Nothing is durable until ``flush``; callers acknowledge nothing before it.
        The caller must have read to the end (``read_new``) and cut any torn
        tail under the same exclusive lock.
        """
        if self.torn is not None:
            raise ChainError(self.name, self.torn.offset, self.position.sequence, "a partial tail must be cut before appending")
        position = self._staged_head or self.position
        layout = self.layout
        records, lines = [], []
        size = len(fields_list)
        for index, fields in enumerate(fields_list, 1):
            # Two or more events are one batch: a reader takes all of them or none.
            event, line = seal(fields, layout, position, extra if size == 1 else {**(extra or {}), BATCH: [index, size]})
            start = position.offset
            end = start + len(line)
            # tuple.__new__: a NamedTuple's own __new__ is a Python-level call.
            records.append(tuple.__new__(Record, (event, start, end)))
            lines.append(line)
            position = tuple.__new__(Position, (end, event[layout.sequence_field], event[layout.hash_field]))
        # Staged only once every event sealed: an event that cannot be encoded stages none.
        self._staged.extend(lines)
        self._staged_head = position
        return records

    def stage_sealed(self, lines: list[bytes]) -> list[Record]:
        """Stage lines sealed elsewhere (canonical, without their newline) after the verified
        (and already staged) head, once all of them are checked to follow it as whole batches
        (``chain.verify_chain``); nothing is staged when one does not. As ``stage``: durable
        only at ``flush``."""
        if self.torn is not None:
            raise ChainError(self.name, self.torn.offset, self.position.sequence, "a partial tail must be cut before appending")
        position = self._staged_head or self.position
        layout = self.layout
        stored, events, start = [], [], position.offset
        for line in lines:
            try:
                event = canonical.decode(line)
            except (msgspec.DecodeError, UnicodeDecodeError):
                event = None
            if not isinstance(event, dict):
                event = {}
            sequence, claimed = event.get(layout.sequence_field), event.get(layout.hash_field)
            stored.append(StoredEvent(sequence if type(sequence) is int else -1, claimed if type(claimed) is str else "", line, start))
            events.append(event)
            start += len(line) + 1
        head = verify_chain(stored, layout, self.name, Head(position.sequence, position.hash), start=position.offset)
        records = []
        for event, item in zip(events, stored):
            event[layout.hash_field] = event.pop(layout.hash_field)  # last, as a sealed or verified event has it
            records.append(Record(event, item.start, item.end))
        self._staged.extend(item.line + b"\n" for item in stored)
        if stored:
            self._staged_head = Position(stored[-1].end, head.sequence, head.hash)
        return records

    def flush(self) -> None:
        """Write every staged line in one write and fsync; the head moves only then.

        On any failure the staged lines are dropped and whatever part of them
        reached the file is cut off again: nothing unacknowledged stays.
        """
        if not self._staged:
            return
        data, head = b"".join(self._staged), self._staged_head
        assert head is not None  # set whenever lines are staged
        self._staged, self._staged_head = [], None
        fd = self._append_descriptor()
        # The running prefix digest takes the bytes before the write, while the
        # caches are warm, and counts again only once they are durable: should
        # anything below fail, ``_digest_at`` stays unset and the digest unused.
        grows = self.digest is not None and self._digest_at == self.position.offset
        if grows:
            self._digest_at = -1
            self.digest.update(data)
        try:
            safefs.write_all(fd, data)
            os.fsync(fd)
        except OSError:
            try:
                os.ftruncate(fd, self.position.offset)
            finally:
                self._append.close()  # after a failed write or fsync, trust nothing about it
            raise
        if grows:
            self._digest_at = head.offset
        self.position = head
        self.live.saw(os.fstat(fd))  # under the lock: what this write left is what was verified

    def _append_descriptor(self) -> int:
        """The O_APPEND descriptor for the next write, checked to be the verified file
        at its verified size.

        Kept open between appends and re-checked with one lstat right before the
        write (see ``HeldDescriptor.still_at``); opened the safe way (no links, no special
        files, folders inside the project) the first time, after the file was
        replaced, or after a failed write. Watchers see appends through
        IN_MODIFY, not a close.
        """
        held = self._append
        info = held.still_at(self._path_str)
        if info is None:
            try:
                fd, _ = safefs.open_append(self.path, self.base)
            except FileNotFoundError:  # the streams folder does not exist yet
                safefs.ensure_dir(self.path.parent, self.base)
                fd, _ = safefs.open_append(self.path, self.base)
            info = os.fstat(fd)
            held.hold(fd, info)
        if info.st_size != self.position.offset or (self.identity is not None and held.identity != self.identity):
            raise ChainError(
                self.name, info.st_size, self.position.sequence,
                "the file changed since it was verified; read it again under the lock before appending",
            )
        self.identity = held.identity
        return held.fd  # type: ignore[return-value]

    def close(self) -> None:
        """Close the kept append and read descriptors (they reopen on the next append or read)."""
        self._append.close()
        self._reader.close()

    def adopt_digest(self, offset: int, vouch: Callable[[], Any]) -> None:
        """Once a scan from 0 gets to ``offset``, call ``vouch`` for the checked digest
        of bytes [0, offset) and carry on from it; it raises if those bytes changed
        (it may still be computing them in a thread while the scan reads them)."""
        if self.digest is None and self.position.offset == 0:
            self._adopt = (offset, vouch)

    def resume_at(self, head: Position, identity: tuple[int, int], digest: Any, seen: os.stat_result) -> None:
        """Take ``head`` of the file ``identity`` as verified (a projection snapshot's start;
        the caller holds the lock and has just checked it, and ``seen`` is the file's fstat
        as checked): reading goes on after it, and the live-integrity checks carry on from
        ``seen``. ``digest``, the checked SHA-256 of every byte before the head, lets the
        running digest carry on as after a scan from byte 0; None (the verified mark vouched
        for the prefix instead) leaves the stream without one, like a head moved by hand."""
        self.discard_staged()
        self.position, self.identity = head, identity
        self.digest, self._digest_at, self._adopt = (None, -1, None) if digest is None else (digest.copy(), head.offset, None)
        self.torn = None
        self.live.forget()
        self.live.saw(seen)

    def take_digest(self, digest: Any, offset: int) -> None:
        """``digest`` is the checked SHA-256 of bytes [0, ``offset``); it becomes the running
        digest when ``offset`` is the head (the live-integrity check computed it afresh)."""
        if offset == self.position.offset and not self._staged:
            self.digest, self._digest_at = digest, offset

    def forget(self) -> None:
        """Drop everything known about the file: the next read verifies it from byte 0."""
        self.discard_staged()
        self._append.close()
        self._reader.close()
        self.position = Position()
        self.identity = None
        self.digest = self._adopt = None
        self._digest_at = -1
        self.live.forget()

    def prefix_digest(self) -> str | None:
        """SHA-256 hex of bytes [0, head), when this process knows it."""
        if self.digest is not None and self._digest_at == self.position.offset:
            hexdigest: str = self.digest.hexdigest()
            return hexdigest
        return None

    def discard_staged(self) -> None:
        self._staged = []
        self._staged_head = None

    def append(self, fields_list: list[dict[str, Any]]) -> list[Record]:
        """Seal and durably append events after the verified head, in one write + fsync."""
        records = self.stage(fields_list)
        self.flush()  # drops the staged lines whether it succeeds or not
        return records

