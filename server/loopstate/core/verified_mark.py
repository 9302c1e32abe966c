"""The verified mark: what a cold reader needs to trust a snapshot's prefix without hashing it.

A projection snapshot is folded through one head of its stream. Before using
it, a cold reader must know the bytes before that head are still the ones the
state was folded from. Hashing them all (``checkpoint.vouched_digest``) costs
O(history) on every CLI read and hook call. The mark makes that O(1):

- every writer, after its durable append (write and fsync) under the stream's
  exclusive lock, writes the file's identity and ``fstat`` as it left it
  (device, inode, size, mtime_ns, ctime_ns) and the head it verified through;
  a reader that verified the whole file under the shared lock rewrites a stale
  one in place (``Ledger`` does; a read creates no file);
- a cold reader, under the shared or exclusive lock, compares the stream's
  ``fstat`` with the mark. Equal means nobody wrote the file since a process
  that had verified every byte of it through the mark's head: the kernel sets
  ctime on every write and truncate, and no userspace call sets it back
  (``os.utime`` restores mtime, never ctime). The hash chain then commits the
  snapshot's prefix: the reader re-checks the head record at the snapshot's
  binding offset (canonical, re-hashed, the binding's hash), and every record
  before it is the one whose hash that head links to.

Anything else (no mark, a torn or foreign one, another stat) falls back to the
full prefix hash; a mark never makes a reader trust more than the hash would.
What it cannot see is what ``LiveIntegrity`` cannot see either: an in-place
same-size edit within the file system's timestamp granularity right after a
legitimate write leaves size, mtime and ctime equal (docs/storage.md, *The
verified mark*).

The file is one fixed-size record, written in place with one ``pwrite`` and
not fsynced: a mark lost or torn in a crash (its checksum then fails) only
costs one full hash. A writer that crashed after its fsync but before the mark
leaves the older mark, whose size and times no longer match: the full hash.
"""

from __future__ import annotations

import hashlib
import os
import struct
from pathlib import Path
from typing import NamedTuple

from loopstate.core import safefs
from loopstate.core.errors import LoopstateError
from loopstate.core.live_integrity import Seen, seen_in
from loopstate.core.stream import Stream

_MAGIC = b"LSVM"
_VERSION = 1
# magic, version, device, inode, size, mtime_ns, ctime_ns, head offset, head sequence, head hash (ASCII, padded)
_BODY = struct.Struct("<4sIQQQqqQQ64s")
_CHECKSUM_BYTES = 16
SIZE = _BODY.size + _CHECKSUM_BYTES


class Mark(NamedTuple):
    dev: int
    ino: int
    size: int
    mtime_ns: int
    ctime_ns: int
    offset: int
    sequence: int
    hash: str

    def matches(self, info: os.stat_result) -> bool:
        """True when ``info`` (an fstat of the stream) is exactly the file this mark describes."""
        return self.describes((info.st_dev, info.st_ino), seen_in(info))

    def describes(self, identity: tuple[int, int], seen: Seen) -> bool:
        """True when the file ``identity`` as ``seen`` is exactly the file this mark describes."""
        return (self.dev, self.ino) == identity and (self.size, self.mtime_ns, self.ctime_ns) == seen


def path_for(stream: Stream) -> Path:
    return stream.base / "checkpoints" / f"{stream.name}.mark"


def _checksum(name: str, body: bytes) -> bytes:
    """Binds the record to its stream's name, so a mark copied from another stream is not taken."""
    return hashlib.blake2b(name.encode() + b"\0" + body, digest_size=_CHECKSUM_BYTES, person=b"loopstate-mark").digest()


def encode(name: str, mark: Mark) -> bytes:
    body = _BODY.pack(
        _MAGIC, _VERSION, mark.dev, mark.ino, mark.size, mark.mtime_ns, mark.ctime_ns, mark.offset, mark.sequence,
        mark.hash.encode("ascii"),
    )
    return body + _checksum(name, body)


