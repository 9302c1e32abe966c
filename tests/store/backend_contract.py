"""The suite every store passes (the storage contract, core/backend.py), whatever holds the events.

Each test takes the ``backend`` fixture (tests/store/conftest.py: one store per kind,
the local JSONL store always, PostgreSQL when its cluster fixture is there) and uses
only the contract's names, so a new store is proved by adding its kind, not by
writing tests. A second instance of the store is ``second_backend`` (same project,
opened afresh) or a child process (tests/store/store_child.py) opened from the URL.
"""

from __future__ import annotations

import json
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest
from tests.core.corekit import TEST_LAYOUT

from loopstate_protocol.errors import ErrorCode

from loopstate.core.backend import (
    EMPTY, ChainError, Head, HeadConflict, Recovers, Store, StoredEvent, StreamLedger, seal_batch, verify_chain,
)
from loopstate.core.errors import LoopstateError
from loopstate.core.record import Record

CHILD = Path(__file__).resolve().parent / "store_child.py"
STREAM = "core"


def events(*names: str) -> list[dict[str, object]]:
    return [{"n": name, "schema_version": 1} for name in names]


def append(store: Store, *names: str, stream: str = STREAM) -> Head:
    head = store.head(stream, TEST_LAYOUT)
    return store.append(stream, TEST_LAYOUT, seal_batch(events(*names), TEST_LAYOUT, head), expected=head)


def names_in(stored: list[StoredEvent]) -> list[object]:
    return [json.loads(item.line)["n"] for item in stored]


def run_child(store_url: str, root: Path, data_dir: Path, count: int, stream: str = STREAM) -> Head:
    done = subprocess.run(
        [sys.executable, str(CHILD), store_url, str(root), str(data_dir), stream, str(count)],
        capture_output=True, text=True, timeout=120,
    )
    assert done.returncode == 0, done.stderr
    head = json.loads(done.stdout)
    return Head(head["sequence"], head["hash"])


# append, head, read -------------------------------------------------------------------------


def test_an_empty_stream_has_the_empty_head_and_no_events(backend: Store) -> None:
    assert backend.head(STREAM, TEST_LAYOUT) == EMPTY
    assert list(backend.read(STREAM, TEST_LAYOUT)) == []
    assert backend.stream_names() == []


def test_an_append_at_the_head_returns_the_new_head(backend: Store) -> None:
    lines = seal_batch(events("a", "b"), TEST_LAYOUT, EMPTY)
    head = backend.append(STREAM, TEST_LAYOUT, lines, expected=EMPTY)
    assert head == Head(2, lines[-1].hash)
    assert backend.head(STREAM, TEST_LAYOUT) == head
    head = backend.append(STREAM, TEST_LAYOUT, seal_batch(events("c"), TEST_LAYOUT, head), expected=head)
    assert head.sequence == 3
    assert backend.head(STREAM, TEST_LAYOUT) == head


def test_an_append_at_a_stale_head_is_a_conflict_and_writes_nothing(backend: Store, second_backend: Store) -> None:
    first = append(backend, "a")
    stale = first
    moved = append(second_backend, "b")  # another instance appended meanwhile
    with pytest.raises(HeadConflict) as caught:
        backend.append(STREAM, TEST_LAYOUT, seal_batch(events("late"), TEST_LAYOUT, stale), expected=stale)
    assert caught.value.code is ErrorCode.CONFLICT
    assert (caught.value.expected, caught.value.actual) == (stale, moved)
    assert names_in(list(backend.read(STREAM, TEST_LAYOUT))) == ["a", "b"]
    # The conflict says where the stream is: appending there succeeds.
    actual = caught.value.actual
    assert backend.append(STREAM, TEST_LAYOUT, seal_batch(events("late"), TEST_LAYOUT, actual), expected=actual).sequence == 3


def test_lines_that_do_not_follow_the_head_are_refused_whole(backend: Store) -> None:
    head = append(backend, "a")
    wrong_link = seal_batch(events("x", "y"), TEST_LAYOUT, Head(1, "0" * 64))
    with pytest.raises(ChainError):
        backend.append(STREAM, TEST_LAYOUT, wrong_link, expected=head)
    good = seal_batch(events("x", "y"), TEST_LAYOUT, head)
    edited = [good[0], good[1]._replace(line=good[1].line.replace(b'"y"', b'"z"'))]
    with pytest.raises(ChainError):
        backend.append(STREAM, TEST_LAYOUT, edited, expected=head)
    half_batch = good[:1]  # the first of a batch of two, alone
    with pytest.raises(ChainError):
        backend.append(STREAM, TEST_LAYOUT, half_batch, expected=head)
    assert backend.head(STREAM, TEST_LAYOUT) == head
    assert names_in(list(backend.read(STREAM, TEST_LAYOUT))) == ["a"]


