"""Noticing, in a long-lived process, that bytes it already verified changed under it.

A ``Stream`` that has verified a head reads only what was appended after it.
That is what keeps catching up O(new bytes), and it is also a blind spot: an
edit of the verified part of the file that keeps its inode (an overwrite in
place, a truncate and rewrite) would go unseen, and the holder would serve the
old state and append after bytes that are no longer the ones it verified.

``LiveIntegrity`` closes that cheaply, from what every catch-up already has in
hand, an ``fstat`` of the file:

- it keeps the file's size, mtime and ctime as last seen under the lock (after
  a verified read, after this process's own write and fsync, after a tail cut);
  the same again means nothing was written since (the kernel sets ctime on
  every write and truncate, and nothing in userspace can set it back);
- the same size (no growth) with another mtime or ctime: the file was written
  without growing. Every verified byte is checked again: the SHA-256 of
  ``[0, head)`` against the running prefix digest the stream keeps;
- growth: the line that ends at the verified head must still be the verified
  head event (re-read, canonical, re-hashed, the head's hash), then the new
  bytes are verified as usual.

Once a change is found the stream stays refused with the same CORRUPT_LEDGER
for as long as the file's stat stays what it was; a later write is checked
again (bytes put back as they were verify again). What this cannot see, and
what each check costs, is in docs/storage.md (*Bytes that change under a
long-lived process*).
"""

from __future__ import annotations

import hashlib
import os
from collections.abc import Generator
from typing import Any, NamedTuple, Protocol

from loopstate.core import canonical
from loopstate.core.chain import ChainError, ChainLayout, Position, check_line
from loopstate.core.errors import LoopstateError
from loopstate.core.record import Record


class Verified(Protocol):
    """The stream whose verified bytes are watched (``core/stream.Stream``): this module needs
    its head, its running digest and a fresh reader of the same file, nothing else of it."""

    name: str
    layout: ChainLayout
    position: Position
    digest: Any

    def prefix_digest(self) -> str | None: ...

    def take_digest(self, digest: Any, offset: int) -> None: ...

    def reopened(self) -> Verified:
        """A new reader of the same file, with nothing verified yet."""
        ...

    def read_new(self) -> Generator[Record, None, None]: ...

# The head line is found by reading back from the head this many bytes at a time (growing).
_TAIL_WINDOW = 4096


class Seen(NamedTuple):
    """What an ``fstat`` says about a file's bytes: its size and when they last changed."""

    size: int
    mtime_ns: int
    ctime_ns: int


def seen_in(info: os.stat_result) -> Seen:
    return Seen(info.st_size, info.st_mtime_ns, info.st_ctime_ns)


class LiveIntegrity:
    """The last stat seen of a stream's verified file, and the change found in it, if any."""

    __slots__ = ("seen", "broken")

    def __init__(self) -> None:
        self.seen: Seen | None = None
        self.broken: tuple[Seen, ChainError] | None = None

    def unchanged(self, info: os.stat_result) -> bool:
        """True when ``info`` is the stat last seen: nothing was written to the file since."""
        seen = self.seen
        return (
            seen is not None and info.st_ctime_ns == seen.ctime_ns
            and info.st_mtime_ns == seen.mtime_ns and info.st_size == seen.size
        )

    def saw(self, info: os.stat_result) -> None:
        """The file as it is now holds exactly the verified bytes (and maybe a torn tail)."""
        self.seen = seen_in(info)

    def forget(self) -> None:
        """Another file, or a head moved by hand: nothing seen yet."""
        self.seen = self.broken = None

    def check(self, stream: Verified, fd: int, info: os.stat_result, *, grown_vouched: bool = False) -> None:
        """Raise CORRUPT_LEDGER if bytes ``stream`` verified in this file (``fd``,
        ``info``: the same device and inode, at least as long as the head) changed.

        ``grown_vouched``: the file grew, and its verified mark vouches for every byte of
        it as ``info`` shows it (``Stream.read_new``). The head line is then not re-read:
        the read that follows links its first new line to the head's hash, and the chain
        that line belongs to was verified whole by the mark's writer, so the bytes before
        the head are the ones verified here, short of a SHA-256 collision."""
        now = seen_in(info)
        if self.broken is not None:
            if self.broken[0] == now:
                raise self.broken[1]
            self.broken = None  # written again since: look again
        seen = self.seen
        if seen is None or now == seen or not stream.position.offset:
            return
        if now.size <= seen.size:
            reason, where = _prefix_changed(stream, fd), 0  # somewhere before the head
        elif grown_vouched:
            reason, where = None, 0
        else:
            reason, where = _head_line_changed(stream, fd), stream.position.offset
        if reason is not None:
            error = _first_changed_record(stream) or ChainError(stream.name, where, stream.position.sequence, reason)
            self.broken = (now, error)
            raise error
        self.seen = now


