"""The request index on disk (core/request_file.py): a ledger that started from a snapshot
loads the stored words of every request before one head and indexes only the rest; exact
retries and reused ids of requests from before the snapshot still answer exactly (seed 000);
a file that is not whole, or not bound to the verified chain, is never used. Real files,
real ledgers, the real CLI for the retries."""

from __future__ import annotations

import json
import os
import random
import tempfile
from array import array
from pathlib import Path

import msgspec
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from corekit import TEST_LAYOUT, cli
from loopstate.core import ledger as ledger_module
from loopstate.core import request_file
from loopstate.core.checkpoint import Checkpoint
from loopstate.core.errors import LoopstateError
from loopstate.core.idempotency import RequestIndex
from loopstate.core.stream import Stream
from loopstate.domains.goals import DOMAIN as GOALS
from loopstate.service import Service
from loopstate_protocol import goals as g
from loopstate_protocol.errors import ErrorCode

REQUESTS = ledger_module.REQUESTS_MIN_HELD + 200


def ledger_of(service: Service, root: Path):
    return service.folded(service.project(str(root)), GOALS, "goals.g").ledger


@pytest.fixture
def store(data_dir: Path, root: Path) -> Path:
    """goals.g with more requests than the index keeps in memory before storing them, a
    snapshot, and a few requests after it; returns the project folder."""
    writer = Service(data_dir=data_dir, domains=[GOALS])
    for n in range(REQUESTS):
        writer.execute(str(root), g.AddTodo(goal_id="g", title=f"task {n}"), f"req-{n}")
    writer.compact(str(root))
    for n in range(REQUESTS, REQUESTS + 3):
        writer.execute(str(root), g.AddTodo(goal_id="g", title=f"task {n}"), f"req-{n}")
    folder = writer.project(str(root)).dir
    assert request_file.path_for(ledger_of(writer, root).stream).exists()
    # The long-lived writer holds only what came after its stored file.
    assert ledger_of(writer, root).requests.in_memory() < ledger_module.REQUESTS_MIN_HELD
    return folder


def test_retries_from_before_the_snapshot_answer_from_the_stored_index(store: Path, data_dir: Path, root: Path) -> None:
    cold = Service(data_dir=data_dir, domains=[GOALS])
    first = cold.execute(str(root), g.AddTodo(goal_id="g", title="task 0"), "req-0")
    ledger = ledger_of(cold, root)
    assert ledger.started_from is not None and first.replayed
    # Loaded, not re-read: memory holds only the requests after the stored head (those
    # between it and the snapshot, read from the stream, and those after the snapshot).
    stored = ledger.requests.base
    assert stored is not None and stored.count >= ledger_module.REQUESTS_MIN_HELD
    assert stored.count + ledger.requests.in_memory() == REQUESTS + 3
    with pytest.raises(LoopstateError) as reused:
        cold.execute(str(root), g.AddTodo(goal_id="g", title="not task 0"), "req-0")
    assert reused.value.code is ErrorCode.REQUEST_ID_REUSED
    late = cold.execute(str(root), g.AddTodo(goal_id="g", title=f"task {REQUESTS + 1}"), f"req-{REQUESTS + 1}")
    assert late.replayed  # after the stored head, from memory


