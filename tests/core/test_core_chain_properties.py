"""Property tests of the hash chain over real stream files.

Rules checked:
- any sequence of appends (through Ledger, with real fsyncs) replays to the same
  events and hashes, whether read from scratch or incrementally;
- any single-byte change anywhere is detected at the start of the line that
  holds it, with that line's sequence;
- a truncation inside a line leaves a torn tail at that line's start and keeps
  the prefix; a truncation that removes whole lines is invisible to a reader
  with no history, and is caught by an in-memory verified head and by a checkpoint;
- any reordering of lines is detected at the first line out of place.
"""

from __future__ import annotations

import os
import tempfile
from pathlib import Path

import pytest
from hypothesis import HealthCheck, assume, given, settings
from hypothesis import strategies as st

from corekit import event, line_starts, read_all, sealed_lines, write_stream
from loopstate.core import checkpoint
from loopstate.core.chain import ChainError
from loopstate.core.errors import LoopstateError
from loopstate.core.ledger import Ledger
from loopstate.core.project import Project
from loopstate.core.stream import Stream
from loopstate_protocol.errors import ErrorCode

from corekit import TEST_LAYOUT

json_scalars = st.none() | st.booleans() | st.integers(-(2**53), 2**53) | st.floats(allow_nan=False, allow_infinity=False) | st.text(max_size=40)
json_values = st.recursive(
    json_scalars,
    lambda inner: st.lists(inner, max_size=4) | st.dictionaries(st.text(max_size=8), inner, max_size=4),
    max_leaves=12,
)
bodies = st.dictionaries(st.text(min_size=1, max_size=10).filter(lambda k: k not in {"sequence", "prev_hash", "event_hash", "schema_version"}), json_values, max_size=5)



def examples(n: int) -> settings:
    """Real files and fsyncs make examples slow: no per-example deadline."""
    return settings(max_examples=n, deadline=None, suppress_health_check=[HealthCheck.too_slow])


class Store:
    """A throwaway project in its own temporary folder (hypothesis runs many examples per test)."""

    def __init__(self) -> None:
        self._tmp = tempfile.TemporaryDirectory()
        base = Path(self._tmp.name)
        (base / "ws").mkdir()
        self.project = Project(str(base / "ws"), data_dir=base / "data", lock_timeout=5)

    def __enter__(self) -> "Store":
        return self

    def __exit__(self, *exc) -> None:
        self._tmp.cleanup()


def chain_of(n: int) -> tuple[list[dict], list[bytes]]:
    return sealed_lines([event(i, note="é" * (i % 3), nested={"k": [i, None, True]}) for i in range(n)], TEST_LAYOUT)


@examples(40)
@given(batches=st.lists(st.lists(bodies, min_size=1, max_size=4), min_size=1, max_size=6))
def test_any_sequence_of_appends_replays_to_the_same_events_and_hashes(batches):
    with Store() as store:
        writer = Ledger(store.project, "core", TEST_LAYOUT)
        watcher = Ledger(store.project, "core", TEST_LAYOUT)
        appended, seen_by_watcher = [], []
        for i, batch in enumerate(batches):
            with writer.mutation() as tx:
                records = tx.append([{**b, "schema_version": 1} for b in batch], request_id=f"r{i}", fp=f"f{i}")
            appended += [r.event for r in records]
            seen_by_watcher += [r.event for r in watcher.refresh()]
        replayed, stream = read_all(store.project, "core", TEST_LAYOUT)
        assert replayed == appended
        assert seen_by_watcher == appended
        assert [e["sequence"] for e in replayed] == list(range(1, len(appended) + 1))
        assert stream.position.hash == appended[-1]["event_hash"] == writer.head[1] == watcher.head[1]
        for before, after in zip(replayed, replayed[1:]):
            assert after["prev_hash"] == before["event_hash"]
        assert replayed[0]["prev_hash"] is None


