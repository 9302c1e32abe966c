"""The hash chain every stream carries, whatever its domain's envelope.

Each domain keeps the field names of the format it is compatible with (``prev_hash``/``event_hash`` for
intent, ``previous_event_digest``/``event_digest`` for runs, ``append_sequence``
for goals); a ChainLayout tells the core which fields hold the sequence, the
previous hash, this event's hash and the schema version. The hash is SHA-256
over the canonical event without its own hash field. A line must be exactly
the canonical encoding of its event, so no byte can change unnoticed.
"""

from __future__ import annotations

import hashlib
from collections.abc import Iterable, Sequence
from typing import Any, Callable, Literal, NamedTuple

import msgspec

from loopstate_protocol.errors import ErrorCode

from loopstate.core import canonical
from loopstate.core.errors import LoopstateError

SchemaVerdict = Literal["ok", "future", "invalid"]

# Fields the core adds to every event for idempotency, whatever the envelope.
REQUEST_ID = "request_id"
REQUEST_FINGERPRINT = "request_fingerprint"
# Added by the core to each event of a command that appends two or more:
# ``[index, size]``, index from 1. A single event carries none, and neither do
# the events of stores written before batches were marked: each is a whole
# batch by itself. The marker is inside what the event's hash covers.
BATCH = "batch"


def batch_part(value: Any) -> tuple[int, int] | None:
    """``(index, size)`` of a well-formed batch marker, else None."""
    if type(value) is list and len(value) == 2:
        index, size = value
        if type(index) is int and type(size) is int and 1 <= index <= size and size >= 2:
            return index, size
    return None


