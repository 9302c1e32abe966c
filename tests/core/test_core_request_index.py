"""The request index: one word per request that says where to look, the stream file says what is there.

Through real Ledgers on real files: tag collisions (forced with a constant or a
tiny tag), multi-event requests, growth over many bucket splits, retries within
one group commit (staged bytes), spilled offsets, a replaced file. And the index
alone against a plain dict model of what it answers, over random streams.
"""

from __future__ import annotations

import os
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from corekit import TEST_LAYOUT, event, sealed_lines, write_stream
from loopstate.core import canonical
from loopstate.core.chain import REQUEST_FINGERPRINT, REQUEST_ID
from loopstate.core.errors import LoopstateError
from loopstate.core.idempotency import Applied, RequestIndex
from loopstate_protocol.errors import ErrorCode

# Index settings that make the word's tag useless or tiny, or push offsets out of the word.
COLLIDING = {
    "one tag for every id": dict(hash_fn=lambda _: 0),
    "2-bit tags, buckets of 2": dict(offset_bits=62, bucket_size=2),
    "offsets past 512 spill": dict(offset_bits=9),
}


def _apply(tx, request_id: str, fp: str, count: int = 1) -> tuple[list[dict], bool]:
    """What a service does inside a mutation: the earlier result of an exact retry, or append."""
    earlier = tx.earlier(request_id, fp)
    if earlier is not None:
        return [r.event for r in earlier], True
    bodies = [event(k, of=request_id) for k in range(count)]
    return [r.event for r in tx.append(bodies, request_id=request_id, fp=fp)], False


def _write(core_project, requests: list[tuple[str | None, str, int]]) -> dict[str, list[dict]]:
    """Write a stream directly: per entry, ``count`` events of that request (None: no request id).

    Returns each request id's events as the first application left them.
    """
    bodies = []
    for request_id, fp, count in requests:
        for k in range(count):
            extra = {} if request_id is None else {REQUEST_ID: request_id, REQUEST_FINGERPRINT: fp}
            bodies.append(event(k, **extra))
    events, lines = sealed_lines(bodies, TEST_LAYOUT)
    write_stream(core_project, "core", b"".join(lines))
    first: dict[str, list[dict]] = {}
    for e in events:
        if REQUEST_ID in e and e[REQUEST_ID] not in first:
            first[e[REQUEST_ID]] = [e]
        elif REQUEST_ID in e and first[e[REQUEST_ID]][-1]["sequence"] == e["sequence"] - 1 \
                and first[e[REQUEST_ID]][-1][REQUEST_FINGERPRINT] == e[REQUEST_FINGERPRINT]:
            first[e[REQUEST_ID]].append(e)
    return first


@pytest.mark.parametrize("settings_", COLLIDING.values(), ids=COLLIDING.keys())
def test_colliding_tags_still_answer_exact_changed_and_new_requests(new_ledger, settings_):
    ledger = new_ledger()
    ledger.requests = RequestIndex(**settings_)
    first = {}
    with ledger.mutation() as tx:
        for i in range(24):
            first[f"req-{i}"], replayed = _apply(tx, f"req-{i}", f"fp-{i}", count=1 + i % 3)
            assert not replayed
    fresh = new_ledger()  # as another process would find the file
    fresh.requests = RequestIndex(**settings_)
    for attempt in (ledger, fresh):
        with attempt.mutation() as tx:
            for i in range(24):
                assert _apply(tx, f"req-{i}", f"fp-{i}") == (first[f"req-{i}"], True)
                with pytest.raises(LoopstateError) as info:
                    tx.earlier(f"req-{i}", "changed")
                assert info.value.code is ErrorCode.REQUEST_ID_REUSED
                assert info.value.details["first_sequence"] == first[f"req-{i}"][0]["sequence"]
    with fresh.mutation() as tx:  # an id whose tag matches others' is still new
        assert tx.earlier("req-new", "fp-new") is None
        added, replayed = _apply(tx, "req-new", "fp-new", count=2)
        assert not replayed and _apply(tx, "req-new", "fp-new") == (added, True)


