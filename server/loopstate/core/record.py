"""One verified event as every store hands it out, and the progress callback of long reads.

Kept in a module of its own, below every store and the news of a catch-up, so
that the storage contract (``core/backend.py``), the JSONL stream
(``core/stream.py``) and ``core/news.py`` can all name it without importing
each other.
"""

from __future__ import annotations

from typing import Any, Callable, NamedTuple


class Record(NamedTuple):
    """One verified event and where its line sits in the stream.

    ``start`` and ``end`` are byte offsets in the stream's canonical serialization
    (each event's canonical line plus a newline, one after the other): on the JSONL
    store they are the file's offsets, and any other store keeps the same numbers,
    so a position means the same thing whichever store holds the stream (the intent
    domain folds ``start`` into its state).
    """

    event: dict[str, Any]
    start: int
    end: int


ProgressFn = Callable[[int, int], None]
"""Called as a long read goes on with (bytes done, bytes in all)."""
