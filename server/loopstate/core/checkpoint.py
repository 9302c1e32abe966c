"""Checkpoints of a verified head, so a short-lived process need not re-hash it all.

A checkpoint names the stream file's identity, the byte offset and the start of
the last verified line, its sequence and its hash, and the SHA-256 of every
byte before the offset. Opening from a checkpoint re-checks that very line (its
hash and its canonical form) and the prefix digest (one pass of hashlib over
the file, far cheaper than re-hashing each event); every line before it is
still parsed, sequenced and linked, but not re-hashed one by one. So any byte
changed before the checkpoint is still caught. A checkpoint that no longer
matches its file is CORRUPT_LEDGER: the verified history changed. A missing or
unreadable checkpoint is only a lost cache and means a full verify.

A checkpoint is bound to its file by (device, inode) and by the hash of the
file's first record: a file system reuses a freed inode number (ext4 does), so
after a re-chaining command replaced the stream a stale checkpoint could
otherwise name the new file. Those commands also delete the checkpoint, and
fsync its folder, before they replace the stream (``drop``).
"""

from __future__ import annotations

import os
import threading
from pathlib import Path
from typing import Any, Callable, NamedTuple

import msgspec

from loopstate.core import canonical, safefs, verified_mark
from loopstate.core.chain import ChainError, Position, check_line
from loopstate.core.live_integrity import digest_of_prefix
from loopstate.core.stream import Stream

# Write a new checkpoint once this many verified bytes lie past the old one.
# 1 MiB is ~1,400 intent-sized events: a short-lived reader (a hook) re-hashes at
# most that many, about 8 ms, while the writer pays one unsynced atomic write
# per ~1,400 appends.
CHECKPOINT_EVERY = 1 << 20


class Checkpoint(msgspec.Struct, frozen=True):
    dev: int
    ino: int
    line_start: int
    offset: int
    sequence: int
    hash: str
    prefix_sha256: str | None = None
    # The hash of the file's first record (None in checkpoints from before the binding: ignored).
    first_hash: str | None = None


class PrefixChanged(ChainError):
    """The bytes before a checkpoint are not the bytes that were verified."""


def path_for(stream: Stream) -> Path:
    return stream.base / "checkpoints" / f"{stream.name}.json"


def drop(stream: Stream) -> None:
    """Delete the stream's checkpoint and verified mark durably (their folder fsynced),
    before a re-chaining command replaces the stream they describe."""
    safefs.unlink_durably(path_for(stream), stream.base)
    verified_mark.drop(stream)


def _first_hash(fd: int, stream: Stream, limit: int) -> str | None:
    """The hash field of the file's first line (read no further than ``limit``), if it has one."""
    data = b""
    while b"\n" not in data and len(data) < limit:
        block = os.pread(fd, min(1 << 16, limit - len(data)), len(data))
        if not block:
            break
        data += block
    line = data.split(b"\n", 1)[0]
    try:
        event = canonical.decode(line)
    except Exception:  # msgspec.DecodeError: the full verify that follows names it
        return None
    value = event.get(stream.layout.hash_field) if isinstance(event, dict) else None
    return value if isinstance(value, str) else None


def load(stream: Stream) -> Checkpoint | None:
    try:
        data = safefs.read_file(path_for(stream), stream.base)
    except OSError:
        return None
    if not data:
        return None
    try:
        return msgspec.json.decode(data, type=Checkpoint)
    except msgspec.DecodeError:
        return None


def validate(stream: Stream, checkpoint: Checkpoint, *, concurrent: bool = False) -> int:
    """Check ``checkpoint`` against the file; returns the offset hashes are trusted to.

    Returns 0 when the checkpoint belongs to another file (replaced by a
    re-chaining command: another (device, inode), or another first record):
    then everything is verified again.

    With ``concurrent`` the prefix digest (one pass over the bytes before the
    checkpoint) is computed in a thread while the caller scans those bytes,
    instead of before: the scan asks for it when it reaches the checkpoint,
    and only then is the prefix vouched for; a mismatch raises PrefixChanged
    there, and the caller must drop what it folded from the prefix.
    """
    offset, prefix, _ = _check(stream, checkpoint, concurrent=concurrent)
    if prefix is not None:
        if not concurrent:
            prefix.checked()
        stream.adopt_digest(checkpoint.offset, prefix.checked)
    return offset


