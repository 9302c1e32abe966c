"""Retired claims as fixed-size places in the stream, not as their content.

A superseded or invalidated claim is read only by the audit views, exports and
refusal messages, yet a project holds one per claim it ever retired: kept as
an object (or its msgpack bytes) it makes a long-lived process grow with the
ledger's history. So a retired claim is kept as one 45-byte entry in its task's
``Entries``: where the record that added it starts in the stream (a 48-bit
offset, the first 8 bytes of its ``event_hash``, the claim's index in that
record), the same for the record that retired it, the ordinal of the
supersession edge it implies, whether it was superseded or invalidated, and
an 8-byte hash of its claim id to find it by. Everything else (the claim's ledger position, its
text, its lifecycle fields) is read back.

Reading one back (``rebuild``) takes the two records, read and verified by
the caller (the service's effects: the line's canonical hash must equal the
one kept here), and folds the claim from them as ``evolve`` did. The domain
stays pure: it never opens the stream itself.
"""

from __future__ import annotations

import hashlib
import struct
from typing import Any, Callable, Iterator, NamedTuple

from loopstate.domains.intent.records import Claim
from loopstate.domains.intent.rules import direct_user

# offset (low 32 bits, high 16), retiring offset (the same), index, retiring index, edge ordinal, flags,
# claim-id hash, digest, retiring digest
ENTRY = struct.Struct("<IHIHHHIB8s8s8s")
SIZE = ENTRY.size
MAX_OFFSET = 1 << 48
BLOCK = 91  # entries per block: 4,095 bytes

INVALIDATED = 1  # else superseded
HAS_EDGE = 2  # the retiring record's claim supersedes this one: an edge this entry implies

# A record's place in the stream: (offset of its line, its event_hash)
Place = tuple[int, str]
# Reads one record back: (offset, first 8 bytes of its event_hash) -> the verified event
ReadFn = Callable[[int, bytes], dict[str, Any]]


class Entry(NamedTuple):
    offset: int
    r_offset: int
    claim_index: int  # the claim's index in the record that added it (not tuple.index)
    r_index: int
    ordinal: int
    flags: int
    id_hash: bytes
    digest: bytes
    r_digest: bytes


def _entry(fields: tuple) -> Entry:
    low, high, r_low, r_high, *rest = fields
    return Entry(low | high << 32, r_low | r_high << 32, *rest)


def id_hash(claim_id: str) -> bytes:
    return hashlib.blake2b(claim_id.encode(), digest_size=8).digest()


def digest_of(event_hash: str) -> bytes:
    return bytes.fromhex(event_hash[:16])


class Entries:
    """One task's retired entries, in blocks of ``BLOCK`` entries that never change once full.

    One growing ``bytearray`` per task would be reallocated as it grows, and
    the allocator keeps the holes the old buffers leave (measured: a third
    more RSS than the entries themselves); a full block is its own ``bytes``
    of a fixed size, and only the last, small block grows.
    """

    __slots__ = ("_blocks", "_tail")

    def __init__(self) -> None:
        self._blocks: list[bytes] = []
        self._tail = bytearray()

    @classmethod
    def of(cls, data: bytes | bytearray | memoryview) -> Entries:
        made, step = cls(), BLOCK * SIZE
        full = len(data) // step * step
        made._blocks = [bytes(data[at:at + step]) for at in range(0, full, step)]
        made._tail = bytearray(data[full:])
        return made

    def add(self, entry: bytes) -> None:
        self._tail += entry
        if len(self._tail) >= BLOCK * SIZE:
            self._blocks.append(bytes(self._tail))
            self._tail = bytearray()

    def data(self) -> bytes:
        """Every entry, in the order they were added (a copy: the reads that want it are rare)."""
        return b"".join([*self._blocks, self._tail])

    __bytes__ = data

    def __len__(self) -> int:
        return len(self._blocks) * BLOCK + len(self._tail) // SIZE


