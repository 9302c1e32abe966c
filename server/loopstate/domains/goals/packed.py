"""History indexes of a goal packed into bytearrays: no Python object per entry.

A goal's state must answer two questions about its whole history: has this
event id been seen (and with which body), and is this todo id a completed
todo (and what does its compact record say). Held as dicts of strings and
tuples they cost several hundred bytes per event for ever, which a long-lived
process following a year of history cannot afford. Here both are fixed-size
slots in one bytearray each:

- ``TagTable``: open addressing with linear probing, keyed by a 64-bit tag of
  the key (BLAKE2b); each slot is ``width`` unsigned 64-bit words, the tag first.
  Two keys with the same tag share probe chains; callers that must be exact
  check every slot with their tag (``values``) against a record they can read.
- ``Archive``: compact records (msgpack) appended to one bytearray, with the end
  offset and a sort key of each in a second one, so record ``i`` and a bisect by
  key are O(1) and O(log n) without decoding the rest.

Both are msgspec Structs of bytes and ints, so a snapshot encodes and decodes
them as a handful of memory copies, and the layout after the same inserts is
the same (a snapshot plus its tail folds to exactly the full fold's bytes).
"""

from __future__ import annotations

import bisect
import hashlib
import struct
from typing import Any, Iterator

import msgspec

WORD = 8
MIN_SLOTS = 64
MAX_LOAD = 0.8


def tag_of(key: str) -> int:
    """A nonzero 64-bit tag of ``key`` (0 marks an empty slot)."""
    return int.from_bytes(hashlib.blake2b(key.encode("utf-8", "surrogatepass"), digest_size=8).digest(), "little") or 1


class TagTable(msgspec.Struct, kw_only=True, gc=False):
    width: int  # words per slot, the tag first
    slots: bytearray = bytearray()
    count: int = 0


def _capacity(table: TagTable) -> int:
    return len(table.slots) // (WORD * table.width)


def values(table: TagTable, tag: int) -> Iterator[tuple[int, ...]]:
    """The words after the tag of every slot holding ``tag``, in probe order."""
    capacity = _capacity(table)
    if not capacity:
        return
    width = table.width
    view = memoryview(table.slots).cast("Q")
    try:
        base = (tag % capacity) * width
        end = capacity * width
        while True:
            found = view[base]
            if found == 0:
                return
            if found == tag:
                yield tuple(view[base + 1:base + width])
            base += width
            if base == end:
                base = 0
    finally:
        view.release()


def probe(table: TagTable, tag: int) -> tuple[int, tuple[int, ...] | None]:
    """The first slot holding ``tag`` and its words, or the free slot where ``tag`` would go
    (words None): a caller that looks a key up and then adds it probes once (``put``)."""
    if (table.count + 1) > _capacity(table) * MAX_LOAD:
        _grow(table)
    width = table.width
    end = len(table.slots) // WORD
    with memoryview(table.slots).cast("Q") as view:
        base = (tag % (end // width)) * width
        while True:
            found = view[base]
            if found == tag:
                return base, tuple(view[base + 1:base + width])
            if found == 0:
                return base, None
            base += width
            if base == end:
                base = 0


def put(table: TagTable, slot: int, tag: int, words: tuple[int, ...]) -> None:
    """Fill the free slot ``probe`` gave (no insert in between)."""
    _SLOT[table.width].pack_into(table.slots, slot * WORD, tag, *words)
    table.count += 1


_SLOT = {width: struct.Struct(f"<{width}Q") for width in (1, 2, 3, 4)}


def first(table: TagTable, tag: int) -> tuple[int, ...] | None:
    """The words of the first slot holding ``tag``, or None (``values`` without a generator: the fold
    asks this once per event)."""
    capacity = _capacity(table)
    if not capacity:
        return None
    width = table.width
    with memoryview(table.slots).cast("Q") as view:
        base = (tag % capacity) * width
        end = capacity * width
        while True:
            found = view[base]
            if found == tag:
                return tuple(view[base + 1:base + width])
            if found == 0:
                return None
            base += width
            if base == end:
                base = 0


def insert(table: TagTable, tag: int, words: tuple[int, ...]) -> None:
    """Add a slot for ``tag`` (after any with the same tag); grows the table past MAX_LOAD."""
    if (table.count + 1) > _capacity(table) * MAX_LOAD:
        _grow(table)
    with memoryview(table.slots).cast("Q") as view:
        _place(view, table.width, _capacity(table), tag, words)
    table.count += 1


def _place(view: memoryview, width: int, capacity: int, tag: int, words: tuple[int, ...]) -> None:
    base = (tag % capacity) * width
    end = capacity * width
    while view[base]:
        base += width
        if base == end:
            base = 0
    view[base] = tag
    for offset, word in enumerate(words, 1):
        view[base + offset] = word


def _grow(table: TagTable) -> None:
    """Half as many slots again (a table is 53-80% full, not 40-80%: snapshots carry every slot),
    and every entry re-placed in the order of the old slots (deterministic)."""
    width = table.width
    capacity = max(MIN_SLOTS, _capacity(table) * 3 // 2)
    fresh = bytearray(capacity * width * WORD)
    with memoryview(table.slots).cast("Q") as old, memoryview(fresh).cast("Q") as new:
        for base in range(0, len(old), width):
            tag = old[base]
            if tag:
                _place(new, width, capacity, tag, tuple(old[base + 1:base + width]))
    table.slots = fresh


class Archive(msgspec.Struct, kw_only=True, gc=False):
    """Compact records in append order; ``index`` holds (end offset, sort key) per record."""

    data: bytearray = bytearray()
    index: bytearray = bytearray()


def size(archive: Archive) -> int:
    return len(archive.index) // (2 * WORD)


def append(archive: Archive, record: Any, key: int) -> int:
    """Add ``record`` (keys must not decrease); returns its number."""
    number = size(archive)
    archive.data += msgspec.msgpack.encode(record)
    archive.index += len(archive.data).to_bytes(WORD, "little") + key.to_bytes(WORD, "little")
    return number


def record(archive: Archive, number: int, kind: type) -> Any:
    """Record ``number`` decoded as ``kind``."""
    view = memoryview(archive.index).cast("Q")
    try:
        start = view[2 * number - 2] if number else 0
        end = view[2 * number]
    finally:
        view.release()
    return msgspec.msgpack.decode(memoryview(archive.data)[start:end], type=kind)


def count_below(archive: Archive, key: int) -> int:
    """How many records have a sort key below ``key``."""
    keys = memoryview(archive.index).cast("Q")[1::2]
    try:
        return bisect.bisect_left(keys, key)
    finally:
        keys.release()