class Vouched(NamedTuple):
    """Why a binding's prefix may be trusted: ``digest`` is the checked SHA-256 of the bytes
    before it (a hashlib object), or None when the verified mark vouched instead; ``seen`` is
    the stream's fstat as it was checked."""

    digest: Any
    seen: os.stat_result


def vouch(stream: Stream, binding: Checkpoint) -> Vouched | None:
    """Whether the file is still the one ``binding`` names and every byte before its head
    is the one a verified read saw: the same (device, inode) and first record, the head
    record there re-hashing to the binding's hash, and then either the verified mark
    matching the file's fstat (``verified_mark``: nobody wrote it since a process that
    had verified it through at least this head; O(1)) or the SHA-256 of the bytes before
    the head equal to ``prefix_sha256`` (O(history)). None for anything else (another
    file, bytes gone or changed, neither a matching mark nor a prefix digest). What a
    projection snapshot stands on: it vouches for nothing the mark or the digest did not
    cover, so a mismatch only means "fold from the start", never an error of its own
    (the full read reports one)."""
    if binding.first_hash is None:
        return None
    mark = verified_mark.load(stream)

    def marked(info: os.stat_result) -> bool:
        return mark is not None and mark.matches(info) and binding.offset <= mark.offset

    try:
        offset, prefix, info = _check(stream, binding, concurrent=False, trusted=marked)
        if offset != binding.offset:
            return None
        if marked(info):
            return Vouched(None, info)
        return None if prefix is None else Vouched(prefix.checked(), info)
    except ChainError:  # PrefixChanged included
        return None


def head_holds(stream: Stream, binding: Checkpoint) -> bool:
    """Whether the record ``binding`` names is where it says in the same file (identity,
    first record), re-hashing to its hash: for a caller that has itself verified the bytes
    up to at least ``binding.offset`` (so that record is one of the verified chain), and
    needs only to know the binding names it. No prefix digest is computed."""
    if binding.first_hash is None:
        return False
    try:
        offset, _, _ = _check(stream, binding, concurrent=False, trusted=lambda info: True)
    except ChainError:
        return False
    return offset == binding.offset


def _check(
    stream: Stream, checkpoint: Checkpoint, *, concurrent: bool, trusted: Callable[[os.stat_result], bool] | None = None,
) -> tuple[int, "_PrefixDigest | None", os.stat_result]:
    """Everything ``validate`` checks but the digest comparison: (0, None) for another file,
    else the checkpoint's offset and its prefix digest, computing (None without one, or
    when ``trusted(fstat)`` says the prefix needs no digest), with the file's fstat."""
    fd = safefs.open_read(stream.path, stream.base)
    if fd is None:
        raise ChainError(stream.name, 0, None, "the stream file is missing but a checkpoint of it exists")
    prefix: _PrefixDigest | None = None
    try:
        info = os.fstat(fd)
        if (info.st_dev, info.st_ino) != (checkpoint.dev, checkpoint.ino) or checkpoint.first_hash is None:
            return 0, None, info
        first = _first_hash(fd, stream, max(checkpoint.offset, 1))
        if first is not None and first != checkpoint.first_hash:
            return 0, None, info  # another file; one with no first record left is checked below (events are gone)
        if info.st_size < checkpoint.offset:
            raise ChainError(
                stream.name, info.st_size, checkpoint.sequence,
                f"the file is {info.st_size} bytes but was verified up to byte {checkpoint.offset}: acknowledged events are gone",
            )
        if not 0 <= checkpoint.line_start < checkpoint.offset:
            raise ChainError(stream.name, checkpoint.line_start, checkpoint.sequence, "the checkpointed record is not where it was")
        line = os.pread(fd, checkpoint.offset - checkpoint.line_start, checkpoint.line_start)
        if checkpoint.prefix_sha256 and (trusted is None or not trusted(info)):
            prefix = _PrefixDigest(stream.name, fd, checkpoint, in_thread=concurrent)
    finally:
        os.close(fd)
    if not line.endswith(b"\n"):
        raise ChainError(stream.name, checkpoint.line_start, checkpoint.sequence, "the checkpointed record is not where it was")
    layout = stream.layout
    try:
        event = canonical.decode(line[:-1]) if line[:1] == b"{" else None
    except msgspec.DecodeError:  # not one record there (several, or part of one)
        event = None
    if not isinstance(event, dict):
        raise ChainError(stream.name, checkpoint.line_start, checkpoint.sequence, "the checkpointed record is not where it was")
    before = Position(checkpoint.line_start, checkpoint.sequence - 1, event.get(layout.prev_field))
    checked = check_line(line[:-1], layout, before, stream.name)
    if checked[layout.hash_field] != checkpoint.hash:
        raise ChainError(stream.name, checkpoint.line_start, checkpoint.sequence, "the checkpointed record's hash changed")
    return checkpoint.offset, prefix, info