def pack(
    into: Entries, claim_id: str, added: Place, index: int, retiring: Place, r_index: int,
    *, invalidated: bool, ordinal: int | None,
) -> None:
    """Append one retired claim's entry."""
    if added[0] >= MAX_OFFSET or retiring[0] >= MAX_OFFSET or (ordinal or 0) >= 1 << 32:
        raise OverflowError("an intent stream beyond 256 TiB or 4G supersessions does not fit a retired entry")
    flags = (INVALIDATED if invalidated else 0) | (HAS_EDGE if ordinal is not None else 0)
    into.add(ENTRY.pack(
        added[0] & 0xFFFFFFFF, added[0] >> 32, retiring[0] & 0xFFFFFFFF, retiring[0] >> 32, index, r_index,
        ordinal or 0, flags, id_hash(claim_id), digest_of(added[1]), digest_of(retiring[1]),
    ))


def entries(packed: bytes | bytearray | memoryview) -> Iterator[Entry]:
    for fields in ENTRY.iter_unpack(packed):
        yield _entry(fields)


def find(packed: bytes | bytearray | memoryview, wanted: bytes) -> int | None:
    """The slot of the entry whose claim-id hash is ``wanted`` (the last one: a claim is retired once)."""
    at = len(packed) - SIZE
    view = memoryview(packed)
    while at >= 0:
        if view[at + SIZE - 24:at + SIZE - 16] == wanted:
            return at // SIZE
        at -= SIZE
    return None


def claim_data(event: dict[str, Any], index: int) -> dict[str, Any]:
    """The claim a record added at ``index`` (the fields ``evolve`` folded it from)."""
    payload = event.get("payload") or {}
    kind = event["event_type"]
    if kind == "task_started":
        return payload["initial_claims"][index]
    if kind == "graph_imported":
        return payload["claims"][index]
    return payload["claim"]


def lifecycle(entry: Entry, retiring: dict[str, Any]) -> dict[str, Any]:
    """The lifecycle fields the retiring record gave the claim."""
    payload = retiring.get("payload") or {}
    if entry.flags & INVALIDATED:
        if retiring["event_type"] == "graph_imported":
            life = payload["claims"][entry.r_index].get("lifecycle") or {}
            return {"state": "invalidated", "invalidated_at": life.get("invalidated_at"), "invalidation_reason": life.get("reason")}
        return {"state": "invalidated", "invalidated_at": retiring["occurred_at"], "invalidation_reason": payload.get("reason")}
    return {"state": "superseded", "superseded_by": claim_data(retiring, entry.r_index)["claim_id"]}


def superseder_task(entry: Entry, retiring: dict[str, Any]) -> str:
    """The task of the claim that superseded this one (an import's claims name their own tasks)."""
    if retiring["event_type"] == "graph_imported":
        return (retiring.get("payload") or {})["claims"][entry.r_index]["task_id"]
    return retiring["task_id"]


def build_claim(
    event: dict[str, Any], data: dict[str, Any], task_id: str, *, index: int, imported: bool, place: Place | None,
) -> Claim:
    """The claim a record adds, as ``evolve`` folds it (and ``rebuild`` folds it again from the stream)."""
    ref = data.get("source_ref") or {}
    return Claim(
        claim_id=data["claim_id"], task_id=task_id, statement=data["statement"], role=data["role"],
        epistemic_status=data["epistemic_status"], scope=data.get("scope", "task"), facets=list(data["facets"]),
        valid_from=data["valid_from"], last_confirmed=data.get("last_confirmed"), confidence=data.get("confidence"),
        supersedes=list(data.get("supersedes") or []), source_ref=ref,
        # A claim is the user's own words only when the user made it (role) from the user's own event:
        # a promotion the user confirmed stays a system inference.
        direct_user=(not imported) and data["role"] == "user" and direct_user(event["actor"], ref),
        added_sequence=event.get("sequence", 0), added_index=index, imported=imported, place=place,
    )


def rebuild(entry: Entry, task_id: str, added: dict[str, Any], retiring: dict[str, Any]) -> Claim:
    """The retired claim, folded again from the record that added it and the one that retired it."""
    imported = added["event_type"] == "graph_imported"
    data = claim_data(added, entry.claim_index)
    claim = build_claim(added, data, task_id, index=entry.claim_index, imported=imported, place=None)
    for name, value in lifecycle(entry, retiring).items():
        setattr(claim, name, value)
    return claim
