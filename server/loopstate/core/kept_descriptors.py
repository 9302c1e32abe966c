"""How many ledgers of this process keep their lock and stream descriptors open between mutations.

A ledger keeps its descriptors open so that a stream mutated again and again
pays no open, close and checks each time; a server that has touched hundreds
of streams (one per run or goal) must still not run out of descriptors. This
is the budget: a process-wide recency list of ledgers, of which the least
recently mutated idle ones beyond KEPT_OPEN close theirs (they reopen, fully
checked, on their next mutation). A ledger (``core/ledger.py``) calls
``keep_open`` as its mutation begins; this module knows a ledger only as a
``Keeper``, whose ``close_if_idle`` closes its descriptors unless a mutation
holds it.
"""

from __future__ import annotations

import threading
import weakref
from collections import OrderedDict
from typing import Protocol


class Keeper(Protocol):
    """What keeps descriptors open between mutations (a ``Ledger``)."""

    def close_if_idle(self) -> bool:
        """Close the kept descriptors unless a mutation holds them; whether they were closed."""
        ...


# At most this many ledgers keep their lock and stream descriptors open between mutations:
# a server that has touched hundreds of streams (one per run or goal) must not
# run out of descriptors. The least recently mutated idle ones close first.
KEPT_OPEN = 64
_kept_lock = threading.Lock()
_kept: "OrderedDict[int, weakref.ref[Keeper]]" = OrderedDict()
_most_recent: "weakref.ref[Keeper] | None" = None


def keep_open(ledger: Keeper) -> None:
    """Mark ``ledger`` (which a mutation of the caller's holds) most recently used; close the
    kept descriptors of the least recently used idle ledgers beyond KEPT_OPEN.

    The common case, one busy stream mutated again, is one reference compare
    without the lock: another thread can only make another ledger the most
    recent meanwhile, and never closes one a mutation holds (``close_if_idle``).
    """
    global _most_recent
    recent = _most_recent
    if recent is not None and recent() is ledger:
        return
    key = id(ledger)
    with _kept_lock:
        _most_recent = weakref.ref(ledger)
        if key in _kept and _kept[key]() is ledger:
            _kept.move_to_end(key)
        else:
            _kept.pop(key, None)
            _kept[key] = weakref.ref(ledger)
        excess = len(_kept) - KEPT_OPEN
        for key, ref in list(_kept.items()):
            if excess <= 0:
                break
            other = ref()
            if other is None:
                del _kept[key]
                excess -= 1
            elif other is not ledger and other.close_if_idle():
                del _kept[key]
                excess -= 1
