"""One page of a stream's audit log (``project.log``): from the verified mark when it holds, else verified from byte 0;
on a store without a local file (PostgreSQL), from the event before the page (``in_store``).

A page is at most ``limit`` of the events with ``after < sequence < before``,
the first ones or (``tail``) the last ones. A stream's sequences run one per
line without gaps (the chain refuses anything else), so with the first line's
sequence and the head's the page's sequences are known before a byte of it is
read; what is left is finding the line where the page starts.

``from_mark`` does that when the stream's verified mark describes the file as
it is now: identity, size, mtime and ctime all equal, so nobody wrote it since
a writer that had verified every byte through the mark's head (the kernel sets
ctime on every write; ``core/verified_mark.py`` says what that covers). It
binary-searches the line starts (one ``pread`` and one decode per step), reads
the page's lines and the line before them, and checks every page line as a
verify would (canonical, re-hashed, linked to the line before): O(log n + page)
instead of O(n). Anything else (no mark, a stale or torn one, a torn tail, an
edit since) goes to ``verified_from_start``, the whole stream read and verified,
which raises CORRUPT_LEDGER for a broken middle whatever page was asked for.

Both run under the stream's shared lock (the caller holds it).
"""

from __future__ import annotations

import os
from collections import deque
from typing import Any

from loopstate_protocol import project as proto

from loopstate.core import canonical, safefs, verified_mark
from loopstate.core.backend import Store
from loopstate.core.chain import ChainError, ChainLayout, Position, check_line
from loopstate.core.stream import Stream

_CHUNK = 4096  # bytes read at a time (more only for a longer line)
_WALK = 16 * 1024  # the search walks line by line once the line sought is within this many bytes


def _page(stream: Stream, query: proto.ProjectLog, events: list[dict[str, Any]], in_range: int, count: int,
          head: Position) -> proto.LogPage:
    sequence = stream.layout.sequence_field
    more = in_range > len(events)
    return proto.LogPage(
        stream=stream.name, head=proto.LogHead(sequence=head.sequence, hash=head.hash),
        event_count=count, events=events,
        next_after=events[-1][sequence] if more and not query.tail else None,
        next_before=events[0][sequence] if more and query.tail else None,
    )


def verified_from_start(stream: Stream, query: proto.ProjectLog) -> proto.LogPage:
    """The page, every event of the stream read and verified from its first byte (only the page is held)."""
    sequence = stream.layout.sequence_field
    after, before, limit = query.after, query.before, query.limit
    kept: deque[dict[str, Any]] | list[dict[str, Any]] = deque(maxlen=limit) if query.tail else []
    in_range = count = 0
    for record in stream.read_new():
        count += 1
        seq = record.event[sequence]
        if seq <= after or (before is not None and seq >= before):
            continue
        in_range += 1
        if query.tail or len(kept) < limit:
            kept.append(record.event)
    return _page(stream, query, list(kept), in_range, count, stream.position)


