"""Rows of the events table as the contract's records: checked links, offsets, request ids."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from loopstate.core import canonical
from loopstate.core.backend import StoredEvent
from loopstate.core.chain import REQUEST_FINGERPRINT, REQUEST_ID, ChainError, ChainLayout, Position, check_line
from loopstate.core.postgres.events import Row
from loopstate.core.record import Record


def rebase(lines: Sequence[StoredEvent]) -> list[StoredEvent]:
    """The lines with ``start`` counted from 0: the server puts them after the head's end."""
    out, offset = [], 0
    for stored in lines:
        out.append(stored._replace(start=offset))
        offset += len(stored.line) + 1
    return out


def request_of(line: bytes) -> tuple[str | None, str | None]:
    """The request id and fingerprint a sealed line carries (every event of a batch carries the same)."""
    event = canonical.decode(line)
    if not isinstance(event, dict):
        return None, None
    rid, fp = event.get(REQUEST_ID), event.get(REQUEST_FINGERPRINT)
    return (rid if isinstance(rid, str) else None), (fp if isinstance(fp, str) else None)


def check_row(row: Row, layout: ChainLayout, at: Position, stream: str) -> tuple[dict[str, Any], Position]:
    """The event of a row read back, checked as the next link after ``at``, and the position after it."""
    if row.start != at.offset:
        raise ChainError(stream, row.start, at.sequence + 1,
                         f"the record starts at byte {row.start}, but the one before it ends at {at.offset}")
    event = check_line(row.line, layout, at._replace(offset=row.start), stream)
    if event[layout.hash_field] != row.event_hash:
        raise ChainError(stream, row.start, row.sequence, "the stored hash is not the line's")
    return event, Position(row.start + len(row.line) + 1, row.sequence, row.event_hash)


def check_alone(row: Row, layout: ChainLayout, stream: str) -> Position:
    """The position after a row read without the rows before it: its line canonical and hashing to
    its stored hash, linked to the previous hash the line itself states (which only a read from
    further back can check)."""
    try:
        event = canonical.decode(row.line)
        prev = event.get(layout.prev_field) if isinstance(event, dict) else None
    except ValueError:
        prev = None  # check_line says what is wrong with the line
    check_row(row, layout, Position(row.start, row.sequence - 1, prev), stream)
    return Position(row.start + len(row.line) + 1, row.sequence, row.event_hash)


def record_of(line: bytes, start: int, layout: ChainLayout) -> Record:
    """A Record of a stored line, its hash field last (as the JSONL reader leaves it)."""
    event = canonical.decode(line)
    event[layout.hash_field] = event.pop(layout.hash_field)
    return Record(event, start, start + len(line) + 1)
