"""Helpers of the PostgreSQL tests: sealed events to append, and a chain check of what was read."""

from __future__ import annotations

from typing import Any

from loopstate.core import chain
from loopstate.core.chain import ChainLayout, Position

LAYOUT = ChainLayout(
    sequence_field="sequence", prev_field="prev_hash", hash_field="event_hash",
    schema_field="schema_version", classify_schema=lambda v: "ok" if v == 1 else "invalid",
)
PROJECT = "a" * 64


def sealed(after: tuple[int, str | None], count: int = 1, request_id: str | None = None,
           **fields: Any) -> list[tuple[bytes, str, str | None]]:
    """``count`` events chained after ``after``: (canonical line without newline, hash, previous hash)."""
    out: list[tuple[bytes, str, str | None]] = []
    at = Position(0, after[0], after[1])
    for i in range(count):
        body = {"schema_version": 1, "event_type": "noted", "n": at.sequence + 1, **fields}
        if request_id is not None:
            body[chain.REQUEST_ID] = request_id
        event, line = chain.seal(body, LAYOUT, at)
        out.append((line[:-1], event["event_hash"], event["prev_hash"]))
        at = Position(0, event["sequence"], event["event_hash"])
    return out


def check_chain(events) -> None:
    """Every stored line verifies as the next link of the chain (what `loopstate verify` does)."""
    at = Position(0, 0, None)
    for stored in events:
        event = chain.check_line(stored.line, LAYOUT, at, "test")
        assert event["sequence"] == stored.sequence and event["event_hash"] == stored.event_hash
        at = Position(0, stored.sequence, stored.event_hash)
