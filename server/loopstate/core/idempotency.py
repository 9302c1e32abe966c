"""Request fingerprints: the same request id must mean the same request.

The fingerprint is SHA-256 over the operation name and the canonical, normalized
parameters; the raw parameter body is never stored. An exact retry returns the
first result without appending; a retry whose parameters differ is refused with
REQUEST_ID_REUSED.
"""

from __future__ import annotations

import hashlib
import sys
from array import array
from bisect import bisect_left
from typing import TYPE_CHECKING, Any, Callable, Iterator

import msgspec

from loopstate_protocol.errors import ErrorCode

from loopstate.core import canonical
from loopstate.core.chain import REQUEST_FINGERPRINT, REQUEST_ID
from loopstate.core.errors import LoopstateError

if TYPE_CHECKING:
    from loopstate.core.request_file import RequestFile

MAX_REQUEST_ID = 200

# A word is (tag << OFFSET_BITS) | offset. 40 bits of offset reach 1 TiB into
# a stream; with the other 24 bits as tag, a lookup meets another id's tag (and
# reads one event more) with odds of about n / 2**24: 6% at a million requests.
OFFSET_BITS = 40
# Words per bucket before it splits. A lookup scans one bucket (32-64 words,
# a few microseconds); smaller buckets cost more directory and array headers.
BUCKET_SIZE = 64
_WORD = (1 << 64) - 1
# First read of a lookup; doubled while a request's run goes on.
_WINDOW = 4096


def check_request_id(request_id: Any) -> str:
    if not isinstance(request_id, str) or not 1 <= len(request_id) <= MAX_REQUEST_ID or not request_id.isprintable():
        raise LoopstateError(
            ErrorCode.INVALID_PARAMS,
            f"request_id must be 1-{MAX_REQUEST_ID} printable characters; send a fresh unique id per mutation",
            field="request_id",
        )
    return request_id


def stable_hash(request_id: str) -> int:
    """64 bits of BLAKE2b of the id: the same in every process, so words can be stored
    (``request_file``); Python's ``hash`` is salted per process."""
    return int.from_bytes(hashlib.blake2b(request_id.encode("utf-8", "surrogatepass"), digest_size=8).digest(), "big")


def fingerprint(operation: str, params: Any) -> str:
    return canonical.digest({"operation": operation, "params": params})


class Applied(msgspec.Struct, frozen=True):
    """Where the events of one request sit in its stream."""

    fingerprint: str
    first_sequence: int
    last_sequence: int
    start: int
    end: int