@pytest.mark.slow
@pytest.mark.parametrize("number", [0, REQUESTS // 2, REQUESTS - 1])
def test_the_real_cli_retries_exactly_and_refuses_a_changed_request(store: Path, root: Path, number: int) -> None:
    again = cli(root, "goals", "add", "g", f"task {number}", "--request-id", f"req-{number}", "--json")
    assert again.returncode == 0, again.stderr
    assert len(json.loads(again.stdout)["events"]) == 1
    head = json.loads(again.stdout)["head"]["sequence"]
    assert head == REQUESTS + 3  # nothing appended
    changed = cli(root, "goals", "add", "g", "something else", "--request-id", f"req-{number}", "--json")
    assert changed.returncode == 1 and json.loads(changed.stdout)["error"]["code"] == "REQUEST_ID_REUSED"


def corrupt(path: Path, how: str) -> None:
    data = path.read_bytes()
    if how == "a word flipped":
        path.write_bytes(data[:-5] + bytes([data[-5] ^ 0x40]) + data[-4:])
    elif how == "a word cut off":
        path.write_bytes(data[:-8])
    elif how == "torn":
        path.write_bytes(data[: len(data) // 2])
    elif how == "empty":
        path.write_bytes(b"")
    elif how == "garbage":
        path.write_bytes(b"LSRQ" + os.urandom(200))
    elif how == "another stream's":
        path.write_bytes(data.replace(b"goals.g", b"goals.h", 1))


@pytest.mark.slow
@pytest.mark.parametrize("how", ["a word flipped", "a word cut off", "torn", "empty", "garbage", "another stream's"])
def test_a_corrupt_index_file_is_never_trusted(store: Path, data_dir: Path, root: Path, how: str) -> None:
    writer = Service(data_dir=data_dir, domains=[GOALS])
    path = request_file.path_for(ledger_of(writer, root).stream)
    corrupt(path, how)
    cold = Service(data_dir=data_dir, domains=[GOALS])
    retry = cold.execute(str(root), g.AddTodo(goal_id="g", title=f"task {REQUESTS - 1}"), f"req-{REQUESTS - 1}")
    assert retry.replayed
    ledger = ledger_of(cold, root)
    # Every request was read from the stream again, none taken from the file.
    assert ledger.requests.in_memory() + (ledger.requests.base.count if ledger.requests.base else 0) >= REQUESTS
    assert ledger.requests.base is None  # not the corrupt one; nor a new one yet (nothing appended: a retry)


@pytest.mark.slow
def test_an_index_bound_to_a_head_the_chain_does_not_have_is_never_used(store: Path, data_dir: Path, root: Path) -> None:
    """Whole (its checksum still right) but bound to another head hash: not this chain's."""
    writer = Service(data_dir=data_dir, domains=[GOALS])
    path = request_file.path_for(ledger_of(writer, root).stream)
    data = path.read_bytes()
    magic, version, size = request_file._PREAMBLE.unpack(data[:12])
    header = msgspec.msgpack.decode(data[12:12 + size], type=request_file.Header)
    forged = msgspec.msgpack.encode(msgspec.structs.replace(header, binding=msgspec.structs.replace(header.binding, hash="0" * 64)))
    path.write_bytes(request_file._PREAMBLE.pack(magic, version, len(forged)) + forged + data[12 + size:])
    cold = Service(data_dir=data_dir, domains=[GOALS])
    assert cold.execute(str(root), g.AddTodo(goal_id="g", title="task 3"), "req-3").replayed
    ledger = ledger_of(cold, root)
    assert ledger.requests.base is None or ledger.requests.base.binding.hash != "0" * 64


@pytest.mark.slow
def test_an_index_of_a_replaced_stream_is_never_used(store: Path, data_dir: Path, root: Path) -> None:
    stream = store / "streams" / "goals.g.jsonl"
    copy = stream.with_suffix(".copy")
    copy.write_bytes(stream.read_bytes())
    os.replace(copy, stream)  # the same bytes in a new inode: the file's binding names the old one
    cold = Service(data_dir=data_dir, domains=[GOALS])
    assert cold.execute(str(root), g.AddTodo(goal_id="g", title="task 7"), "req-7").replayed
    ledger = ledger_of(cold, root)
    assert ledger.requests.base is None or ledger.requests.base.binding.ino == stream.stat().st_ino


@settings(max_examples=40, deadline=None)
@given(st.lists(st.text(min_size=1, max_size=12), min_size=1, max_size=300, unique=True), st.integers(0, 300))
def test_stored_words_plus_memory_find_exactly_what_memory_alone_does(ids: list[str], cut: int) -> None:
    """For any ids and any cut, the candidates of the stored words (before the cut) then of
    memory (after it) are the candidates of one index of everything, in the same order."""
    cut = min(cut, len(ids))
    offsets = [n * 100 for n in range(len(ids))]
    whole = RequestIndex()
    before, after = RequestIndex(), RequestIndex()
    for n, request_id in enumerate(ids):
        whole.note(request_id, offsets[n], offsets[n] + 100)
        (before if n < cut else after).note(request_id, offsets[n], offsets[n] + 100)
    with tempfile.TemporaryDirectory() as folder:
        stream = Stream(Path(folder), "core", TEST_LAYOUT)
        binding = Checkpoint(dev=0, ino=0, line_start=0, offset=cut * 100, sequence=cut, hash="h", first_hash="f")
        request_file.save(stream, binding, array("Q", before.words()), before.offset_bits)
        fd = os.open(request_file.path_for(stream), os.O_RDONLY)
        data = os.pread(fd, 1 << 20, 0)
        magic, version, size = request_file._PREAMBLE.unpack(data[:12])
        header = msgspec.msgpack.decode(data[12:12 + size], type=request_file.Header)
        after.attach(request_file.RequestFile(fd, header, 12 + size))
        for request_id in random.Random(len(ids)).sample(ids, min(len(ids), 50)):
            assert after._candidates(request_id) == whole._candidates(request_id)
