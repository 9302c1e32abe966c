"""A ledger opened with announce_history=False (what the service uses) folds the history it
finds on its first catch-up without returning it, then returns every later record exactly once."""

from __future__ import annotations

from corekit import event
from loopstate.core.ledger import Ledger

from corekit import TEST_LAYOUT


def _seed(project, n: int) -> None:
    writer = Ledger(project, "core", TEST_LAYOUT)
    for i in range(n):
        with writer.mutation() as tx:
            tx.append([event(i)])


def test_the_history_found_on_a_first_refresh_is_folded_but_not_returned(core_project):
    _seed(core_project, 5)
    folded: list[int] = []
    ledger = Ledger(core_project, "core", TEST_LAYOUT, on_record=lambda r: folded.append(r.event["sequence"]),
                    announce_history=False)
    assert ledger.refresh() == []
    assert folded == [1, 2, 3, 4, 5] and ledger.head[0] == 5
    with Ledger(core_project, "core", TEST_LAYOUT).mutation() as tx:
        tx.append([event(6), event(7)])
    assert [r.event["sequence"] for r in ledger.refresh()] == [6, 7]
    assert ledger.refresh() == []
    assert folded == [1, 2, 3, 4, 5, 6, 7]


def test_the_history_found_by_a_first_mutation_is_not_listed_as_caught_up(core_project):
    _seed(core_project, 3)
    ledger = Ledger(core_project, "core", TEST_LAYOUT, announce_history=False)
    with ledger.mutation() as tx:
        assert tx.caught_up.records == []
        tx.append([event(4)])
    other = Ledger(core_project, "core", TEST_LAYOUT)
    with other.mutation() as tx:
        tx.append([event(5)])
    with ledger.mutation() as tx:
        assert [r.event["sequence"] for r in tx.caught_up.records] == [5]


def test_by_default_a_first_refresh_returns_the_whole_history(core_project):
    _seed(core_project, 3)
    assert [r.event["sequence"] for r in Ledger(core_project, "core", TEST_LAYOUT).refresh()] == [1, 2, 3]
