"""What one catch-up read, held only as far as its owner can use it.

A long-lived reader that catches up on what another process appended (a
sidecar following a stream that grew by 50,000 events since it last looked)
must not hold every record it folded at once: the fold already has them, and a
listener owed more events than it would ever pass on wants the new state
instead. ``News`` keeps the records while there are at most ``limit`` of
them; past that it drops the list and keeps only the first and last record and
the count (``complete`` is then False), so a catch-up of N events holds at most
``limit`` records, whatever N.
"""

from __future__ import annotations

from loopstate.core.record import Record


class News:
    """The records of one catch-up, in stream order, or, past ``limit``, their bounds.

    ``limit=None`` keeps every record; ``limit=0`` keeps none (only the bounds)."""

    __slots__ = ("limit", "records", "first", "last", "count")

    def __init__(self, limit: int | None = None, records: list[Record] | None = None) -> None:
        self.limit = limit
        self.records: list[Record] = []
        self.first: Record | None = None
        self.last: Record | None = None
        self.count = 0
        for record in records or ():
            self.add(record)

    def add(self, record: Record) -> None:
        if self.first is None:
            self.first = record
        self.last = record
        self.count += 1
        if self.limit is None or self.count <= self.limit:
            self.records.append(record)
        elif self.records:
            self.records = []  # past the limit: nobody gets the list, so nobody holds it

    @property
    def complete(self) -> bool:
        """Whether ``records`` holds every record read (False past the limit)."""
        return len(self.records) == self.count

    def __bool__(self) -> bool:
        return self.count > 0

    def __repr__(self) -> str:
        return f"News(count={self.count}, complete={self.complete})"