def test_read_from_a_sequence_gives_the_exact_lines_in_order(backend: Store) -> None:
    sealed = seal_batch(events("a", "b", "c"), TEST_LAYOUT, EMPTY)
    head = backend.append(STREAM, TEST_LAYOUT, sealed, expected=EMPTY)
    more = seal_batch(events("d"), TEST_LAYOUT, head, start=sealed[-1].end)
    backend.append(STREAM, TEST_LAYOUT, more, expected=head)
    everything = list(backend.read(STREAM, TEST_LAYOUT))
    assert everything == [*sealed, *more]  # byte for byte, offsets included
    assert [item.sequence for item in backend.read(STREAM, TEST_LAYOUT, after=2)] == [3, 4]
    assert list(backend.read(STREAM, TEST_LAYOUT, after=4)) == []


def test_a_ledger_append_writes_exactly_the_lines_seal_batch_makes(backend: Store) -> None:
    head = append(backend, "a")
    start = list(backend.read(STREAM, TEST_LAYOUT))[-1].end
    ledger = backend.open_ledger(STREAM, TEST_LAYOUT)
    with ledger.mutation() as tx:
        tx.append(events("b", "c"), request_id="req-1", fp="fp-1")
    expected = seal_batch(events("b", "c"), TEST_LAYOUT, head, start=start,
                          extra={"request_id": "req-1", "request_fingerprint": "fp-1"})
    assert list(backend.read(STREAM, TEST_LAYOUT, after=1)) == expected


def test_what_was_read_verifies_as_one_chain_and_an_edit_does_not(backend: Store) -> None:
    append(backend, "a", "b")
    head = append(backend, "c")
    stored = list(backend.read(STREAM, TEST_LAYOUT))
    assert verify_chain(stored, TEST_LAYOUT, STREAM) == head
    # From any head on: the tail after sequence 2 follows it.
    assert verify_chain(stored[2:], TEST_LAYOUT, STREAM, Head(2, stored[1].hash), start=stored[2].start) == head
    edited = [*stored[:1], stored[1]._replace(line=stored[1].line.replace(b'"b"', b'"B"')), *stored[2:]]
    with pytest.raises(ChainError) as caught:
        verify_chain(edited, TEST_LAYOUT, STREAM)
    assert caught.value.sequence == 2
    with pytest.raises(ChainError):
        verify_chain(stored[1:], TEST_LAYOUT, STREAM)  # not from the empty head
    with pytest.raises(ChainError):
        verify_chain(stored[:1], TEST_LAYOUT, STREAM)  # ends inside the batch of two


def test_streams_are_listed_once_written(backend: Store) -> None:
    append(backend, "a", stream="intent")
    append(backend, "b", stream="runs.r1")
    append(backend, "c", stream="intent")
    assert backend.stream_names() == ["intent", "runs.r1"]


# the folded ledger ----------------------------------------------------------------------------


def test_a_ledger_folds_every_event_once_in_order_and_appends_at_its_head(backend: Store, second_backend: Store) -> None:
    folded: list[object] = []
    ledger: StreamLedger = backend.open_ledger(STREAM, TEST_LAYOUT, on_record=lambda r: folded.append(r.event["n"]))
    append(second_backend, "a", "b")
    assert [r.event["n"] for r in ledger.catch_up().records] == ["a", "b"]
    with ledger.mutation() as tx:
        assert tx.caught_up.count == 0
        records = tx.append(events("c"), request_id="req-1", fp="fp-1")
    assert [r.event["sequence"] for r in records] == [3]
    assert ledger.head == (3, records[0].event["event_hash"])
    append(second_backend, "d")
    with ledger.mutation() as tx:
        assert [r.event["n"] for r in tx.caught_up.records] == ["d"]
    assert folded == ["a", "b", "c", "d"]
    stored = list(backend.read(STREAM, TEST_LAYOUT))
    assert [Record(json.loads(s.line), s.start, s.end) for s in stored][2].start == records[0].start
    assert verify_chain(stored, TEST_LAYOUT, STREAM).sequence == 4


def test_an_exact_retry_by_request_id_gets_the_first_events_and_a_changed_one_is_refused(
    backend: Store, second_backend: Store,
) -> None:
    ledger = backend.open_ledger(STREAM, TEST_LAYOUT)
    with ledger.mutation() as tx:
        assert tx.earlier("req-1", "fp-1") is None
        first = tx.append(events("a", "b"), request_id="req-1", fp="fp-1")
    again = second_backend.open_ledger(STREAM, TEST_LAYOUT)  # another instance: a retry after a restart
    with again.mutation() as tx:
        earlier = tx.earlier("req-1", "fp-1")
        assert earlier is not None
        assert [r.event for r in earlier] == [r.event for r in first]
        with pytest.raises(LoopstateError) as caught:
            tx.earlier("req-1", "fp-changed")
        assert caught.value.code is ErrorCode.REQUEST_ID_REUSED
        assert tx.earlier("req-2", "fp-2") is None
    assert backend.head(STREAM, TEST_LAYOUT).sequence == 2