def test_a_request_is_all_its_events_and_a_later_reuse_does_not_redirect_it(core_project, new_ledger):
    first = _write(core_project, [
        ("a", "x", 3), (None, "", 1), ("b", "x", 2),
        ("a", "x", 1),  # "a" again, not next to its first run: a copy, not the request
        ("c", "x", 1), ("c", "y", 2),  # same id right after, another fingerprint: not part of "c"
    ])
    for settings_ in ({}, *COLLIDING.values()):
        ledger = new_ledger()
        ledger.requests = RequestIndex(**settings_)
        with ledger.mutation() as tx:
            assert [r.event for r in tx.earlier("a", "x")] == first["a"] and len(first["a"]) == 3
            assert [r.event for r in tx.earlier("b", "x")] == first["b"] and len(first["b"]) == 2
            assert [r.event for r in tx.earlier("c", "x")] == first["c"] and len(first["c"]) == 1
            with pytest.raises(LoopstateError) as info:
                tx.earlier("c", "y")
            assert info.value.details["first_sequence"] == first["c"][0]["sequence"]


def test_lookups_stay_right_across_many_bucket_splits(core_project, new_ledger):
    requests = [(f"r{i}", f"f{i % 7}", 1 + i % 2) for i in range(3000)]
    requests[10:10] = [(None, "", 3)]
    first = _write(core_project, requests)
    ledger = new_ledger()
    index = ledger.requests = RequestIndex(bucket_size=2)
    ledger.refresh(collect=False)
    assert index.in_memory() == 0  # a read folds without indexing: the next mutation's first lookup does
    with ledger.mutation() as tx:
        assert tx.earlier("new", "f0") is None
        assert 64 - index._shift >= 10  # the directory doubled at least ten times while indexing
        for request_id, fp, count in requests:
            if request_id is not None:
                records = tx.earlier(request_id, fp)
                assert [r.event for r in records] == first[request_id] and len(records) == count
        assert all(tx.earlier(f"new-{i}", "f0") is None for i in range(300))


def test_a_retry_in_the_same_group_commit_gets_the_staged_first_result(new_ledger):
    for settings_ in ({}, *COLLIDING.values()):
        ledger = new_ledger(f"group{len(settings_)}{'h' if 'hash_fn' in settings_ else ''}")
        ledger.requests = RequestIndex(**settings_)
        ledger.submit(lambda tx: _apply(tx, "durable", "x", 2))

        def group(tx) -> list[tuple[list[dict], bool]]:
            return [_apply(tx, "a", "x", 3), _apply(tx, "b", "x", 1), _apply(tx, "a", "x"),
                    _apply(tx, "durable", "x"), _apply(tx, "b", "x")]

        (a, b, a_again, durable_again, b_again) = ledger.submit(group)
        assert not a[1] and not b[1] and a_again == (a[0], True) and b_again == (b[0], True)
        assert durable_again[1] and [e["sequence"] for e in durable_again[0]] == [1, 2]
        assert ledger.head[0] == 6  # 2 + 3 + 1: no retry appended


def test_a_replaced_file_rebuilds_the_index(core_project, new_ledger):
    ledger = new_ledger()
    with ledger.mutation() as tx:
        for request_id in ("a", "b", "c"):
            _apply(tx, request_id, "x", 2)
    # A re-chaining command (recover, purge, migrate) puts a new file in place.
    _, lines = sealed_lines([event(0, **{REQUEST_ID: "d", REQUEST_FINGERPRINT: "y"}),
                             event(1, **{REQUEST_ID: "c", REQUEST_FINGERPRINT: "x"})], TEST_LAYOUT)
    path = ledger.stream.path
    replacement = path.with_name("replacement.tmp")
    replacement.write_bytes(b"".join(lines))
    os.chmod(replacement, 0o600)
    os.replace(replacement, path)
    with ledger.mutation() as tx:
        assert ledger.stream.resets == 1
        assert tx.earlier("a", "x") is None
        assert [(r.event["sequence"], r.start) for r in tx.earlier("c", "x")] == [(2, len(lines[0]))]
        with pytest.raises(LoopstateError) as info:
            tx.earlier("d", "x")
        assert info.value.details["first_sequence"] == 1


