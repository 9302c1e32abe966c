"""Group commit: threads of one process share one write+fsync, each acknowledged only when durable."""

from __future__ import annotations

import os
import threading
import time

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from corekit import event, read_all
from loopstate.core.errors import LoopstateError
from loopstate.core.ledger import Ledger
from loopstate.core.project import Project
from loopstate_protocol.errors import ErrorCode

from corekit import TEST_LAYOUT


def _durable_events(project) -> list[dict]:
    """What a brand-new reader finds in the file right now."""
    return read_all(project, "core", TEST_LAYOUT)[0]


def _note(tx, request_id: str, body: dict):
    earlier = tx.earlier(request_id, "fp-" + request_id)
    if earlier is not None:
        return earlier
    return tx.append([body], request_id=request_id, fp="fp-" + request_id)


def test_concurrent_submits_make_one_chain_and_each_returns_only_durable_events(core_project):
    ledger = Ledger(core_project, "core", TEST_LAYOUT)
    problems: list[str] = []

    def writer(k: int) -> None:
        for i in range(40):
            (record,) = ledger.submit(lambda tx: _note(tx, f"w{k}-{i}", event(i, writer=k)))
            # Acknowledged means durable: a fresh reader already sees it in the file.
            durable = _durable_events(core_project)
            if len(durable) < record.event["sequence"] or durable[record.event["sequence"] - 1] != record.event:
                problems.append(f"w{k}-{i} acknowledged before it was durable")

    threads = [threading.Thread(target=writer, args=(k,)) for k in range(8)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert problems == []
    events = _durable_events(core_project)
    assert [e["sequence"] for e in events] == list(range(1, 321))
    assert {(e["writer"], e["n"]) for e in events} == {(k, i) for k in range(8) for i in range(40)}
    assert ledger.head == (320, events[-1]["event_hash"])


def _queue_behind_a_blocked_leader(ledger: Ledger, works: list) -> tuple[list, list[threading.Thread]]:
    """Start a leader that blocks inside its work until ``works`` are all queued behind it."""
    release = threading.Event()
    results: list = [None] * (len(works) + 1)

    def run(index: int, work) -> None:
        try:
            results[index] = ("ok", ledger.submit(work))
        except BaseException as exc:  # delivered to exactly this caller
            results[index] = ("error", exc)

    def leader_work(tx):
        release.wait(30)
        return id(tx)

    def wait_until(condition) -> None:  # a bound, not a timing assertion: fail rather than hang
        deadline = time.monotonic() + 60
        while not condition():
            assert time.monotonic() < deadline, "the group never formed"
            time.sleep(0.001)

    threads = [threading.Thread(target=run, args=(0, leader_work))]
    threads[0].start()
    wait_until(lambda: ledger._group_commit is not None and ledger._group_commit._leading)
    for index, work in enumerate(works, start=1):
        threads.append(threading.Thread(target=run, args=(index, work)))
        threads[-1].start()
    wait_until(lambda: len(ledger._group_commit._queue) == len(works))  # every follower waits behind the leader
    release.set()
    for t in threads:
        t.join(30)
    return results, threads


def test_waiting_submits_share_one_mutation_and_one_fsync(core_project):
    ledger = Ledger(core_project, "core", TEST_LAYOUT)
    works = [lambda tx, i=i: (id(tx), _note(tx, f"r{i}", event(i))) for i in range(7)]
    results, _ = _queue_behind_a_blocked_leader(ledger, works)
    assert all(kind == "ok" for kind, _ in results)
    group_ids = {value for _, value in results[:1]} | {value[0] for _, value in results[1:]}
    assert len(group_ids) == 1  # the seven waiters queued during the leader's work joined its group
    assert [value[1][0].event["sequence"] for _, value in results[1:]] == list(range(1, 8))
    assert len(_durable_events(core_project)) == 7


def test_one_failing_work_does_not_fail_the_others_in_its_group(core_project):
    ledger = Ledger(core_project, "core", TEST_LAYOUT)
    ledger.submit(lambda tx: _note(tx, "taken", event(0)))

    def reuse(tx):
        tx.earlier("taken", "a different fingerprint")

    works = [lambda tx: _note(tx, "a", event(1)), reuse, lambda tx: _note(tx, "b", event(2)),
             lambda tx: _note(tx, "a", event(1))]
    results, _ = _queue_behind_a_blocked_leader(ledger, works)
    kinds = [kind for kind, _ in results[1:]]
    assert kinds == ["ok", "error", "ok", "ok"]
    assert results[2][1].code is ErrorCode.REQUEST_ID_REUSED
    # The exact retry of "a" inside the same group got the first "a" events back.
    assert results[4][1] == results[1][1]
    assert [e["n"] for e in _durable_events(core_project)] == [0, 1, 2]


def test_when_the_shared_write_is_refused_every_caller_in_the_group_gets_the_error_and_nothing_is_kept(core_project, tmp_path):
    ledger = Ledger(core_project, "core", TEST_LAYOUT)
    ledger.submit(lambda tx: _note(tx, "first", event(0)))
    outside = tmp_path / "linked.jsonl"

    def link_then_note(tx):
        # Something makes the stream unsafe before the group's write: the write must refuse.
        os.link(ledger.stream.path, outside)
        return _note(tx, "x", event(1))

    results, _ = _queue_behind_a_blocked_leader(ledger, [link_then_note, lambda tx: _note(tx, "y", event(2))])
    # The two waiters queued while the leader's work ran, so they joined its group.
    assert [kind for kind, _ in results] == ["error", "error", "error"]
    assert all(value.code is ErrorCode.UNSAFE_PATH for _, value in results)
    os.unlink(outside)
    assert [e["n"] for e in _durable_events(core_project)] == [0]
    # The ledger forgot what it had folded but never wrote, and carries on from the file.
    (record,) = ledger.submit(lambda tx: _note(tx, "x", event(1)))
    assert record.event["sequence"] == 2
    assert ledger.head[0] == 2


class Interrupted(BaseException):
    """Not an Exception: like KeyboardInterrupt, it stops the whole group."""


def test_an_interrupted_group_writes_nothing_and_the_ledger_carries_on_from_the_file(core_project):
    ledger = Ledger(core_project, "core", TEST_LAYOUT)
    ledger.submit(lambda tx: _note(tx, "first", event(0)))

    def interrupt(tx):
        raise Interrupted()

    results, _ = _queue_behind_a_blocked_leader(ledger, [lambda tx: _note(tx, "staged", event(1)), interrupt])
    assert [kind for kind, _ in results] == ["error", "error", "error"]
    assert all(isinstance(value, Interrupted) for _, value in results)
    assert [e["n"] for e in _durable_events(core_project)] == [0]
    (record,) = ledger.submit(lambda tx: _note(tx, "after", event(5)))
    assert record.event["sequence"] == 2 and ledger.head[0] == 2
    assert [e["n"] for e in _durable_events(core_project)] == [0, 5]  # nothing of the interrupted group
    (retry,) = ledger.submit(lambda tx: _note(tx, "staged", event(1)))  # never written, so not a retry
    assert retry.event["sequence"] == 3


def test_submit_raises_the_works_own_error_after_the_group_is_durable(core_project):
    ledger = Ledger(core_project, "core", TEST_LAYOUT)

    def append_then_fail(tx):
        tx.append([event(1)])
        raise LoopstateError(ErrorCode.RULE_VIOLATION, "refused after appending")

    with pytest.raises(LoopstateError) as info:
        ledger.submit(append_then_fail)
    assert info.value.code is ErrorCode.RULE_VIOLATION
    # Like a plain mutation: what the work appended before failing is kept.
    assert [e["n"] for e in _durable_events(core_project)] == [1]


@settings(max_examples=25, deadline=None, suppress_health_check=[HealthCheck.too_slow, HealthCheck.function_scoped_fixture])
@given(requests=st.lists(st.tuples(st.sampled_from("abcdef"), st.sampled_from(["x", "y"]), st.integers(1, 3)), min_size=1, max_size=24),
       threads=st.integers(1, 6))
def test_any_mix_of_concurrent_requests_and_retries_is_applied_once_each(tmp_path_factory, requests, threads):
    """Whatever the interleaving: each request id is written once, by whichever fingerprint came
    first; exact retries get those events back; changed retries get REQUEST_ID_REUSED."""
    base = tmp_path_factory.mktemp("group")
    (base / "ws").mkdir()
    project = Project(str(base / "ws"), data_dir=base / "data", lock_timeout=30)
    ledger = Ledger(project, "core", TEST_LAYOUT)
    outcomes: list[tuple[str, str, str, object]] = []

    def work_for(request_id: str, fp: str, count: int):
        def work(tx):
            earlier = tx.earlier(request_id, fp)
            if earlier is not None:
                return earlier
            return tx.append([event(k, req=request_id) for k in range(count)], request_id=request_id, fp=fp)
        return work

    def run(mine):
        for request_id, fp, count in mine:
            try:
                outcomes.append((request_id, fp, "ok", ledger.submit(work_for(request_id, fp, count))))
            except LoopstateError as exc:
                outcomes.append((request_id, fp, exc.code.value, None))

    workers = [threading.Thread(target=run, args=(requests[k::threads],)) for k in range(threads)]
    for w in workers:
        w.start()
    for w in workers:
        w.join()

    events = _durable_events(project)
    assert [e["sequence"] for e in events] == list(range(1, len(events) + 1))
    written: dict[str, str] = {}
    for e in events:
        written.setdefault(e["request_id"], e["request_fingerprint"])
        assert written[e["request_id"]] == e["request_fingerprint"]
    assert set(written) == {r for r, _, _ in requests}
    by_request = {r: [e for e in events if e["request_id"] == r] for r in written}
    for request_id, fp, result, records in outcomes:
        if fp == written[request_id]:
            assert result == "ok" and [rec.event for rec in records] == by_request[request_id]
        else:
            assert result == ErrorCode.REQUEST_ID_REUSED.value


def test_a_new_leader_gathers_as_many_jobs_as_the_last_group_held_before_it_writes(core_project):
    """After a group of five, the next leader waits (bounded by the last write+fsync's time) for five jobs:
    the five writers queueing one after another share one write and one fsync; a lone writer is not held
    past that bound."""
    from loopstate.core.group_commit import GroupCommit

    ledger = Ledger(core_project, "core", TEST_LAYOUT)
    ledger.submit(lambda tx: _note(tx, "first", event(0)))
    group: GroupCommit = ledger._group_commit
    flushes = []
    flush = ledger.stream.flush
    ledger.stream.flush = lambda: (flushes.append(1), flush())[1]
    group._last_size, group._last_flush = 5, 30.0  # as after a group of five; the bound far above the test's time
    results = []
    threads = [threading.Thread(target=lambda k=k: results.append(ledger.submit(lambda tx: _note(tx, f"g{k}", event(k)))))
               for k in range(5)]
    for t in threads:
        t.start()
        time.sleep(0.01)  # one after another: without the gathering the first would write alone
    for t in threads:
        t.join(timeout=60)
    assert len(results) == 5 and flushes == [1], flushes
    assert [e["sequence"] for e in _durable_events(core_project)] == list(range(1, 7))
    group._last_size, group._last_flush = 5, 0.05  # a lone writer waits at most the last flush's time
    t0 = time.monotonic()
    ledger.submit(lambda tx: _note(tx, "alone", event(9)))
    assert time.monotonic() - t0 < 30 and group._last_size == 1
