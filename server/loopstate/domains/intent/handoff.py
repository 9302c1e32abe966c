"""A task's active claims kept in handoff order, with what the hook context counts: reads cost what they show.

The snapshot page and the hook context show the first claims of a view in
handoff order (what the user said first, then hard limits, then goals) and only
count the rest. Ordering every active claim on each read made a cold read of a
task with 10,000 claims decode and sort all of them. So a section keeps its
active claims (``ActiveClaims``) sorted by a text key whose lexicographic order
is the handoff order, and beside each claim one byte saying how the hook
context treats it (its text, or the count it falls under, and whether it is an
open dispute) and the width of its hook-context line. A projection snapshot
holds the keys, the claims still encoded, the bytes and the widths, so a
restored section decodes a claim only when a read shows it, a count is a count
of bytes, and a page is a bisection and a merge (``View``).

Every field the order and the flags read (origin, status, facets, valid_from,
role, imported) is fixed while a claim is active: a claim changes only when it
is retired, and it leaves its ``ActiveClaims`` then.
"""

from __future__ import annotations

import datetime as dt
import heapq
import re
from array import array
from bisect import bisect_left, bisect_right
from typing import Iterable, Iterator, KeysView

import msgspec

from loopstate_protocol.intent import FACETS, STATUSES

from loopstate.domains.intent.records import Claim

# Handoff priority: what the user said first, then hard limits, then goals.
FACET_ORDER = {facet: i for i, facet in enumerate((
    "hard_constraint", "outcome", "success_signal", "failure_signal", "disagreement", "unknown",
    "soft_constraint", "tradeoff", "result_feedback",
))}
STATUS_ORDER = {status: i for i, status in enumerate(("explicit", "disputed", "unknown", "evidence", "inferred"))}

# A key is: 0 for a direct user claim else 1, the status's rank, the first facet's rank (one digit each),
# valid_from in UTC as 26 fixed-width characters, then the claim id (which makes the key unique).
ID_AT = 3 + len("0001-01-01T00:00:00.000000")

# Why a claim is only a count in the hook context (or, for TEXT, that it may appear as text): the low
# bits of its flag byte index this tuple; DISPUTED is set for an open dispute.
KINDS = ("text", "imported", "explicit_not_direct", *(s for s in STATUSES if s != "explicit"))
TEXT = 0
KIND_MASK = 0x0F
DISPUTED = 0x80
_DISPUTED_BYTE = rb"[\x80-\xff]"  # compiled at first use (re.compile caches it): a hook context never needs it

_CLAIM = msgspec.msgpack.Decoder(Claim)


def _instant(valid_from: str) -> str:
    """``valid_from`` as 26 characters that sort as the instants do.

    The server writes it canonical (core/clock.format_time: UTC, ``Z``, the
    microseconds only when there are any), which is cut or padded as text; any
    other form is read by ``fromisoformat`` (without ``parse_time``'s checks)
    and brought to UTC.
    """
    if len(valid_from) == 20 and valid_from[19] == "Z":
        return valid_from[:19] + ".000000"
    if len(valid_from) == 27 and valid_from[19] == "." and valid_from[26] == "Z":
        return valid_from[:26]
    when = dt.datetime.fromisoformat(valid_from)
    if when.tzinfo is not None:
        when = when.astimezone(dt.timezone.utc).replace(tzinfo=None)
    return when.isoformat(timespec="microseconds")


def order_key(claim: Claim) -> str:
    """The claim's place in handoff order as text: keys sort as (not direct user, status, first facet,
    valid_from, claim id) do."""
    facets = claim.facets
    facet = FACET_ORDER[facets[0]] if len(facets) == 1 else min((FACET_ORDER[f] for f in facets), default=len(FACETS))
    status = STATUS_ORDER.get(claim.epistemic_status, 9)
    return f"{0 if claim.direct_user else 1}{status}{facet}{_instant(claim.valid_from)}{claim.claim_id}"


