"""A command's events are all or nothing: batch markers, short batches as torn tails.

A mutation that appends two or more events marks each with ``batch: [index,
size]``; a reader takes a batch only once its last event verified, so a power
cut that leaves the first lines of a batch (each complete, each hashing right)
leaves a torn tail that the next mutation quarantines and cuts, never a
half-applied command. Events without a marker (single events, and stores from
before markers) are batches of one.
"""

from __future__ import annotations

import pytest

from corekit import STREAM, TEST_LAYOUT, event, read_all, sealed_lines, write_stream
from loopstate.core import checkpoint, parallel_verify, quarantine
from loopstate.core.chain import BATCH, ChainError, rebatch
from loopstate.core.recovery import recover_stream, verify_stream
from loopstate.core.stream import CHUNK, SHORT_BATCH, Stream


def batch(first: int, size: int, **extra) -> list[dict]:
    return [event(first + i, **{BATCH: [i + 1, size]}, **extra) for i in range(size)]


def test_a_multi_event_append_marks_its_batch_and_a_single_event_carries_no_marker(new_ledger):
    ledger = new_ledger()
    with ledger.mutation() as tx:
        tx.append([event(1)])
    with ledger.mutation() as tx:
        tx.append([event(2), event(3), event(4)], request_id="r-1", fp="f" * 64)
    events, stream = read_all(ledger.project, STREAM, TEST_LAYOUT)
    assert BATCH not in events[0]
    assert [e[BATCH] for e in events[1:]] == [[1, 3], [2, 3], [3, 3]]
    assert stream.torn is None and stream.position.sequence == 4


@pytest.mark.parametrize("kept", [1, 2])
def test_a_batch_cut_at_a_line_end_is_a_torn_tail_that_the_next_mutation_cuts(core_project, new_ledger, kept):
    _, lines = sealed_lines([event(1), *batch(2, 3)], TEST_LAYOUT)
    # Every kept line is complete and hashes right: only the marker tells the batch is short.
    write_stream(core_project, STREAM, b"".join(lines[:1 + kept]))
    events, stream = read_all(core_project, STREAM, TEST_LAYOUT)
    assert [e["n"] for e in events] == [1]
    assert stream.torn is not None and stream.torn.reason == SHORT_BATCH
    assert stream.torn.offset == len(lines[0]) and stream.torn.length == sum(map(len, lines[1:1 + kept]))
    assert stream.position.offset == len(lines[0]) and stream.position.sequence == 1
    # A read repairs nothing; the next mutation quarantines the short batch and appends after the whole one.
    assert read_all(core_project, STREAM, TEST_LAYOUT)[1].torn == stream.torn
    ledger = new_ledger()
    with ledger.mutation() as tx:
        tx.append([event(9)])
    (summary,) = quarantine.entries(core_project.dir, STREAM)
    assert summary["reason"] == SHORT_BATCH and summary["length"] == stream.torn.length
    events, after = read_all(core_project, STREAM, TEST_LAYOUT)
    assert [e["n"] for e in events] == [1, 9] and events[1]["sequence"] == 2 and after.torn is None


def test_a_short_batch_followed_by_a_partial_line_is_one_torn_tail(core_project):
    _, lines = sealed_lines(batch(1, 3), TEST_LAYOUT)
    write_stream(core_project, STREAM, lines[0] + lines[1][:10])
    events, stream = read_all(core_project, STREAM, TEST_LAYOUT)
    assert events == [] and stream.torn.offset == 0 and stream.torn.reason == SHORT_BATCH


def test_a_partial_line_alone_is_still_a_partial_line(core_project):
    _, lines = sealed_lines([event(1), event(2)], TEST_LAYOUT)
    write_stream(core_project, STREAM, lines[0] + lines[1][:-1])
    events, stream = read_all(core_project, STREAM, TEST_LAYOUT)
    assert len(events) == 1 and stream.torn.reason == "partial final line"


@pytest.mark.parametrize("bad", [
    [event(1, **{BATCH: [1, 2]}), event(2)],                      # a batch of 2 ends after 1
    [event(1, **{BATCH: [2, 2]})],                                 # a batch that does not start at 1
    [event(1, **{BATCH: [1, 2]}), event(2, **{BATCH: [1, 2]})],  # restarted inside
    [event(1, **{BATCH: [1, 3]}), event(2, **{BATCH: [2, 2]})],  # the size changed
    [event(1, **{BATCH: [1, 1]})],                                 # a batch of one is never marked
    [event(1, **{BATCH: "1/2"})],
    [event(1, **{BATCH: [True, 2]})],
])
def test_an_inconsistent_marker_before_the_end_is_corrupt(core_project, bad):
    # Followed by a whole event, so none of these is a tail a crash could leave.
    _, lines = sealed_lines(bad + [event(7)], TEST_LAYOUT)
    write_stream(core_project, STREAM, b"".join(lines))
    with pytest.raises(ChainError) as err:
        read_all(core_project, STREAM, TEST_LAYOUT)
    assert err.value.offset in (0, len(lines[0])) and BATCH in err.value.reason
    report = verify_stream(Stream(core_project.dir, STREAM, TEST_LAYOUT))
    assert not report["ok"] and report["bytes"] == 0  # the verified prefix ends before the batch