def rebatch(events: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """Mark again the batches of a rewritten history (a purge drops and splits events):
    each run of consecutive events with one request id is one batch, as one append wrote it."""
    out = [{k: v for k, v in event.items() if k != BATCH} for event in events]
    start = 0
    for i in range(1, len(out) + 1):
        if i == len(out) or out[i].get(REQUEST_ID) is None or out[i].get(REQUEST_ID) != out[start].get(REQUEST_ID):
            if i - start > 1:
                for index, event in enumerate(out[start:i], 1):
                    event[BATCH] = [index, i - start]
            start = i
    return out


class ChainLayout(msgspec.Struct, frozen=True):
    """Names the chain fields of one kind of stream and judges its schema versions."""

    sequence_field: str
    prev_field: str
    hash_field: str
    schema_field: str
    classify_schema: Callable[[Any], SchemaVerdict]


class Position(NamedTuple):
    """A verified point in a stream: after ``sequence`` at byte ``offset``.

    A NamedTuple, not a dataclass: one is made per verified head and building
    it must stay cheap next to hashing a line.
    """

    offset: int = 0
    sequence: int = 0
    hash: str | None = None


class ChainError(LoopstateError):
    """A record that breaks the chain: CORRUPT_LEDGER with offset, sequence and reason."""

    def __init__(self, stream: str, offset: int, sequence: int | None, reason: str) -> None:
        super().__init__(
            ErrorCode.CORRUPT_LEDGER,
            f"stream {stream!r} is corrupt at byte {offset} (sequence {sequence}): {reason}; "
            "run `loopstate verify` for the full report and `loopstate recover` to keep the verified prefix",
            stream=stream,
            offset=offset,
            sequence=sequence,
            reason=reason,
        )
        self.offset = offset
        self.sequence = sequence
        self.reason = reason


def seal(
    fields: dict[str, Any], layout: ChainLayout, at: Position, extra: dict[str, Any] | None = None,
) -> tuple[dict[str, Any], bytes]:
    """Give ``fields`` (and ``extra``, which wins) the next sequence, the previous hash and its own hash.

    Returns the complete event and its line (canonical JSON plus newline).
    """
    event = {**fields, **extra} if extra else dict(fields)
    event.pop(layout.hash_field, None)
    event[layout.sequence_field] = at.sequence + 1
    event[layout.prev_field] = at.hash
    event[layout.hash_field] = hashlib.sha256(canonical.encode(event)).hexdigest()
    return event, canonical.encode(event) + b"\n"


class HashCut:
    """Finds, in a canonical line, the bytes whose removal leaves the canonical
    encoding of the event without its hash field, so a verifier encodes once, not twice.

    The caller must already know that the line is ``canonical.encode(event)``
    and that ``event[hash_field]`` is the str ``claimed``, and must accept the
    line only if the SHA-256 hex digest of the remaining bytes equals
    ``claimed``. The top-level member ``"<hash_field>":"<claimed>"`` is then in
    the line; with the comma before it (or the one after it, when it is the
    first member) taken out, what is left is the canonical encoding of the
    event without it: the encoding is compact, keys are sorted at every level,
    and each member is encoded on its own (test_core_hash_cut.py checks this
    against the encoder).

    Where the key is found by its place, the value's encoding is taken to be
    ``"`` + claimed + ``"``, without encoding it: that holds for 64 lowercase
    hex digits, the only value a hex digest can equal; for any other value the
    cut may be wrong, but the comparison then fails anyway.

    ``span`` answers (start, stop) only when the occurrence it found is
    provably the top-level member, else None (the caller then encodes the
    hash-less event itself). An occurrence of ``"<hash_field>":`` is the
    top-level key when it starts at byte 1 (the first key), or when a comma
    stands before it and no ``{`` at all comes before it: its opening quote,
    after a comma, cannot be an escaped quote or a string's closing quote
    (that would have to be followed by one of ``:,]}``, not the name's first
    character), so it opens a string that is a key (a colon follows it), and
    without a ``{`` before it the only object it can be a key of is the
    top-level one, whose keys are unique. When a ``{`` comes first (a nested
    object sorts before the hash field), the whole member must occur exactly
    once in the line; the top-level one is there, so that one is it.
    """

    def __init__(self, hash_field: str) -> None:
        self.key = canonical.encode(hash_field) + b":"
        # The first-key-after-a-comma argument needs the name's first encoded
        # byte to be none of these (no layout's is); else only the uniqueness
        # test is used.
        self.after_comma = self.key[1:2] not in (b":", b",", b"]", b"}")

    def span(self, line: bytes, claimed: str) -> tuple[int, int] | None:
        """Bytes [start, stop) of ``line`` to remove; see the class docstring."""
        key = self.key
        i = line.find(key)
        if i < 1:
            return None
        if i == 1 or (line[i - 1] == 0x2C and self.after_comma and line.find(b"{", 1, i) < 0):
            j = i + len(key) + len(claimed) + 2
        else:
            member = key + canonical.encode(claimed)
            i = line.find(member)
            if i < 1 or line.find(member, i + 1) >= 0 or (i > 1 and line[i - 1] != 0x2C):
                return None
            j = i + len(member)
        if j >= len(line):
            return None
        if i > 1:
            return i - 1, j  # ,"<hash_field>":"<claimed>"
        return (1, j + 1) if line[j] == 0x2C else (1, j)  # the first member, with the comma after it or the only one


def check_line(line: bytes, layout: ChainLayout, at: Position, stream: str, verify_hash: bool = True) -> dict[str, Any]:
    """Decode one complete line (without its newline) that should follow ``at``."""
    try:
        event = canonical.decode(line)
    except Exception as exc:  # msgspec.DecodeError, UnicodeDecodeError
        raise ChainError(stream, at.offset, at.sequence + 1, f"not valid JSON ({exc})") from None
    if not isinstance(event, dict):
        raise ChainError(stream, at.offset, at.sequence + 1, "record is not a JSON object")
    verdict = layout.classify_schema(event.get(layout.schema_field))
    if verdict == "future":
        raise LoopstateError(
            ErrorCode.FUTURE_SCHEMA,
            f"stream {stream!r} holds {layout.schema_field}={event.get(layout.schema_field)!r} at byte {at.offset}, "
            "newer than this loopstate understands; upgrade loopstate to read it",
            stream=stream,
            offset=at.offset,
            schema=event.get(layout.schema_field),
        )
    if verdict == "invalid":
        raise ChainError(stream, at.offset, at.sequence + 1, f"unknown {layout.schema_field} {event.get(layout.schema_field)!r}")
    sequence = event.get(layout.sequence_field)
    if type(sequence) is not int or sequence != at.sequence + 1:
        raise ChainError(stream, at.offset, at.sequence + 1, f"{layout.sequence_field} is {sequence!r}, expected {at.sequence + 1}")
    if event.get(layout.prev_field) != at.hash:
        raise ChainError(stream, at.offset, sequence, f"{layout.prev_field} does not match the previous event's hash")
    if verify_hash:
        claimed = event.pop(layout.hash_field, None)
        if claimed is None or canonical.sha256_hex(canonical.encode(event)) != claimed:
            raise ChainError(stream, at.offset, sequence, f"{layout.hash_field} does not match the event's content")
        event[layout.hash_field] = claimed
        if canonical.encode(event) != line:
            raise ChainError(stream, at.offset, sequence, "record is not in canonical form (it was edited)")
    elif not isinstance(event.get(layout.hash_field), str):
        raise ChainError(stream, at.offset, sequence, f"{layout.hash_field} is missing")
    return event


# The records every store holds, sealed and checked the same way on each: the storage contract
# (core/backend.py) names them; they live here, beside the chain they carry, so that the JSONL
# stream can use them without importing the contract.


class Head(NamedTuple):
    """The last event of a stream: its sequence and hash (``Head()``: an empty stream)."""

    sequence: int = 0
    hash: str | None = None


EMPTY = Head()
"""The head of a stream with no events."""


class StoredEvent(NamedTuple):
    """One event as every store holds it: its sequence, its hash, its exact canonical line
    (without the newline) and where that line sits (``Record``'s byte offsets)."""

    sequence: int
    hash: str
    line: bytes
    start: int

    @property
    def end(self) -> int:
        return self.start + len(self.line) + 1


# sealing and checking: the same bytes on every store ----------------------------------------


def seal_batch(
    events: Sequence[dict[str, Any]], layout: ChainLayout, after: Head, *, start: int = 0,
    extra: dict[str, Any] | None = None,
) -> list[StoredEvent]:
    """Seal ``events`` (each with ``extra``'s fields) as one batch after ``after``: the lines
    an append writes. Two or more events carry the ``BATCH`` marker ``[index, size]``, so a
    reader takes all of them or none; ``start`` is the byte offset of the first line. The
    same bytes as a ``StreamLedger`` append of the same events at that head."""
    size = len(events)
    position = Position(start, after.sequence, after.hash)
    out = []
    for index, fields in enumerate(events, 1):
        event, line = seal(fields, layout, position, extra if size == 1 else {**(extra or {}), BATCH: [index, size]})
        out.append(StoredEvent(event[layout.sequence_field], event[layout.hash_field], line[:-1], position.offset))
        position = Position(position.offset + len(line), event[layout.sequence_field], event[layout.hash_field])
    return out


def verify_chain(
    events: Iterable[StoredEvent], layout: ChainLayout, stream: str, after: Head = EMPTY, *, start: int = 0,
) -> Head:
    """Check that ``events`` follow ``after`` (at byte ``start``) as one intact chain: each line
    canonical, re-hashed to its hash, linked to the one before, numbered one after it, at the
    offset the lines before it end at, and agreeing with the record's own sequence and hash.
    Returns the last head; raises ``ChainError`` (CORRUPT_LEDGER) naming the first bad record.

    Batch markers are checked as the JSONL reader checks them: a batch is whole, its
    markers count up from 1 to its size."""
    position = Position(start, after.sequence, after.hash)
    open_batch: tuple[int, int] | None = None  # (events seen, size) of the batch being read
    for stored in events:
        if stored.start != position.offset:
            raise ChainError(stream, stored.start, position.sequence + 1,
                             f"the record starts at byte {stored.start}, but the one before it ends at {position.offset}")
        event = check_line(stored.line, layout, position, stream)
        if event[layout.sequence_field] != stored.sequence or event[layout.hash_field] != stored.hash:
            raise ChainError(stream, stored.start, stored.sequence, "the stored sequence or hash is not the line's")
        marker = event.get(BATCH)
        if open_batch is not None or marker is not None:
            index, size = _batch_index(marker, stream, stored)
            if open_batch is None and index != 1:
                raise ChainError(stream, stored.start, stored.sequence, f"{BATCH} {marker!r} does not open a batch")
            if open_batch is not None and (index, size) != (open_batch[0] + 1, open_batch[1]):
                raise ChainError(stream, stored.start, stored.sequence,
                                 f"event {open_batch[0] + 1} of a batch of {open_batch[1]} was due, but {BATCH} is {marker!r}")
            open_batch = None if index == size else (index, size)
        position = Position(stored.end, stored.sequence, stored.hash)
    if open_batch is not None:
        raise ChainError(stream, position.offset, position.sequence, "the events end inside a batch")
    return Head(position.sequence, position.hash)


def _batch_index(marker: Any, stream: str, stored: StoredEvent) -> tuple[int, int]:
    if type(marker) is list and len(marker) == 2 and all(type(n) is int for n in marker) and 1 <= marker[0] <= marker[1] and marker[1] >= 2:
        return marker[0], marker[1]
    raise ChainError(stream, stored.start, stored.sequence, f"{BATCH} {marker!r} is not a batch marker")