def test_the_index_costs_at_most_16_bytes_a_request_however_many_events_it_has():
    for count in (10_000, 200_000):
        index, at = RequestIndex(), 0
        for i in range(count):
            for _ in range(1 + i % 3):  # a request's later events add nothing
                index.note(f"req-{i}", at, at + 700)
                at += 700
        assert index.memory_bytes() <= 16 * count


def test_ids_that_share_one_tag_fill_one_bucket_instead_of_splitting_the_directory():
    index = RequestIndex(hash_fn=lambda request_id: 1 << 63 if request_id.startswith("other") else 0, bucket_size=4)
    for i in range(5000):
        index.note(f"req-{i}", i * 700, i * 700 + 700)
    assert index.memory_bytes() <= 16 * 5000 and index._shift == 64  # no directory slot was added
    # Another tag arriving in that bucket parts from them when the bucket next doubles (at 8192 words).
    for i in range(5000, 8192):
        index.note(f"other-{i}", i * 700, i * 700 + 700)
    assert index._shift == 63


def test_bytes_missing_below_the_last_noted_event_are_a_corrupt_ledger():
    index = RequestIndex()
    index.note("a", 0, 90)
    with pytest.raises(LoopstateError) as info:
        index.lookup("a", "x", lambda start, end: b"", "sequence")
    assert info.value.code is ErrorCode.CORRUPT_LEDGER


# -- the index alone against a dict model ----------------------------------------------


def _model(events: list[tuple[dict[str, Any], int, int]]) -> dict[str, tuple[str, int, int, int, int]]:
    """The answer a plain dict gives: first application wins, a run extends it."""
    applied: dict[str, tuple[str, int, int, int, int]] = {}
    for e, start, end in events:
        if REQUEST_ID not in e:
            continue
        known = applied.get(e[REQUEST_ID])
        if known is None:
            applied[e[REQUEST_ID]] = (e[REQUEST_FINGERPRINT], e["sequence"], e["sequence"], start, end)
        elif known[0] == e[REQUEST_FINGERPRINT] and known[2] == e["sequence"] - 1:
            applied[e[REQUEST_ID]] = (known[0], known[1], e["sequence"], known[3], end)
    return applied


def _answer(lookup, request_id: str, fp: str) -> Any:
    try:
        return lookup(request_id, fp)
    except LoopstateError as exc:
        assert exc.code is ErrorCode.REQUEST_ID_REUSED
        return ("reused", exc.details["first_sequence"])


IDS = ["a", "b", "c", "d", "e", "f", "g", "h"]


@given(
    writes=st.lists(st.tuples(st.sampled_from([None, *IDS[:6]]), st.sampled_from("xy"), st.integers(1, 3),
                              st.integers(0, 300)), max_size=40),
    settings_=st.sampled_from([{}, *COLLIDING.values(), dict(offset_bits=62, bucket_size=1),
                               dict(hash_fn=lambda s: hash(s) & 0xC000_0000_0000_0000, bucket_size=1)]),
)
@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])
def test_the_index_answers_what_a_dict_of_every_request_would(writes, settings_):
    index, data, events = RequestIndex(**settings_), b"", []
    for request_id, fp, count, padding in writes:
        for k in range(count):
            e = {"sequence": len(events) + 1, "pad": "p" * padding, "k": k}
            if request_id is not None:
                e |= {REQUEST_ID: request_id, REQUEST_FINGERPRINT: fp}
            line = canonical.encode(e) + b"\n"
            events.append((e, len(data), len(data) + len(line)))
            if request_id is not None:
                index.note(request_id, len(data), len(data) + len(line))
            data += line
    model = _model(events)

    def from_model(request_id: str, fp: str) -> Any:
        known = model.get(request_id)
        if known is None:
            return None
        return Applied(*known) if known[0] == fp else ("reused", known[1])

    def from_index(request_id: str, fp: str) -> Any:
        return index.lookup(request_id, fp, lambda start, end: data[start:end], "sequence")

    for request_id in IDS:
        for fp in "xy":
            assert _answer(from_index, request_id, fp) == _answer(from_model, request_id, fp)