class _Lines:
    """Reads lines of one open stream file by byte offset, and the sequence each holds.

    Through one small buffer (``_CHUNK`` bytes read at a time, more only for a
    longer line): a step of the search and the lines of a page cost a read or two
    near where they are, never a window of the file."""

    def __init__(self, fd: int, size: int, field: str) -> None:
        self.fd, self.size, self.field = fd, size, field
        self._at, self._buffer = 0, b""

    def _find_newline(self, offset: int) -> int:
        """The offset of the first newline at or after ``offset`` (-1: none before the end)."""
        while True:
            if not self._at <= offset < self._at + len(self._buffer):
                self._at, self._buffer = offset, os.pread(self.fd, min(_CHUNK, self.size - offset), offset)
                if not self._buffer:
                    return -1
            cut = self._buffer.find(b"\n", offset - self._at)
            if cut >= 0:
                return self._at + cut
            end = self._at + len(self._buffer)
            if end >= self.size:
                return -1
            more = os.pread(self.fd, min(max(len(self._buffer), _CHUNK), self.size - end), end)
            if not more:
                return -1
            self._buffer += more  # a long line: the buffer grows to hold it

    def line_at(self, start: int) -> bytes:
        """The whole line starting at ``start`` (without its newline)."""
        cut = self._find_newline(start)
        if cut < 0:
            raise ChainError("", start, None, "a line with no end inside the verified head")
        return self._buffer[start - self._at:cut - self._at]

    def next_start(self, offset: int) -> int | None:
        """The start of the first line beginning after byte ``offset`` (None: none before the end)."""
        cut = self._find_newline(offset)
        return None if cut < 0 or cut + 1 >= self.size else cut + 1

    def sequence_at(self, start: int) -> int:
        event = canonical.decode(self.line_at(start))
        value = event.get(self.field) if isinstance(event, dict) else None
        if type(value) is not int:
            raise ChainError("", start, None, f"no {self.field} in a line inside the verified head")
        return value

    def start_of(self, target: int, first: int) -> int:
        """The byte offset of the line holding sequence ``target`` (``first`` is the first line's)."""
        low, low_seq, high = 0, first, self.size  # low: a line start with sequence <= target; the line is before high
        while low_seq < target:
            if high - low <= _WALK:  # close: walk the lines from ``low``
                start = self.next_start(low)
                if start is None or start >= high:
                    break
                low, low_seq = start, low_seq + 1
                continue
            middle = self.next_start((low + high) // 2)
            if middle is None or middle >= high:
                high = (low + high) // 2
                continue
            seq = self.sequence_at(middle)
            if seq <= target:
                low, low_seq = middle, seq
            else:
                high = middle
        if low_seq != target:
            raise ChainError("", low, target, "the line of this sequence is not where the chain puts it")
        return low


def from_mark(stream: Stream, query: proto.ProjectLog) -> proto.LogPage | None:
    """The page read from the lines it covers, when the verified mark holds for the file as it is; else None."""
    mark = verified_mark.load(stream)
    if mark is None:
        return None
    fd = safefs.open_read(stream.path, stream.base)
    if fd is None:
        return None
    try:
        info = os.fstat(fd)
        if not mark.matches(info) or mark.offset != info.st_size or not mark.offset:
            return None
        layout = stream.layout
        lines = _Lines(fd, info.st_size, layout.sequence_field)
        first, head = lines.sequence_at(0), mark.sequence
        count = head - first + 1
        low = max(query.after + 1, first)
        high = head if query.before is None else min(query.before - 1, head)
        in_range = max(high - low + 1, 0)
        if not in_range:
            return _page(stream, query, [], 0, count, Position(mark.offset, head, mark.hash))
        start_seq = high - query.limit + 1 if query.tail and in_range > query.limit else low
        end_seq = min(start_seq + query.limit - 1, high)
        start = lines.start_of(start_seq, first)
        if start_seq > first:  # the line before, for the first link (vouched for by the mark, as every byte is)
            before_start = lines.start_of(start_seq - 1, first) if start_seq - 1 > first else 0
            previous = canonical.decode(lines.line_at(before_start))
            at = Position(start, start_seq - 1, previous[layout.hash_field])
        else:
            at = Position(0, start_seq - 1, None)
        events = []
        offset = start
        for _ in range(end_seq - start_seq + 1):
            line = lines.line_at(offset)
            event = check_line(line, layout, at, stream.name)
            offset += len(line) + 1
            at = Position(offset, event[layout.sequence_field], event[layout.hash_field])
            events.append(event)
        if end_seq == head and (at.offset, at.hash) != (mark.offset, mark.hash):
            return None  # the page's last line is not the mark's head: verify from the start instead
        return _page(stream, query, events, in_range, count, Position(mark.offset, head, mark.hash))
    except ChainError:
        return None  # anything unexpected inside the vouched bytes: the full verify says what it is
    finally:
        os.close(fd)


def in_store(store: Store, name: str, layout: ChainLayout, query: proto.ProjectLog) -> proto.LogPage:
    """The page from a store without a local file (PostgreSQL), reading only the page's events.

    A stream's sequences run from 1 without gaps (every store's appends refuse anything
    else), so the head alone gives the count and where the page starts; ``Store.read`` from
    the sequence before the page re-hashes that event's line against its stored hash and
    links every page event from it. So a page costs the page, wherever it is in the stream,
    and a break in what it shows is CORRUPT_LEDGER; a break before it is ``verify``'s to find
    (it reads from the first event)."""
    head = store.head(name, layout)
    low = max(query.after + 1, 1)
    high = head.sequence if query.before is None else min(query.before - 1, head.sequence)
    in_range = max(high - low + 1, 0)
    start_seq = high - query.limit + 1 if query.tail and in_range > query.limit else low
    wanted = min(query.limit, in_range)
    events: list[dict[str, Any]] = []
    if wanted:
        for stored in store.read(name, layout, after=start_seq - 1):
            events.append(canonical.decode(stored.line))
            if len(events) == wanted:
                break
    sequence = layout.sequence_field
    more = in_range > len(events)
    return proto.LogPage(
        stream=name, head=proto.LogHead(sequence=head.sequence, hash=head.hash),
        event_count=head.sequence, events=events,
        next_after=events[-1][sequence] if more and events and not query.tail else None,
        next_before=events[0][sequence] if more and events and query.tail else None,
    )