def test_a_batch_larger_than_a_read_chunk_is_read_whole_and_cut_whole(core_project):
    big = "x" * 2000
    bodies = [event(1), *batch(2, (3 * CHUNK) // 2000, pad=big), event(99)]
    _, lines = sealed_lines(bodies, TEST_LAYOUT)
    write_stream(core_project, STREAM, b"".join(lines))
    events, stream = read_all(core_project, STREAM, TEST_LAYOUT)
    assert len(events) == len(bodies) and stream.torn is None
    write_stream(core_project, STREAM, b"".join(lines[:-2]))  # the big batch without its last event
    events, stream = read_all(core_project, STREAM, TEST_LAYOUT)
    assert len(events) == 1 and stream.torn.offset == len(lines[0]) and stream.torn.reason == SHORT_BATCH


def test_recover_keeps_the_prefix_before_a_batch_broken_in_the_middle(core_project):
    _, lines = sealed_lines([event(1), *batch(2, 3), event(5)], TEST_LAYOUT)
    broken = lines[2].replace(b'"n":3', b'"n":4')  # the batch's second event no longer hashes right
    write_stream(core_project, STREAM, b"".join([lines[0], lines[1], broken, *lines[3:]]))
    with core_project.lock(STREAM).exclusive():
        result = recover_stream(core_project, Stream(core_project.dir, STREAM, TEST_LAYOUT))
    assert result["action"] == "recovered" and result["offset"] == len(lines[0])
    events, stream = read_all(core_project, STREAM, TEST_LAYOUT)
    assert [e["n"] for e in events] == [1] and stream.torn is None


@pytest.mark.parametrize("pad", ["", "z" * (100 << 10)], ids=["short lines", "lines longer than the first look back"])
def test_verify_with_workers_reports_a_short_batch_at_the_end(core_project, monkeypatch, pad):
    """The workers' spans end at a line, which may be inside a batch: the verdict
    must still name the short batch at the end, from its first line."""
    bodies = [event(1)]
    for first in range(2, 40 if not pad else 5, 3):
        bodies += batch(first, 3, pad=pad)
    _, lines = sealed_lines(bodies, TEST_LAYOUT)
    write_stream(core_project, STREAM, b"".join(lines[:-1]))
    monkeypatch.setattr(parallel_verify, "PARALLEL_MIN_BYTES", 0)
    monkeypatch.setattr(parallel_verify, "SPAN", 700)
    monkeypatch.setattr(parallel_verify, "workers", lambda: 2)
    report = verify_stream(Stream(core_project.dir, STREAM, TEST_LAYOUT))
    batch_start = sum(map(len, lines[:-3]))
    assert report["ok"] and report["bytes"] == batch_start and report["sequence"] == len(lines) - 3
    assert report["torn_tail"]["offset"] == batch_start and report["torn_tail"]["reason"] == SHORT_BATCH


def test_a_checkpoint_after_batches_opens_and_stays_on_batch_boundaries(new_ledger, core_project):
    ledger = new_ledger()
    pad = "y" * 4000
    n = 0
    while not checkpoint.path_for(ledger.stream).exists():
        with ledger.mutation() as tx:
            tx.append([event(n + i, pad=pad) for i in range(3)])
        n += 3
    saved = checkpoint.load(ledger.stream)
    assert saved.sequence % 3 == 0
    fresh = new_ledger()
    seen = []
    fresh.on_record = lambda record: seen.append(record.event["n"])
    fresh.refresh(collect=False)
    assert seen == list(range(n)) and fresh.head == ledger.head


def test_rebatch_marks_each_run_of_one_request_again():
    events = [
        {"n": 1, "request_id": "a", BATCH: [1, 3]}, {"n": 3, "request_id": "a", BATCH: [3, 3]},  # [2, 3] dropped
        {"n": 4, "request_id": "b", BATCH: [2, 2]},                                             # [1, 2] dropped
        {"n": 5}, {"n": 6},                                                                      # no request: alone
        {"n": 7, "request_id": "c"}, {"n": 8, "request_id": "c"},                                # split in two by a rewrite
    ]
    assert [e.get(BATCH) for e in rebatch(events)] == [[1, 2], [2, 2], None, None, None, [1, 2], [2, 2]]
    assert BATCH in events[0]  # the input is left alone


def test_a_store_from_before_markers_reads_each_event_as_a_batch_of_one(core_project):
    """An older loopstate wrote a command's events without markers: they read as
    before, and a cut at a line end is no torn tail (nothing tells it apart)."""
    _, lines = sealed_lines([event(1), event(2), event(3)], TEST_LAYOUT)
    write_stream(core_project, STREAM, b"".join(lines[:2]))
    events, stream = read_all(core_project, STREAM, TEST_LAYOUT)
    assert [e["n"] for e in events] == [1, 2] and stream.torn is None


def test_the_hash_covers_the_marker(core_project):
    _, lines = sealed_lines(batch(1, 3) + [event(4)], TEST_LAYOUT)
    edited = lines[2].replace(b'"batch":[3,3]', b'"batch":[2,3]')
    write_stream(core_project, STREAM, b"".join([lines[0], lines[1], edited, lines[3]]))
    with pytest.raises(ChainError) as err:
        read_all(core_project, STREAM, TEST_LAYOUT)
    assert err.value.offset == len(lines[0]) + len(lines[1]) and "does not match" in err.value.reason