def is_disputed(claim: Claim) -> bool:
    return claim.epistemic_status == "disputed" or "disagreement" in claim.facets


def omission_kind(claim: Claim) -> str | None:
    """Why a claim is only a count in the hook context, or None when it may appear as text.

    Only the user's own explicit words from a direct user event are text; an
    unknown or disputed record (by status) is a count whoever stated it.
    """
    if claim.imported:
        return "imported"
    if claim.epistemic_status != "explicit":
        return claim.epistemic_status
    if not (claim.direct_user and claim.user_explicit):
        return "explicit_not_direct"
    return None


def lead_facet(claim: Claim) -> str:
    """The facet a one-line rendering names: the claim's first in handoff priority."""
    return min(claim.facets, key=FACET_ORDER.__getitem__, default="")


def hook_line(claim: Claim) -> str:
    return f"- [{lead_facet(claim)}] {claim.statement}"


def _flag(claim: Claim) -> int:
    kind = omission_kind(claim)
    return (TEXT if kind is None else KINDS.index(kind)) | (DISPUTED if is_disputed(claim) else 0)


class ActiveClaims:
    """A section's active claims in handoff order: parallel sorted keys, claims (a restored one stays
    ``msgspec.Raw`` until first read), flag bytes and line widths; by claim id through an index built
    on the first lookup (a read in order never needs it, nor does folding an added claim).

    Claim ids are unique in a ledger (``decide`` mints each claim a fresh UUID, an import maps every
    claim it brings to a fresh one), so ``add`` does not look the id up.

    ``shared``: the state's project-wide claims, which must be the same objects as the section's
    (an event retires a claim through either): a claim decoded here is taken from it when it is there.
    """

    __slots__ = ("keys", "_claims", "flags", "widths", "_ids", "_shared")

    def __init__(self, shared: dict[str, Claim] | None = None) -> None:
        self.keys: list[str] = []
        self._claims: list[Claim | msgspec.Raw] = []
        self.flags = bytearray()
        self.widths = array("I")
        self._ids: dict[str, str] | None = {}  # claim id -> key
        self._shared = shared

    @classmethod
    def of(cls, claims: Iterable[Claim]) -> ActiveClaims:
        active = cls()
        for claim in claims:
            active.add(claim)
        return active

    @classmethod
    def restore(
        cls, keys: list[str], claims: list[msgspec.Raw], flags: bytes | memoryview, widths: bytes | memoryview,
        shared: dict[str, Claim],
    ) -> ActiveClaims:
        active = cls(shared)
        active.keys, active._claims, active._ids = keys, list(claims), None
        active.flags = bytearray(flags)
        active.widths.frombytes(widths)
        return active

    def parts(self) -> tuple[list[str], list[msgspec.Raw], bytes, bytes]:
        """What a snapshot holds (``restore``'s arguments): a claim never decoded is passed through as it is."""
        encode = msgspec.msgpack.encode
        raws = [c if type(c) is msgspec.Raw else msgspec.Raw(encode(c)) for c in self._claims]
        return list(self.keys), raws, bytes(self.flags), self.widths.tobytes()

    def _index(self) -> dict[str, str]:
        if self._ids is None:
            self._ids = {key[ID_AT:]: key for key in self.keys}
        return self._ids

    def __len__(self) -> int:
        return len(self.keys)

    def __contains__(self, claim_id: object) -> bool:
        return claim_id in self._index()

    def __iter__(self) -> Iterator[str]:
        """Claim ids in handoff order."""
        return (key[ID_AT:] for key in self.keys)

    def __reversed__(self) -> Iterator[str]:
        return (key[ID_AT:] for key in reversed(self.keys))

    def ids(self) -> KeysView[str]:
        return self._index().keys()

    def at(self, pos: int) -> Claim:
        """The claim at ``pos`` in handoff order, decoded on first use."""
        claim = self._claims[pos]
        if type(claim) is msgspec.Raw:
            shared = self._shared
            found = shared.get(self.keys[pos][ID_AT:]) if shared else None
            claim = self._claims[pos] = found if found is not None else _CLAIM.decode(claim)
        return claim

    def get(self, claim_id: str) -> Claim | None:
        key = self._index().get(claim_id)
        return None if key is None else self.at(bisect_left(self.keys, key))

    def values(self) -> list[Claim]:
        """Every claim, in handoff order (decodes them all)."""
        return [self.at(pos) for pos in range(len(self.keys))]

    def items(self) -> list[tuple[str, Claim]]:
        return [(claim.claim_id, claim) for claim in self.values()]

    def add(self, claim: Claim) -> None:
        key = order_key(claim)
        pos = bisect_left(self.keys, key)
        self.keys.insert(pos, key)
        self._claims.insert(pos, claim)
        self.flags.insert(pos, _flag(claim))
        self.widths.insert(pos, len(hook_line(claim)))
        if self._ids is not None:
            self._ids[claim.claim_id] = key

    def pop(self, claim_id: str) -> Claim | None:
        """Take the claim with this id out; None when there is none."""
        key = self._index().pop(claim_id, None)
        if key is None:
            return None
        pos = bisect_left(self.keys, key)
        claim = self.at(pos)
        del self.keys[pos], self._claims[pos], self.flags[pos], self.widths[pos]
        return claim

    def count(self, kind: int) -> int:
        """How many claims have this omission kind (an index into KINDS)."""
        return self.flags.count(kind) + self.flags.count(kind | DISPUTED)

    def disputes(self) -> int:
        return sum(self.flags.count(DISPUTED | kind) for kind in range(len(KINDS)))


