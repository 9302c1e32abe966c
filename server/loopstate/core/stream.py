"""One append-only JSONL stream: verified reads from a known head, O(1) appends.

A Stream object remembers the verified head (byte offset, sequence, hash) and
the file's identity, so a long-lived process only reads and verifies what was
appended since. Appends open with O_APPEND|O_NOFOLLOW, write every line of a
command in one write, and fsync before returning: cost does not grow with the
stream's length. Callers hold the stream's lock (shared to read, exclusive to
append); the lock, not this class, keeps readers from seeing half an append.
"""

from __future__ import annotations

import hashlib
import os
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Callable, Iterator

from loopstate.core import safefs
from loopstate.core.chain import ChainError, ChainLayout, Position, check_line, seal

CHUNK = 1 << 20


@dataclass(frozen=True)
class TornTail:
    """A final line with no newline: what a crash mid-append leaves behind."""

    offset: int
    length: int
    sha256: str


@dataclass(frozen=True)
class Record:
    """One verified event and where its line sits in the file."""

    event: dict[str, Any]
    start: int
    end: int


ProgressFn = Callable[[int, int], None]


class Stream:
    """A stream file below a project folder, with its verified head."""

    def __init__(self, base: Path, name: str, layout: ChainLayout) -> None:
        self.base = base
        self.name = name
        self.layout = layout
        self.path = base / "streams" / f"{name}.jsonl"
        self.position = Position()
        self.identity: tuple[int, int] | None = None
        self.torn: TornTail | None = None
        self.resets = 0

    # reading ---------------------------------------------------------------

    def read_new(self, *, verify_hash_until: int | None = None, progress: ProgressFn | None = None) -> Iterator[Record]:
        """Yield every complete event after the verified head, verifying as it goes.

        The head advances only past records that verified. Hashes are recomputed
        for every record, except records ending at or before
        ``verify_hash_until`` (a checkpointed prefix whose links are still
        checked). A trailing partial line is remembered in ``torn``, not
        returned and not repaired.
        """
        fd = safefs.open_read(self.path, self.base)
        if fd is None:
            if self.identity is not None or self.position.offset:
                raise ChainError(self.name, 0, None, "the stream file disappeared")
            return
        try:
            info = os.fstat(fd)
            identity = (info.st_dev, info.st_ino)
            if self.identity is not None and identity != self.identity:
                # Replaced by a re-chaining command (purge, recover): start over.
                self.position = Position()
                self.resets += 1
            self.identity = identity
            if info.st_size < self.position.offset:
                raise ChainError(
                    self.name, info.st_size, self.position.sequence,
                    f"the file is {info.st_size} bytes, shorter than its verified head at byte {self.position.offset}",
                )
            yield from self._scan(fd, info.st_size, verify_hash_until or 0, progress)
        finally:
            os.close(fd)

    def _scan(self, fd: int, size: int, verify_hash_until: int, progress: ProgressFn | None) -> Iterator[Record]:
        offset = self.position.offset
        os.lseek(fd, offset, os.SEEK_SET)
        pending = b""
        self.torn = None
        layout = self.layout
        while True:
            chunk = os.read(fd, CHUNK)
            if not chunk:
                break
            data = pending + chunk if pending else chunk
            cursor = 0
            while True:
                newline = data.find(b"\n", cursor)
                if newline < 0:
                    break
                line = data[cursor:newline]
                end = offset + (newline - cursor) + 1
                event = check_line(line, layout, self.position, self.name, verify_hash=end > verify_hash_until)
                self.position = Position(end, event[layout.sequence_field], event[layout.hash_field])
                yield Record(event, offset, end)
                offset = end
                cursor = newline + 1
            pending = data[cursor:]
            if progress is not None:
                progress(offset, size)
        if pending:
            self.torn = TornTail(offset, len(pending), hashlib.sha256(pending).hexdigest())

    def read_line_at(self, start: int, end: int) -> bytes:
        fd = safefs.open_read(self.path, self.base)
        if fd is None:
            raise ChainError(self.name, start, None, "the stream file disappeared")
        try:
            return os.pread(fd, end - start, start)
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
        finally:
            os.close(fd)
        self.torn = None
        return torn

    def append(self, fields_list: list[dict[str, Any]]) -> list[Record]:
        """Seal and durably append events after the verified head, in one write.

        The caller must have read to the end (``read_new``) and cut any torn
        tail under the same exclusive lock.
        """
        if self.torn is not None:
            raise ChainError(self.name, self.torn.offset, self.position.sequence, "a partial tail must be cut before appending")
        safefs.ensure_dir(self.path.parent, self.base)
        fd, _ = safefs.open_append(self.path, self.base)
        try:
            info = os.fstat(fd)
            if info.st_size != self.position.offset or (self.identity not in (None, (info.st_dev, info.st_ino))):
                raise ChainError(
                    self.name, info.st_size, self.position.sequence,
                    "the file changed since it was verified; read it again under the lock before appending",
                )
            records = []
            lines = []
            position = self.position
            for fields in fields_list:
                event, line = seal(fields, self.layout, position)
                end = position.offset + len(line)
                records.append(Record(event, position.offset, end))
                lines.append(line)
                position = Position(end, event[self.layout.sequence_field], event[self.layout.hash_field])
            try:
                safefs.write_all(fd, b"".join(lines))
                os.fsync(fd)
            except OSError:
                # Nothing was acknowledged: take back whatever part reached the file.
                os.ftruncate(fd, self.position.offset)
                raise
            self.identity = (info.st_dev, info.st_ino)
            self.position = position
            return records
        finally:
            os.close(fd)
