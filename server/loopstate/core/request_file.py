"""The request index on disk: every request id before one head, as a sorted file of words.

Exact-retry dedup must know every request id ever seen (a retry may come at any time). In memory
(``idempotency.RequestIndex``) that is a word per request, and a ledger that
started from a projection snapshot has seen only the requests after it. This
file holds the words of every request before one head, so such a ledger opens
it and indexes only the tail, and a long-lived process keeps only the tail in
memory: a lookup bisects the file with ``pread`` (about 20 reads of 8 bytes at
a million requests), and nothing of it is held but a descriptor.

Each word is the RAM index's: the top bits of a stable hash of the request id
(``idempotency.stable_hash``: BLAKE2b, the same in every process) above the
byte offset of the request's first event. Sorted, a tag's words are one run,
earliest first, and each candidate is checked against the stream itself (the
event at that offset must carry the id), as in memory: a word can cost an
extra read, never a wrong answer. A word missing would let a retry append
twice, so a file is used only whole.

Layout: ``LSRQ``, a format number and the header's length (4 bytes each,
little-endian); the header (msgpack: stream name, binding, offset bits, word
count, SHA-256 of the words); the words, 8 bytes each, little-endian. The
binding is the checkpoint record of the head the file covers, as a snapshot's.
Written atomically (0600 temp file, rename) under the exclusive lock, not
fsynced. Opening checks the magic, format, stream, word layout and length,
the SHA-256 of every word (one pass of ``pread``), and that the binding names
a record of the chain the caller has verified (same file identity and first
record, the record at its offset re-hashing to its hash, at or before the
verified head). Anything else: the file is not used, and the ledger re-reads
the stream for request ids as without one.
"""

from __future__ import annotations

import hashlib
import os
import struct
import sys
from array import array
from bisect import bisect_left
from pathlib import Path
from typing import Iterable

import msgspec

from loopstate.core import checkpoint, safefs
from loopstate.core.checkpoint import Checkpoint
from loopstate.core.stream import Stream

MAGIC = b"LSRQ"
FORMAT = 1
_PREAMBLE = struct.Struct("<4sII")
_WORD = struct.Struct("<Q")
_MAX_HEADER = 1 << 16


class Header(msgspec.Struct, kw_only=True):
    stream: str
    binding: Checkpoint
    offset_bits: int
    count: int
    words_sha256: str


def path_for(stream: Stream) -> Path:
    return stream.base / "snapshots" / f"{stream.name}.requests"


class RequestFile:
    """An opened, checked request file: the words of every request before ``binding``'s head."""

    __slots__ = ("binding", "count", "_fd", "_base", "_offset_bits")

    def __init__(self, fd: int, header: Header, words_at: int) -> None:
        self._fd: int | None = fd
        self.binding = header.binding
        self.count = header.count
        self._base = words_at
        self._offset_bits = header.offset_bits

    def __len__(self) -> int:
        return self.count

    def __getitem__(self, index: int) -> int:
        """The word at ``index`` (a ``pread`` of 8 bytes): what ``bisect`` probes."""
        assert self._fd is not None
        word: int = _WORD.unpack(os.pread(self._fd, 8, self._base + 8 * index))[0]
        return word

    def candidates(self, tag: int) -> list[int]:
        """Offsets of the words with this tag (``tag``: the word with offset 0), earliest first."""
        high = tag + (1 << self._offset_bits)
        found = []
        at = bisect_left(self, tag)
        while at < self.count and (word := self[at]) < high:
            found.append(word - tag)
            at += 1
        return found

    def words(self) -> Iterable[int]:
        """Every word, in order, read in blocks."""
        assert self._fd is not None
        block = 1 << 17
        for start in range(0, self.count, block):
            size = min(block, self.count - start)
            chunk = array("Q")
            chunk.frombytes(os.pread(self._fd, 8 * size, self._base + 8 * start))
            if sys.byteorder != "little":
                chunk.byteswap()
            yield from chunk

    def close(self) -> None:
        if self._fd is not None:
            os.close(self._fd)
            self._fd = None

    def __del__(self) -> None:
        self.close()


def save(stream: Stream, binding: Checkpoint, words: array[int], offset_bits: int) -> int:
    """Write the file of ``words`` (sorted: every request before ``binding``'s head; the
    caller holds the exclusive lock); returns its size in bytes."""
    data = words.tobytes() if sys.byteorder == "little" else _swapped(words)
    header = msgspec.msgpack.encode(Header(
        stream=stream.name, binding=binding, offset_bits=offset_bits, count=len(words),
        words_sha256=hashlib.sha256(data).hexdigest(),
    ))
    target = path_for(stream)
    safefs.ensure_dir(target.parent, stream.base)
    # Not fsynced: a file lost in a crash only costs one re-read of the stream for request ids.
    safefs.atomic_write(target, stream.base, _PREAMBLE.pack(MAGIC, FORMAT, len(header)) + header + data, durable=False)
    return _PREAMBLE.size + len(header) + len(data)


def _swapped(words: array[int]) -> bytes:
    copy = array("Q", words)
    copy.byteswap()
    return copy.tobytes()


def load(stream: Stream, offset_bits: int) -> RequestFile | None:
    """The stream's request file, opened, if it is whole and bound to the chain ``stream``
    has verified (the caller holds the lock, caught up); None otherwise."""
    fd = safefs.open_cache(path_for(stream), stream.base)
    if fd is None:
        return None
    try:
        opened = _checked(fd, stream, offset_bits)
    except (OSError, msgspec.MsgspecError, struct.error):
        opened = None
    if opened is None:
        os.close(fd)
    return opened


def _checked(fd: int, stream: Stream, offset_bits: int) -> RequestFile | None:
    magic, version, header_size = _PREAMBLE.unpack(os.pread(fd, _PREAMBLE.size, 0))
    if magic != MAGIC or version != FORMAT or header_size > _MAX_HEADER:
        return None
    header = msgspec.msgpack.decode(os.pread(fd, header_size, _PREAMBLE.size), type=Header)
    words_at = _PREAMBLE.size + header_size
    if (
        header.stream != stream.name or header.offset_bits != offset_bits or header.count < 0
        or os.fstat(fd).st_size != words_at + 8 * header.count
    ):
        return None
    digest = hashlib.sha256()
    offset, end = words_at, words_at + 8 * header.count
    while offset < end:
        block = os.pread(fd, min(1 << 20, end - offset), offset)
        if not block:
            return None
        digest.update(block)
        offset += len(block)
    if digest.hexdigest() != header.words_sha256:
        return None
    binding = header.binding
    if stream.identity != (binding.dev, binding.ino) or binding.offset > stream.position.offset:
        return None
    if not checkpoint.head_holds(stream, binding):
        return None
    return RequestFile(fd, header, words_at)