class RequestIndex:
    """request_id -> where its first event is, in about 11 bytes per request.

    The stream file is the truth; the index only says where to look. Each
    indexed request is one 64-bit word: the top bits of ``hash(request_id)``
    (the tag) above the byte offset of the request's first event. A
    lookup reads the event at every offset whose tag matches and compares the
    real request id, so ids that share a tag cost an extra read, never a wrong
    answer. The request's events are the run of lines from there that carry
    the same id and fingerprint (a request's events are appended together).

    The words live in buckets (``array('Q')``, 8 bytes a word) picked by the
    word's leading bits through a directory of 2**depth slots (extendible
    hashing). A bucket past ``bucket_size`` words splits in two by its next
    bit, sorting its words in C: nothing is ever re-read from the file, and no
    fold pays for rebuilding the whole table at once. Offsets too large for a
    word go to a dict by request id instead (beyond 1 TiB by default).

    ``hash`` is ``stable_hash`` (BLAKE2b), the same in every process: the
    words of every request before one head can be stored (``request_file``)
    and the index then holds only the words after it (``base``: the stored
    file, consulted first, since its requests came first).
    """

    def __init__(
        self, *, offset_bits: int = OFFSET_BITS, bucket_size: int = BUCKET_SIZE,
        hash_fn: Callable[[str], int] = stable_hash,
    ) -> None:
        self._offset_bits = offset_bits
        self._tag_mask = _WORD >> offset_bits << offset_bits
        self._room = 1 << offset_bits  # offsets below this fit in a word
        self._bucket_size = bucket_size
        self._hash = hash_fn
        self.clear()

    def clear(self) -> None:
        """Forget every request, the stored file's included."""
        self.base: RequestFile | None = None
        self._forget_words()

    def _forget_words(self) -> None:
        self._dir: list[array[int]] = [array("Q")]
        self._local = bytearray(1)  # leading bits shared by the words of each slot's bucket
        self._shift = 64  # 64 - directory depth: a word's slot is word >> _shift
        self._spill: dict[str, int] = {}
        self._held = 0  # words in memory
        self._last: str | None = None
        self._end = 0  # end of the last event noted: a lookup never reads past it

    def note(self, request_id: str, start: int, end: int) -> None:
        """Index an event carrying ``request_id`` that spans bytes [start, end).

        Called for every such event, in stream order. An event with the id of the
        one before continues that request and adds nothing; any other adds a word,
        and a lookup takes the earliest match: the first application wins.
        """
        self._end = end
        if request_id == self._last:
            return
        self._last = request_id
        if start < self._room:
            word = (self._hash(request_id) & self._tag_mask) | start
            bucket = self._dir[word >> self._shift]
            bucket.append(word)
            self._held += 1
            if len(bucket) > self._bucket_size:
                self._split(word >> self._shift)
        else:
            self._spill.setdefault(request_id, start)

    @property
    def offset_bits(self) -> int:
        return self._offset_bits

    def in_memory(self) -> int:
        """How many requests the index holds in memory (not in its stored file)."""
        return self._held + len(self._spill)

    def storable(self) -> bool:
        """Whether every word fits the stored layout: the stable hash, none spilled past the offset bits."""
        return not self._spill and self._hash is stable_hash

    def words(self) -> list[int]:
        """Every word held in memory, sorted."""
        buckets = {id(bucket): bucket for bucket in self._dir}.values()
        return sorted(word for bucket in buckets for word in bucket)

    def stand_on(self, base: "RequestFile") -> None:
        """``base`` holds every request before its head, this index's included: keep only
        the file (what follows is noted as before)."""
        last, end = self._last, max(self._end, base.binding.offset)
        self._forget_words()
        self.base, self._last, self._end = base, last, end

    def attach(self, base: "RequestFile") -> None:
        """``base`` holds every request before its head; this index holds those after
        some point at or before it (duplicates cost nothing: the earliest match wins)."""
        self.base = base
        self._end = max(self._end, base.binding.offset)

    def note_earlier(self, request_id: str, start: int, end: int) -> None:
        """``note`` for an event before those already noted (a range indexed afterwards)."""
        last, latest = self._last, self._end
        self._last = None
        self.note(request_id, start, end)
        self._last, self._end = last, max(latest, end)

    def _split(self, slot: int) -> None:
        """Split the bucket at ``slot`` in two by the first bit after the ones its words share.

        If every word has the same value there, one half stays empty and a later
        append splits the other half by the bit after. Words with one tag throughout
        cannot be parted: the bucket grows, and tries again each time its size
        doubles (so such a bucket costs a sort per doubling, not per append).
        """
        size = len(self._dir[slot])
        if size > self._bucket_size + 1 and size & (size - 1):
            return
        words = sorted(self._dir[slot])
        if words[0] >> self._offset_bits == words[-1] >> self._offset_bits:
            return
        local = self._local[slot]
        depth = 64 - self._shift
        if local == depth:  # the directory doubles: every slot becomes two
            directory, local_depths = self._dir * 2, self._local * 2
            directory[0::2] = directory[1::2] = self._dir
            local_depths[0::2] = local_depths[1::2] = self._local
            self._dir, self._local = directory, local_depths
            self._shift -= 1
            depth += 1
            slot <<= 1
        span = 1 << (depth - local)
        first = slot >> (depth - local) << (depth - local)
        # Words below ``cut`` have a 0 at bit ``local`` (counted from the top).
        cut = bisect_left(words, ((words[0] >> (64 - local) << 1) | 1) << (63 - local))
        half = span >> 1
        self._dir[first:first + half] = [array("Q", words[:cut])] * half
        self._dir[first + half:first + span] = [array("Q", words[cut:])] * half
        self._local[first:first + span] = bytes([local + 1]) * span

    def lookup(
        self, request_id: str, fp: str, read: Callable[[int, int], bytes], sequence_field: str,
    ) -> Applied | None:
        """The earlier application of this exact request, None if new; raises on reuse.

        ``read(start, end)`` returns the stream's bytes (durable or staged) in that
        range; the caller holds the stream's exclusive lock.
        """
        for start in self._candidates(request_id):
            records = self._records_from(start, read)
            first, end = next(records)
            if first.get(REQUEST_ID) != request_id:
                continue  # another id with the same tag
            if first.get(REQUEST_FINGERPRINT, "") != fp:
                raise LoopstateError(
                    ErrorCode.REQUEST_ID_REUSED,
                    f"request id {request_id!r} was already used for a different request; use a new request id",
                    request_id=request_id,
                    first_sequence=first[sequence_field],
                )
            last = first
            for event, event_end in records:
                if event.get(REQUEST_ID) != request_id or event.get(REQUEST_FINGERPRINT, "") != fp:
                    break
                last, end = event, event_end
            return Applied(fp, first[sequence_field], last[sequence_field], start, end)
        return None

    def _candidates(self, request_id: str) -> list[int]:
        """Offsets whose tag is this id's, earliest first: the stored file's, then memory's
        (then the spilled one, if any)."""
        low = self._hash(request_id) & self._tag_mask
        high = low + (1 << self._offset_bits)
        found = sorted(word - low for word in self._dir[low >> self._shift] if low <= word < high)
        if self.base is not None:
            found = self.base.candidates(low) + found
        spilled = self._spill.get(request_id)
        return found if spilled is None else [*found, spilled]

    def _records_from(self, start: int, read: Callable[[int, int], bytes]) -> Iterator[tuple[dict[str, Any], int]]:
        """(event, end offset) of each line from ``start`` on, read in growing windows."""
        pos, window, pending = start, _WINDOW, b""
        while pos < self._end:
            chunk = read(pos, min(pos + window, self._end))
            if not chunk:
                raise LoopstateError(
                    ErrorCode.CORRUPT_LEDGER,
                    f"the stream ends at byte {pos}, before the events it was read to hold; "
                    "run `loopstate verify` for the full report",
                    offset=pos,
                )
            offset = pos - len(pending)
            pos += len(chunk)
            lines = (pending + chunk).split(b"\n")
            pending = lines.pop()
            for line in lines:
                offset += len(line) + 1
                yield canonical.decode(line), offset
            window *= 2

    def memory_bytes(self) -> int:
        """What the index holds in memory: buckets (shared ones once), directory, spill."""
        buckets = {id(bucket): bucket for bucket in self._dir}.values()
        return (
            sum(sys.getsizeof(bucket) for bucket in buckets) + sys.getsizeof(self._dir)
            + sys.getsizeof(self._local) + sys.getsizeof(self._spill)
        )