# One place in a view: (key, which part, position in that part)
Place = tuple[str, int, int]


class View:
    """The active claims one read shows, in handoff order: the ``ActiveClaims`` of its sections merged."""

    def __init__(self, parts: list[ActiveClaims]) -> None:
        self.parts = [part for part in parts if part]

    def __len__(self) -> int:
        return sum(len(part) for part in self.parts)

    def count(self, kind: int) -> int:
        return sum(part.count(kind) for part in self.parts)

    def disputes(self) -> int:
        return sum(part.disputes() for part in self.parts)

    def places(self, after: str | None = None) -> Iterator[Place]:
        """Every claim's place after the key ``after`` (all for None), in handoff order."""
        def walk(n: int, part: ActiveClaims) -> Iterator[Place]:
            keys = part.keys
            for pos in range(0 if after is None else bisect_right(keys, after), len(keys)):
                yield keys[pos], n, pos

        walks = [walk(n, part) for n, part in enumerate(self.parts)]
        return walks[0] if len(walks) == 1 else heapq.merge(*walks)

    def claim(self, place: Place) -> Claim:
        return self.parts[place[1]].at(place[2])

    def after(self, after: str | None) -> int:
        """How many claims sort after the key ``after``."""
        return sum(len(part) - (0 if after is None else bisect_right(part.keys, after)) for part in self.parts)

    def page(self, after: str | None, limit: int) -> tuple[list[Claim], int]:
        """The first ``limit`` claims after the key ``after`` and how many follow them."""
        chosen = [self.claim(place) for place, _ in zip(self.places(after), range(limit))]
        return chosen, self.after(after) - len(chosen)

    def claims(self) -> list[Claim]:
        """Every claim, in handoff order (decodes them all)."""
        return [self.claim(place) for place in self.places()]

    def disputed(self) -> list[Claim]:
        """The open disputes, in handoff order (found by their flag bytes: decodes and orders only them)."""
        found = sorted(
            (part.keys[hit.start()], n, hit.start())
            for n, part in enumerate(self.parts) for hit in re.finditer(_DISPUTED_BYTE, part.flags)
        )
        return [self.claim(place) for place in found]
