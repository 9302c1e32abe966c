"""A long-lived reader following another process's appends holds nothing per event read.

Through real Ledgers on real files (two ledgers on one stream are two processes as far
as the store can tell: separate descriptors, separate flocks): a catch-up past the
owner's ``news_limit`` keeps only its bounds, and a read outside a mutation indexes no
request id, while the next mutation still finds every earlier request, from before and
after each read, and from a snapshot start.
"""

from __future__ import annotations

import pytest

from corekit import TEST_LAYOUT, event
from loopstate.core.errors import LoopstateError
from loopstate.core.ledger import Ledger
from loopstate.core.news import News
from loopstate_protocol.errors import ErrorCode


def _append(ledger: Ledger, first: int, count: int, prefix: str = "r") -> None:
    """``count`` one-event requests ``prefix{n}`` (n from ``first``), in one group commit (one write)."""
    def work(tx) -> None:
        for n in range(first, first + count):
            tx.append([event(n)], request_id=f"{prefix}{n}", fp="fp")
    ledger.submit(work)


def test_a_catch_up_past_the_news_limit_keeps_only_its_bounds(new_ledger) -> None:
    writer, folded = new_ledger(), []
    follower = Ledger(writer.project, "core", TEST_LAYOUT, news_limit=5, on_record=lambda r: folded.append(r.event["n"]))
    _append(writer, 0, 2)
    assert follower.catch_up().count == 2  # the first open announces the history (announce_history)
    _append(writer, 2, 3)
    small = follower.catch_up()
    assert small.complete and [r.event["n"] for r in small.records] == [2, 3, 4]
    _append(writer, 5, 40)
    big = follower.catch_up()
    assert (big.count, big.complete, big.records) == (40, False, [])
    assert (big.first.event["n"], big.last.event["n"]) == (5, 44)
    assert big.last.event["sequence"] == follower.head[0] == 45
    assert folded == list(range(45))  # every event folded all the same, once, in order
    assert follower.catch_up().count == 0


def test_a_first_open_that_does_not_announce_the_history_returns_no_news(new_ledger) -> None:
    writer = new_ledger()
    _append(writer, 0, 300)
    follower = Ledger(writer.project, "core", TEST_LAYOUT, news_limit=5, announce_history=False)
    history = follower.catch_up()
    assert (history.count, bool(history), follower.head[0]) == (0, False, 300)
    assert follower.catch_up(collect=False).count == 0


def test_news_keeps_records_up_to_its_limit_and_none_past_it() -> None:
    records = [(i, i, i + 1) for i in range(4)]
    assert News(None, records).records == records and News(4, records).complete
    over = News(3, records)
    assert (over.count, over.complete, over.records, over.first, over.last) == (4, False, [], records[0], records[3])
    assert not News(0) and News(0, records[:1]) and not News(0, records[:1]).complete


def test_a_read_indexes_no_request_and_the_next_mutation_finds_them_all(new_ledger) -> None:
    writer, follower = new_ledger(), new_ledger()
    _append(writer, 0, 300)
    follower.refresh()
    assert follower.requests.in_memory() == 0  # the old code held a word per request read
    with follower.mutation() as tx:
        assert [r.event["n"] for r in tx.earlier("r7", "fp")] == [7]
        tx.append([event(300)], request_id="mine", fp="fp")
    _append(writer, 301, 200)
    follower.refresh()
    held = follower.requests.in_memory()
    assert held == 301  # what the mutation indexed; the 200 read since wait for the next one
    with follower.mutation() as tx:
        assert [r.event["n"] for r in tx.earlier("r450", "fp")] == [450]
        assert [r.event["n"] for r in tx.earlier("mine", "fp")] == [300]
        assert [r.event["n"] for r in tx.earlier("r0", "fp")] == [0]
        assert tx.earlier("new", "fp") is None
        with pytest.raises(LoopstateError) as reused:
            tx.earlier("r420", "other")
        assert reused.value.code is ErrorCode.REQUEST_ID_REUSED
    assert follower.requests.in_memory() == 501


def test_a_mutation_that_neither_looks_up_nor_appends_builds_no_index(new_ledger) -> None:
    """An idle snapshot or a compact takes the exclusive lock only to write the snapshot."""
    writer, follower = new_ledger(), new_ledger()
    _append(writer, 0, 100)
    follower.refresh()
    with follower.mutation():
        follower.save_snapshot()
    _append(writer, 100, 100)
    with follower.mutation():  # this catch-up is folded unindexed too: a range waits already
        pass
    assert follower.requests.in_memory() == 0
    with follower.mutation() as tx:
        assert [r.event["n"] for r in tx.earlier("r150", "fp")] == [150]
        assert [r.event["n"] for r in tx.earlier("r50", "fp")] == [50]
    assert follower.requests.in_memory() == 200  # each request once: no range indexed twice


def test_a_read_after_a_first_open_from_byte_0_defers_every_request(new_ledger) -> None:
    writer = new_ledger()
    _append(writer, 0, 50)
    follower = new_ledger()
    follower.refresh(collect=False)
    _append(writer, 50, 50)
    follower.refresh()
    assert follower.requests.in_memory() == 0
    with follower.mutation() as tx:
        for n in (0, 49, 50, 99):
            assert [r.event["n"] for r in tx.earlier(f"r{n}", "fp")] == [n]