def test_a_failed_append_keeps_nothing(backend: Store) -> None:
    folded: list[object] = []
    ledger = backend.open_ledger(STREAM, TEST_LAYOUT, on_record=lambda r: folded.append(r.event["n"]),
                                 on_reset=folded.clear)
    with ledger.mutation() as tx:
        tx.append(events("a"))
    with pytest.raises(TypeError):  # an event the canonical encoding refuses: nothing of the batch is kept
        with ledger.mutation() as tx:
            tx.append([{"n": "b", "schema_version": 1}, {"n": object(), "schema_version": 1}])
    assert backend.head(STREAM, TEST_LAYOUT).sequence == 1
    with ledger.mutation() as tx:
        tx.append(events("c"))
    assert names_in(list(backend.read(STREAM, TEST_LAYOUT))) == ["a", "c"]
    assert folded == ["a", "c"]


def test_threads_submitting_to_one_ledger_all_become_durable(backend: Store) -> None:
    ledger = backend.open_ledger(STREAM, TEST_LAYOUT)
    results: list[int] = []
    errors: list[BaseException] = []

    def writer(i: int) -> None:
        try:
            records = ledger.submit(lambda tx: tx.append(events(f"t{i}"), request_id=f"req-{i}", fp="fp"))
            results.append(records[0].event["sequence"])
        except BaseException as exc:  # reported below
            errors.append(exc)

    threads = [threading.Thread(target=writer, args=(i,)) for i in range(8)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(60)
    assert errors == []
    assert sorted(results) == list(range(1, 9))
    stored = list(backend.read(STREAM, TEST_LAYOUT))
    assert sorted(names_in(stored)) == sorted(f"t{i}" for i in range(8))
    assert verify_chain(stored, TEST_LAYOUT, STREAM).sequence == 8


# other processes ------------------------------------------------------------------------------


def test_another_process_appends_and_a_ledger_catches_up_on_its_events(
    backend: Store, store_url: str, root: Path, data_dir: Path,
) -> None:
    ledger = backend.open_ledger(STREAM, TEST_LAYOUT, announce_history=False)
    append(backend, "mine")
    ledger.catch_up()
    head = run_child(store_url, root, data_dir, 3)
    news = ledger.catch_up()
    assert [r.event["n"] for r in news.records] == ["child-0", "child-1", "child-2"]
    assert Head(*ledger.head) == head
    assert ledger.catch_up().count == 0


def test_the_change_feed_wakes_on_another_process_append(
    backend: Store, store_url: str, root: Path, data_dir: Path,
) -> None:
    append(backend, "first")  # the stream exists; its feed then watches for growth
    heard: list[str | None] = []
    feed = backend.changes([STREAM], on_change=heard.append)
    try:
        assert feed.wait(0.05) is False  # nothing yet
        run_child(store_url, root, data_dir, 1)
        assert feed.wait(30) is True
        assert STREAM in heard or None in heard
        ledger = backend.open_ledger(STREAM, TEST_LAYOUT)
        assert [r.event["n"] for r in ledger.catch_up().records] == ["first", "child-0"]
    finally:
        feed.close()


def test_the_change_feed_wakes_for_a_stream_not_made_yet(
    backend: Store, store_url: str, root: Path, data_dir: Path,
) -> None:
    feed = backend.changes(None)
    try:
        run_child(store_url, root, data_dir, 1, stream="goals")
        assert feed.wait(30) is True
        assert backend.head("goals", TEST_LAYOUT).sequence == 1
    finally:
        feed.close()


def test_an_exclusive_section_keeps_another_instance_waiting(backend: Store, second_backend: Store) -> None:
    entered, released = threading.Event(), threading.Event()
    order: list[str] = []

    def hold() -> None:
        with backend.exclusive(STREAM):
            entered.set()
            time.sleep(0.3)
            order.append("released")
            released.set()

    holder = threading.Thread(target=hold)
    holder.start()
    assert entered.wait(30)
    append(second_backend, "waited")  # takes the same stream's section: it waits for the holder
    order.append("appended")
    holder.join(30)
    assert order == ["released", "appended"]


def test_concurrent_processes_appending_at_their_heads_lose_nothing(
    backend: Store, store_url: str, root: Path, data_dir: Path,
) -> None:
    children = [
        subprocess.Popen([sys.executable, str(CHILD), store_url, str(root), str(data_dir), STREAM, "10"],
                         stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
        for _ in range(3)
    ]
    for child in children:
        _, err = child.communicate(timeout=120)
        assert child.returncode == 0, err
    stored = list(backend.read(STREAM, TEST_LAYOUT))
    assert len(stored) == 30
    assert verify_chain(stored, TEST_LAYOUT, STREAM).sequence == 30


# capabilities ---------------------------------------------------------------------------------


def test_a_store_that_recovers_reports_an_intact_stream_as_ok(backend: Store) -> None:
    if not isinstance(backend, Recovers):
        pytest.skip(f"{type(backend).__name__} has no recovery (an optional capability)")
    append(backend, "a", "b")
    report = backend.verify_stream(STREAM, TEST_LAYOUT)
    assert report["ok"] is True and report["sequence"] == 2

