"""History indexes of a goal packed into bytearrays: no Python object per entry.

A goal's state must answer two questions about its whole history: has this
event id been seen (and with which body), and is this todo id a completed
todo (and what does its compact record say). Held as dicts of strings and
tuples they cost several hundred bytes per event for ever, which a long-lived
process following a year of history cannot afford. Here both are bytes:

- ``TagIndex``: the 64-bit tags (BLAKE2b) of its keys in insertion order, 8
  bytes an entry with no free space, found by tag through an open-addressing
  table of 4-byte entry numbers (a power of two of them, 40-80% full; double
  hashing: the tag's low bits give the first slot, its high bits an odd step,
  so a miss reads about 1/(1-load) slots, not the clusters of linear probing).
  Only the 4-byte slots carry the free space, so an entry costs 13-18 bytes,
  not 1.25-2.5 times a whole record as in a table of records; what a caller
  keeps per entry goes in its own dense array, read by entry number.
  Two keys with the same tag are two entries; callers that must be exact check
  every entry with their tag (``numbers``) against a record they can read.
- ``Archive``: compact records (msgpack) appended to one bytearray, with the end
  offset and a sort key of each (4 bytes each) in a second one, so record ``i``
  and a bisect by key are O(1) and O(log n) without decoding the rest.

Both are msgspec Structs of bytes, so a snapshot encodes and decodes them as a
handful of memory copies, and the layout after the same inserts is the same (a
snapshot plus its tail folds to exactly the full fold's bytes).
"""

from __future__ import annotations

import bisect
import hashlib
import struct
from typing import Any, Iterator

import msgspec

TAG = 8  # bytes of a tag
SLOT = 4  # bytes of a slot: 0 free, else entry number + 1
MIN_SLOTS = 64
MAX_LOAD = 0.8
_blake2b = hashlib.blake2b


def tag_of(key: str) -> int:
    """A 64-bit tag of ``key``."""
    return int.from_bytes(_blake2b(key.encode("utf-8", "surrogatepass"), digest_size=8).digest(), "little")


class TagIndex(msgspec.Struct, kw_only=True, gc=False):
    tags: bytearray = bytearray()  # entry n's tag at n * TAG
    slots: bytearray = bytearray()  # the probe table


def count(index: TagIndex) -> int:
    return len(index.tags) // TAG


def numbers(index: TagIndex, tag: int) -> Iterator[int]:
    """The entry numbers holding ``tag``, in probe order (insertion order for one tag)."""
    slots, tags = index.slots, index.tags
    capacity = len(slots) // SLOT
    if not capacity:
        return
    mask, step = capacity - 1, tag >> 32 | 1
    slot = tag & mask
    while number := _slot(slots, slot * SLOT)[0]:
        if _tag(tags, number * TAG - TAG)[0] == tag:
            yield number - 1
        slot = (slot + step) & mask


# One struct call per slot read: a memoryview cast costs more than a whole probe.
_slot, _put_slot = struct.Struct("<I").unpack_from, struct.Struct("<I").pack_into
_tag = struct.Struct("<Q").unpack_from


def find(index: TagIndex, tag: int) -> tuple[int, int]:
    """The first entry holding ``tag`` (-1 when none) and the slot the probe stopped at: the
    free slot where ``tag`` goes when there is none, so a lookup then an ``add`` probes once.
    Grows the table first when one more entry would pass MAX_LOAD."""
    slots, tags = index.slots, index.tags
    if len(tags) // TAG + 1 > len(slots) // SLOT * MAX_LOAD:
        _grow(index)
        slots = index.slots
    mask, step = len(slots) // SLOT - 1, tag >> 32 | 1
    slot = tag & mask
    while number := _slot(slots, slot * SLOT)[0]:
        if _tag(tags, number * TAG - TAG)[0] == tag:
            return number - 1, slot
        slot = (slot + step) & mask
    return -1, slot


def first(index: TagIndex, tag: int) -> int:
    """The first entry holding ``tag``, or -1 (a read: the table is not grown)."""
    return next(numbers(index, tag), -1)


def add(index: TagIndex, slot: int, tag: int) -> int:
    """Add an entry for ``tag`` in the free ``slot`` that ``find`` gave (no add in between); its number."""
    tags = index.tags
    number = len(tags) // TAG
    tags += tag.to_bytes(TAG, "little")
    _put_slot(index.slots, slot * SLOT, number + 1)
    return number


def insert(index: TagIndex, tag: int) -> int:
    """Add an entry for ``tag`` after any with the same tag; its number."""
    found, slot = find(index, tag)
    if found >= 0:
        slots, mask, step = index.slots, len(index.slots) // SLOT - 1, tag >> 32 | 1
        while _slot(slots, slot * SLOT)[0]:
            slot = (slot + step) & mask
    return add(index, slot, tag)


def _grow(index: TagIndex) -> None:
    """Twice as many slots, every entry placed again in entry order (deterministic)."""
    mask = max(MIN_SLOTS, len(index.slots) // SLOT * 2) - 1
    fresh = bytearray((mask + 1) * SLOT)
    with memoryview(fresh).cast("I") as slots, memoryview(index.tags).cast("Q") as tags:
        for number, tag in enumerate(tags, 1):
            slot, step = tag & mask, tag >> 32 | 1
            while slots[slot]:
                slot = (slot + step) & mask
            slots[slot] = number
    index.slots = fresh


class Archive(msgspec.Struct, kw_only=True, gc=False):
    """Compact records in append order; ``index`` holds (end offset, sort key) per record, 4 bytes
    each (an archive holds under 4 GiB of records, keys are append sequences under 2³²)."""

    data: bytearray = bytearray()
    index: bytearray = bytearray()


def size(archive: Archive) -> int:
    return len(archive.index) // (2 * SLOT)


def append(archive: Archive, record: Any, key: int) -> int:
    """Add ``record`` (keys must not decrease); returns its number."""
    number = size(archive)
    archive.data += msgspec.msgpack.encode(record)
    archive.index += len(archive.data).to_bytes(SLOT, "little") + key.to_bytes(SLOT, "little")
    return number


def record(archive: Archive, number: int, kind: type) -> Any:
    """Record ``number`` decoded as ``kind``."""
    start = _slot(archive.index, (2 * number - 2) * SLOT)[0] if number else 0
    end = _slot(archive.index, 2 * number * SLOT)[0]
    return msgspec.msgpack.decode(memoryview(archive.data)[start:end], type=kind)


def count_below(archive: Archive, key: int) -> int:
    """How many records have a sort key below ``key``."""
    with memoryview(archive.index).cast("I") as view:
        keys = view[1::2]
        try:
            return bisect.bisect_left(keys, key)
        finally:
            keys.release()