def decode(name: str, data: bytes) -> Mark | None:
    """The mark in ``data``, if it is one whole mark of stream ``name``; None otherwise."""
    if len(data) != SIZE:
        return None
    body, checksum = data[:_BODY.size], data[_BODY.size:]
    if _checksum(name, body) != checksum:
        return None
    magic, version, dev, ino, size, mtime_ns, ctime_ns, offset, sequence, raw_hash = _BODY.unpack(body)
    if magic != _MAGIC or version != _VERSION:
        return None
    try:
        head_hash = raw_hash.rstrip(b"\0").decode("ascii")
    except UnicodeDecodeError:
        return None
    return Mark(dev, ino, size, mtime_ns, ctime_ns, offset, sequence, head_hash)


def load(stream: Stream) -> Mark | None:
    """The stream's mark, or None (absent, unreadable, torn, another stream's, another format)."""
    fd = safefs.open_cache(path_for(stream), stream.base)
    if fd is None:
        return None
    try:
        return decode(stream.name, os.pread(fd, SIZE + 1, 0))
    finally:
        os.close(fd)


def of(stream: Stream) -> Mark | None:
    """The mark saying ``stream``'s verified head is the whole file as last seen under the
    lock (``stream.live.seen``); None when it is not (nothing seen, a torn tail, bytes past
    the head, a head with no hash)."""
    head, seen, identity = stream.position, stream.live.seen, stream.identity
    if (
        identity is None or seen is None or seen.size != head.offset or not head.offset or stream.torn is not None
        or not head.hash or len(head.hash) > 64 or not head.hash.isascii()
    ):
        return None
    return Mark(identity[0], identity[1], seen.size, seen.mtime_ns, seen.ctime_ns, head.offset, head.sequence, head.hash)


class MarkWriter:
    """Writes a stream's mark in place through a descriptor kept open between appends."""

    __slots__ = ("_held", "_path", "_path_str")

    def __init__(self, stream: Stream) -> None:
        self._held = safefs.HeldDescriptor()
        self._path = path_for(stream)
        self._path_str = os.fspath(self._path)

    def write(self, stream: Stream, *, create: bool = True) -> bool:
        """Record that ``stream``'s verified head is the whole file as last seen (the caller
        holds the stream's lock and has just verified or written through that head, so
        ``stream.live.seen`` is the file's fstat now). False when there is nothing true to
        record or the mark could not be written: either way the next cold reader hashes
        the prefix, which is only slower. ``create=False`` (a reader: reads create nothing)
        only rewrites a mark file that exists."""
        mark = of(stream)
        if mark is None:
            return False
        try:
            fd = self._descriptor(stream, create)
            if fd is None:
                return False
            data = encode(stream.name, mark)
            if os.pwrite(fd, data, 0) != len(data):
                return False
        except (OSError, LoopstateError):  # a read-only store, a full disk, a link at the path: no mark
            self._held.close()
            return False
        return True

    def read(self, stream: Stream) -> Mark | None:
        """The stream's mark as ``load`` gives it, read through the kept descriptor when there
        is one (one lstat and one pread: a catch-up asks before every read of others' appends);
        the file opened afresh otherwise (and kept, when this process may write it)."""
        try:
            fd = self._descriptor(stream, create=False)
        except (OSError, LoopstateError):  # a read-only store, a link at the path: read it the plain way
            self._held.close()
            return load(stream)
        if fd is None:
            return None
        try:
            return decode(stream.name, os.pread(fd, SIZE + 1, 0))
        except OSError:
            self._held.close()
            return None

    def _descriptor(self, stream: Stream, create: bool) -> int | None:
        if self._held.still_at(self._path_str) is not None:
            return self._held.fd
        if create:
            safefs.ensure_dir(self._path.parent, stream.base)
        fd = safefs.open_rw(self._path, stream.base, create=create)
        if fd is None:
            return None
        self._held.hold(fd, os.fstat(fd))
        return fd

    def close(self) -> None:
        self._held.close()


def drop(stream: Stream) -> None:
    """Delete the stream's mark durably, before a re-chaining command replaces the stream
    (with ``checkpoint.drop``): the new file could get the old one's inode number."""
    safefs.unlink_durably(path_for(stream), stream.base)
