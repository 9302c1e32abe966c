"""The event ids a goal has seen, for event-id idempotency, in about 26 bytes an id.

Each event id ever appended to a goal must stay known: an event repeated with
an identical body is a no-op (on append, and ignored on replay), one repeated
with a different body is EVENT_ID_CONFLICT. A dict of the ids with their
sequence, body digest and time costs about 400 bytes per event for ever; here
(``EventIds``) an id is an entry of a ``packed.TagIndex`` (its 64-bit BLAKE2b
tag, 8 bytes, and a 4-byte slot of a table 40-80% full) and 12 bytes in
``marks``, read by entry number:

1. the first 32 bits of the event's body digest;
2. its recorded_at: microseconds since 1970 when the text is the store's own
   RFC 3339 form (what ``decide`` writes), so a repeat without a time gets the
   original's back exactly; otherwise a tag of the text with the top bit set.

Its append_sequence is not stored per id: the ids are added in append order,
one per event, so entry n's sequence is n plus an offset that changes only
where the fold skipped an identical repeat (``offsets`` holds each change).

What the packing gives up, said plainly: two different event ids with the
same 64-bit tag (odds about n²/2⁶⁵: 3·10⁻⁸ after a million events) count as
one, so the second is refused as a conflict (or taken as a repeat if its body
and time also match the first's marks) instead of appended; a conflicting
repeat whose body digest agrees with the first in 32 bits (odds 2⁻³²) is taken
as identical. Neither can make a replay read an event wrongly: the fold and
the append apply the same table, so a stream loopstate wrote never holds an
event the table refused.
"""

from __future__ import annotations

import bisect
import datetime as dt
import math
import struct

import msgspec

from loopstate.domains.goals import packed

FOREIGN_TIME = 1 << 63
_EPOCH = dt.datetime(1970, 1, 1)
_MICRO = dt.timedelta(microseconds=1)
_last: tuple[str, int] = ("", 0)


class EventIds(msgspec.Struct, kw_only=True, gc=False):
    index: packed.TagIndex = msgspec.field(default_factory=packed.TagIndex)
    marks: bytearray = bytearray()  # entry n's digest mark (4 bytes) and time word (8 bytes) at n * 12
    # (first entry, its append_sequence minus its entry number), one pair each time that difference
    # changes: a stream's ids are its events in order, so one pair unless identical repeats were skipped.
    offsets: list[tuple[int, int]] = []


_ENTRY = struct.Struct("<IQ")


def time_word(text: str) -> int:
    """``recorded_at`` as one word: microseconds for the store's own form, else a marked tag.
    The last answer is kept: events appended together share their time."""
    global _last
    if text == _last[0]:
        return _last[1]
    word = _time_word(text)
    _last = (text, word)
    return word


def _time_word(text: str) -> int:
    if len(text) in (20, 27) and text[-1] == "Z" and text[4] == "-" and text[10] == "T" and text[16] == ":":
        try:
            moment = dt.datetime.fromisoformat(text[:-1])
        except ValueError:
            moment = None
        if moment is not None and (len(text) == 20 or (text[19] == "." and moment.microsecond)):
            micros = (moment - _EPOCH) // _MICRO
            if 0 <= micros < FOREIGN_TIME:
                return micros
    return packed.tag_of(text) | FOREIGN_TIME


def time_text(word: int) -> str | None:
    """The recorded_at a time word was made from, when it can be given back."""
    if word & FOREIGN_TIME:
        return None
    moment = _EPOCH + dt.timedelta(microseconds=word)
    text = moment.strftime("%Y-%m-%dT%H:%M:%S")
    return text + (f".{moment.microsecond:06d}" if moment.microsecond else "") + "Z"


def _digest_mark(digest: str) -> int:
    return int(digest[:8], 16)


class Known(msgspec.Struct, frozen=True):
    """What the table holds of an event id seen before."""

    sequence: int
    digest_mark: int
    time: int

    def same_body(self, digest: str) -> bool:
        return self.digest_mark == _digest_mark(digest)

    def same_time(self, recorded_at: str) -> bool:
        return self.time == time_word(recorded_at)

    @property
    def recorded_at(self) -> str | None:
        return time_text(self.time)


def _known(ids: EventIds, number: int) -> Known:
    mark, time = _ENTRY.unpack_from(ids.marks, number * _ENTRY.size)
    offset = ids.offsets[bisect.bisect_right(ids.offsets, (number, math.inf)) - 1][1]
    return Known(sequence=number + offset, digest_mark=mark, time=time)


def lookup(ids: EventIds, event_id: str) -> Known | None:
    """What the table holds of ``event_id``."""
    number = packed.first(ids.index, packed.tag_of(event_id))
    return None if number < 0 else _known(ids, number)


Slot = tuple[int, int, "Known | None"]  # the id's tag, the free slot (when unknown), what is known of it


def find(ids: EventIds, event_id: str) -> Slot:
    """Where an event id is, or would go: the fold looks an id up, applies the event, then adds it."""
    tag = packed.tag_of(event_id)
    number, slot = packed.find(ids.index, tag)
    return tag, slot, None if number < 0 else _known(ids, number)


def add(ids: EventIds, at: Slot, sequence: int, digest: str, recorded_at: str) -> None:
    """Record the id ``find`` did not know, in the slot it gave (nothing added in between)."""
    number = packed.add(ids.index, at[1], at[0])
    ids.marks += _ENTRY.pack(_digest_mark(digest), time_word(recorded_at))
    if not ids.offsets or ids.offsets[-1][1] != sequence - number:
        ids.offsets.append((number, sequence - number))
