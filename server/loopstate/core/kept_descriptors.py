"""How many ledgers of this process keep their lock and stream descriptors open between mutations.

A ledger keeps its descriptors open so that a stream mutated again and again
pays no open, close and checks each time; a server that has touched hundreds
of streams (one per run or goal) must still not run out of descriptors. This
is the budget: a process-wide recency list of ledgers, of which the least
recently mutated idle ones beyond KEPT_OPEN close theirs (they reopen, fully
checked, on their next mutation). Split out of ``core/ledger.py``, whose
``Scope`` (``core/mutation.py``) calls ``keep_open`` as a mutation begins; it
uses the ledger's own ``_using`` lock and ``_close_kept``.
"""

from __future__ import annotations

import threading
import weakref
from collections import OrderedDict
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from loopstate.core.ledger import Ledger

# At most this many ledgers keep their lock and stream descriptors open between mutations:
# a server that has touched hundreds of streams (one per run or goal) must not
# run out of descriptors. The least recently mutated idle ones close first.
KEPT_OPEN = 64
_kept_lock = threading.Lock()
_kept: "OrderedDict[int, weakref.ref[Ledger]]" = OrderedDict()
_most_recent: "weakref.ref[Ledger] | None" = None


def keep_open(ledger: Ledger) -> None:
    """Mark ``ledger`` (whose ``_using`` the caller holds) most recently used; close the
    kept descriptors of the least recently used idle ledgers beyond KEPT_OPEN.

    The common case, one busy stream mutated again, is one reference compare
    without the lock: another thread can only make another ledger the most
    recent meanwhile, and never closes one whose ``_using`` is held.
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
            elif other is not ledger and other._using.acquire(blocking=False):
                try:
                    other._close_kept()
                finally:
                    other._using.release()
                del _kept[key]
                excess -= 1