class _PrefixDigest:
    """SHA-256 of the bytes before a checkpoint, computed now or in a thread, and
    compared with the checkpoint's when ``checked()`` is called."""

    def __init__(self, stream_name: str, fd: int, checkpoint: Checkpoint, *, in_thread: bool) -> None:
        self._stream_name = stream_name
        self._checkpoint = checkpoint
        self._digest: Any = None
        self._error: BaseException | None = None
        self._thread: threading.Thread | None = None
        self._verified = False
        if in_thread:
            own = os.dup(fd)  # the caller closes its descriptor; the thread reads through its own
            self._thread = threading.Thread(target=self._compute, args=(own, True), name="loopstate-prefix-digest", daemon=True)
            self._thread.start()
        else:
            self._compute(fd, False)

    def _compute(self, fd: int, owned: bool) -> None:
        try:
            self._digest = digest_of_prefix(fd, self._checkpoint.offset)
        except BaseException as exc:  # handed to checked(), in the caller's thread
            self._error = exc
        finally:
            if owned:
                os.close(fd)

    def checked(self) -> Any:
        """The digest, once it is known to match the checkpoint's; else PrefixChanged."""
        if self._thread is not None:
            self._thread.join()
            self._thread = None
        if self._error is not None:
            raise self._error
        if self._verified:
            return self._digest  # it may have taken further bytes since (a scan carries on from it)
        if self._digest.hexdigest() != self._checkpoint.prefix_sha256:
            raise PrefixChanged(
                self._stream_name, 0, None,
                f"the bytes before the checkpoint at byte {self._checkpoint.offset} changed although every hash still "
                "links (the file or its checkpoint was edited)",
            )
        self._verified = True
        return self._digest


def current(stream: Stream, last_line_start: int) -> Checkpoint | None:
    """The stream's verified head as a checkpoint (caller holds the lock), or None when
    there is nothing to bind to: no events, or the file at the path is no longer the one read."""
    if stream.identity is None or not stream.position.offset:
        return None
    fd = safefs.open_read(stream.path, stream.base)
    if fd is None:
        return None
    try:
        info = os.fstat(fd)
        if (info.st_dev, info.st_ino) != stream.identity:
            return None
        first = _first_hash(fd, stream, stream.position.offset)
    finally:
        os.close(fd)
    return Checkpoint(
        dev=stream.identity[0], ino=stream.identity[1], line_start=last_line_start,
        offset=stream.position.offset, sequence=stream.position.sequence, hash=stream.position.hash or "",
        prefix_sha256=stream.prefix_digest(), first_hash=first,
    )


def save(stream: Stream, last_line_start: int) -> Checkpoint | None:
    """Record the stream's current verified head (caller holds the exclusive lock); returns
    the record of that head, which a projection snapshot of the same head binds to
    (written to the checkpoint file only with a prefix digest)."""
    record = current(stream, last_line_start)
    if record is None or record.prefix_sha256 is None:
        # Without the digest of every byte before the head (a start the verified mark
        # vouched for, a head moved by hand) the file is left as it is: a checkpoint
        # without one would let a later open skip re-hashing bytes nobody hashed. The
        # record is still what a snapshot of this head binds to (``vouch`` then takes
        # only the mark).
        return record
    target = path_for(stream)
    safefs.ensure_dir(target.parent, stream.base)
    # Not fsynced: a checkpoint lost in a crash only costs a longer verify.
    safefs.atomic_write(target, stream.base, msgspec.json.encode(record), durable=False)
    return record