def _expect_detected_at(project: Project, offset: int, sequence: int) -> None:
    try:
        read_all(project, "core", TEST_LAYOUT)
    except ChainError as exc:
        assert exc.code is ErrorCode.CORRUPT_LEDGER
        assert (exc.offset, exc.sequence) == (offset, sequence)
        assert exc.details["offset"] == offset
    except LoopstateError as exc:
        # A flipped digit in schema_version reads as a newer schema: still refused, same place.
        assert exc.code is ErrorCode.FUTURE_SCHEMA
        assert exc.details["offset"] == offset
    else:
        pytest.fail(f"the change at line starting at byte {offset} went unnoticed")


@pytest.mark.slow
@examples(300)
@given(n=st.integers(1, 6), where=st.floats(0, 1, exclude_max=True), new=st.integers(0, 255))
def test_any_single_byte_change_is_detected_at_the_start_of_its_line(n, where, new):
    events, lines = chain_of(n)
    data = bytearray(b"".join(lines))
    pos = int(where * len(data))
    assume(data[pos] != new)
    data[pos] = new
    starts = line_starts(lines)
    index = max(i for i, s in enumerate(starts) if s <= pos)
    with Store() as store:
        write_stream(store.project, "core", bytes(data))
        if pos == len(data) - 1 and new != ord("\n"):
            # The last newline gone: from the bytes alone this is a crash's torn
            # tail (never acknowledged), so a reader with no history keeps the prefix...
            replayed, stream = read_all(store.project, "core", TEST_LAYOUT)
            assert replayed == events[:-1]
            assert stream.torn is not None and stream.torn.offset == starts[-1]
        else:
            _expect_detected_at(store.project, starts[index], index + 1)


@pytest.mark.slow
@examples(150)
@given(n=st.integers(1, 6), where=st.floats(0, 1, exclude_max=True))
def test_a_truncation_inside_a_line_leaves_a_torn_tail_at_its_start(n, where):
    events, lines = chain_of(n)
    data = b"".join(lines)
    starts = line_starts(lines)
    cut = int(where * len(data))
    assume(cut not in starts)
    index = max(i for i, s in enumerate(starts) if s <= cut)
    with Store() as store:
        write_stream(store.project, "core", data[:cut])
        replayed, stream = read_all(store.project, "core", TEST_LAYOUT)
        assert replayed == events[:index]
        assert stream.torn is not None
        assert (stream.torn.offset, stream.torn.length) == (starts[index], cut - starts[index])


@examples(60)
@given(n=st.integers(2, 6), data=st.data())
def test_removing_whole_trailing_lines_is_caught_by_a_verified_head(n, data):
    events, lines = chain_of(n)
    keep = data.draw(st.integers(0, n - 1))
    whole = b"".join(lines)
    cut = sum(len(line) for line in lines[:keep])
    with Store() as store:
        path = write_stream(store.project, "core", whole)
        # A long-lived reader that verified the whole stream, and a checkpoint of it.
        reader = Stream(store.project.dir, "core", TEST_LAYOUT)
        assert len(list(reader.read_new())) == n
        checkpoint.save(reader, line_starts(lines)[-1])
        os.truncate(path, cut)
        # From the bytes alone the shorter chain is valid: no history, no way to know.
        assert read_all(store.project, "core", TEST_LAYOUT)[0] == events[:keep]
        with pytest.raises(ChainError) as in_memory:
            list(reader.read_new())
        assert in_memory.value.offset == cut and in_memory.value.sequence == n
        with pytest.raises(ChainError) as from_checkpoint:
            Ledger(store.project, "core", TEST_LAYOUT).refresh()
        assert from_checkpoint.value.code is ErrorCode.CORRUPT_LEDGER
        assert from_checkpoint.value.offset == cut


@examples(100)
@given(n=st.integers(2, 7), data=st.data())
def test_any_reordering_of_lines_is_detected_at_the_first_line_out_of_place(n, data):
    events, lines = chain_of(n)
    order = data.draw(st.permutations(range(n)))
    assume(list(order) != list(range(n)))
    first = next(i for i, j in enumerate(order) if i != j)
    with Store() as store:
        write_stream(store.project, "core", b"".join(lines[j] for j in order))
        _expect_detected_at(store.project, line_starts(lines)[first], first + 1)