def _first_changed_record(stream: Verified) -> ChainError | None:
    """The diagnostic a full verify gives for the first bad record before the head (None:
    every record up to it verifies, so what changed is not one record; the caller says what).

    Paid once, when a change is found: a fresh verifying read from byte 0.
    """
    fresh = stream.reopened()
    reads = fresh.read_new()
    try:
        for record in reads:
            if record.end >= stream.position.offset:
                break
    except ChainError as exc:
        return exc
    finally:
        reads.close()
    return None


def _prefix_changed(stream: Verified, fd: int) -> str | None:
    """Why the bytes before the head are not the verified ones (None: they are): one
    SHA-256 pass over them, against the running prefix digest the stream keeps.

    A stream that keeps no digest (it started from a snapshot the verified mark vouched
    for, or its head was moved by hand) verifies every record again from byte 0 through
    the head instead, which must end exactly at the head with the head's hash; the digest
    that read computes is the stream's from then on.
    """
    head = stream.position
    known = stream.prefix_digest()
    if known is None:
        return _chain_changed(stream)
    if prefix_sha256(fd, head.offset) == known:
        return None
    return (f"the file was written without growing, and its bytes before the verified head at byte {head.offset} "
            "are not the ones that were verified (an edit in place)")


def _chain_changed(stream: Verified) -> str | None:
    """Why a fresh verify of ``[0, head)`` does not end at the verified head (None: it does)."""
    head = stream.position
    fresh = stream.reopened()
    reads = fresh.read_new()
    last = None
    try:
        for record in reads:
            last = record
            if record.end >= head.offset:
                break
    except ChainError:  # the caller's full verify names the record
        return f"the file was written without growing, and a record before the verified head at byte {head.offset} changed"
    finally:
        reads.close()
    if last is None or last.end != head.offset or last.event.get(stream.layout.hash_field) != head.hash:
        return (f"the file was written without growing, and its records before the verified head at byte {head.offset} "
                "are not the ones that were verified (an edit in place)")
    digest = fresh.digest if fresh.prefix_digest() is not None and fresh.position.offset == head.offset else None
    if digest is not None:
        stream.take_digest(digest, head.offset)
    return None


def prefix_sha256(fd: int, end: int) -> str:
    """SHA-256 hex of bytes [0, end) of ``fd``, computed the way checkpoints compute theirs."""
    return str(digest_of_prefix(fd, end).hexdigest())


def digest_of_prefix(fd: int, end: int) -> Any:
    """SHA-256 (the hashlib object) of bytes [0, end): hashlib on 1 MiB blocks, without holding
    the GIL. The one way every prefix digest is computed: here and by checkpoints."""
    digest = hashlib.sha256()
    offset = 0
    while offset < end:
        block = os.pread(fd, min(1 << 20, end - offset), offset)
        if not block:
            break
        digest.update(block)
        offset += len(block)
    return digest


def _head_line_changed(stream: Verified, fd: int) -> str | None:
    """Why the line ending at the verified head is no longer the head event (None: it is)."""
    head = stream.position
    found = _line_ending_at(fd, head.offset)
    if found is None:
        return f"no line ends at byte {head.offset}, where the verified head does"
    start, line = found
    if not verified_line(line, start, stream.layout, stream.name, head.sequence, head.hash):
        return f"the verified head record (sequence {head.sequence}) changed"
    return None


def _line_ending_at(fd: int, end: int) -> tuple[int, bytes] | None:
    """The start and bytes (without its newline) of the line that ends at ``end``."""
    window = _TAIL_WINDOW
    while True:
        low = max(0, end - window)
        data = os.pread(fd, end - low, low)
        if len(data) != end - low or not data.endswith(b"\n"):
            return None
        cut = data.rfind(b"\n", 0, len(data) - 1)
        if cut >= 0:
            return low + cut + 1, data[cut + 1:-1]
        if low == 0:
            return 0, data[:-1]
        window *= 4


def verified_line(line: bytes, start: int, layout: ChainLayout, name: str, sequence: int, hash_: str | None) -> bool:
    """True when ``line`` (no newline) is a canonical, correctly hashed event with this
    sequence and hash: byte for byte the record that was verified there."""
    try:
        event = canonical.decode(line) if line[:1] == b"{" else None
        if not isinstance(event, dict):
            return False
        checked = check_line(line, layout, Position(start, sequence - 1, event.get(layout.prev_field)), name)
    except (LoopstateError, ValueError):  # a changed line: any verdict but the head's is a change
        return False
    return bool(checked[layout.hash_field] == hash_)
