"""The verified mark (core/verified_mark.py): a cold reader whose fstat of the stream equals
the mark a verifying writer left starts from the snapshot without hashing the bytes before
it; anything else (an edit, even with its mtime put back; a torn, foreign or lying mark; the
older mark a writer that crashed before writing its own left) means the full prefix hash,
as before the mark existed. Real files, real CLI processes."""

from __future__ import annotations

import hashlib
import json
import os
from pathlib import Path

import msgspec
import pytest
from hypothesis import HealthCheck, example, given, settings
from hypothesis import strategies as st

from corekit import cli, cli_ok as ok
from loopstate.core import checkpoint, snapshot, verified_mark
from loopstate.core.canonical import decode as decode_line
from loopstate.core.errors import LoopstateError
from loopstate.core.snapshot import SnapshotFile
from loopstate.core.stream import Stream
from tests.core.test_core_snapshots import forged, goal_store, rewrite  # noqa: F401 (goal_store: a fixture)
from loopstate.domains.goals import DOMAIN as GOALS
from loopstate.service import Service
from loopstate_protocol import goals as g
from loopstate_protocol.errors import ErrorCode


def titles(root: Path, goal: str = "g") -> list[str]:
    board = json.loads(ok(root, "goals", "board", goal, "--json"))
    return [todo["title"] for group in board["active"] for todo in group["todos"]]


def fold_file(path: Path):
    state = GOALS.initial("goals.g")
    for line in path.read_bytes().splitlines():
        state = GOALS.evolve(state, decode_line(line))
    return state


def cold_start(data_dir: Path, root: Path):
    """A fresh process's ledger of goals.g after its first read: (ledger, state)."""
    service = Service(data_dir=data_dir, domains=[GOALS])
    folded = service.refresh(service.project(str(root)), GOALS, "goals.g")
    return folded.ledger, folded.state


def wrong_prefix_and_forged_state(path: Path) -> None:
    """Rewrite the snapshot with a todo renamed (checksum redone) and a prefix digest that
    matches no file: a reader shows FORGED exactly when it used the snapshot without hashing
    the prefix, i.e. when it trusted the mark."""
    rewrite(path, lambda envelope: msgspec.structs.replace(
        forged(envelope), binding=msgspec.structs.replace(envelope.binding, prefix_sha256="0" * 64)))


@pytest.fixture
def store(goal_store: Path) -> Path:
    """goals.g: four todos, a snapshot, one todo after it (that append wrote the mark); the project folder."""
    return goal_store.parent.parent


EXPECTED = ["task 0", "task 1", "task 2", "task 3", "after the snapshot"]


def test_a_cold_read_after_an_append_trusts_the_mark_and_hashes_nothing_before_the_snapshot(
    store: Path, data_dir: Path, root: Path,
) -> None:
    mark = verified_mark.decode("goals.g", (store / "checkpoints" / "goals.g.mark").read_bytes())
    stream = store / "streams" / "goals.g.jsonl"
    assert mark is not None and mark.matches(os.stat(stream)) and mark.offset == stream.stat().st_size
    ledger, state = cold_start(data_dir, root)
    # Started at the snapshot with no digest of the bytes before it: nobody hashed them.
    assert ledger.started_from == 4 and ledger.stream.prefix_digest() is None
    assert state == fold_file(stream)
    wrong_prefix_and_forged_state(store / "snapshots" / "goals.g.msgpack")
    assert "FORGED" in titles(root)  # the CLI took the same path: the prefix digest was never computed


def test_an_edit_before_the_head_with_its_mtime_put_back_is_still_caught(store: Path, root: Path) -> None:
    """Same size, same inode, mtime restored with os.utime: the kernel still moved ctime,
    so the mark no longer matches and the prefix digest finds the edit."""
    stream = store / "streams" / "goals.g.jsonl"
    before = os.stat(stream)
    data = stream.read_bytes()
    at = data.index(b'"title":"task 1"')
    with open(stream, "r+b") as out:
        out.seek(at)
        out.write(b'"title":"task 7"')
    os.utime(stream, ns=(before.st_atime_ns, before.st_mtime_ns))
    after = os.stat(stream)
    assert (after.st_size, after.st_mtime_ns, after.st_ino) == (before.st_size, before.st_mtime_ns, before.st_ino)
    assert after.st_ctime_ns != before.st_ctime_ns
    refused = cli(root, "goals", "board", "g", "--json")
    assert refused.returncode == 1, refused.stdout
    assert json.loads(refused.stdout)["error"]["code"] == "CORRUPT_LEDGER"
    assert cli(root, "goals", "add", "g", "more", "--json").returncode == 1  # and no writer vouches for it either


@pytest.mark.parametrize("how", ["torn", "flipped", "other stream", "lying", "empty", "longer"])
def test_a_torn_or_forged_mark_is_ignored(store: Path, data_dir: Path, root: Path, how: str) -> None:
    target = store / "checkpoints" / "goals.g.mark"
    data = target.read_bytes()
    assert len(data) == verified_mark.SIZE
    if how == "torn":
        target.write_bytes(data[: len(data) // 2])
    elif how == "flipped":  # a stat field changed, the checksum left as it was
        target.write_bytes(data[:30] + bytes([data[30] ^ 1]) + data[31:])
    elif how == "other stream":  # goals.h's own, valid mark, copied over: its checksum names goals.h
        ok(root, "goals", "add", "h", "elsewhere")
        other = verified_mark.decode("goals.h", (store / "checkpoints" / "goals.h.mark").read_bytes())
        assert other is not None
        mark = verified_mark.decode("goals.g", data)
        target.write_bytes(verified_mark.encode("goals.h", other._replace(
            size=mark.size, mtime_ns=mark.mtime_ns, ctime_ns=mark.ctime_ns, dev=mark.dev, ino=mark.ino)))
    elif how == "lying":  # a whole mark with its checksum, of a file that is not this one now
        mark = verified_mark.decode("goals.g", data)
        target.write_bytes(verified_mark.encode("goals.g", mark._replace(ctime_ns=mark.ctime_ns - 1)))
    elif how == "empty":
        target.write_bytes(b"")
    else:
        target.write_bytes(data + b"\0")
    wrong_prefix_and_forged_state(store / "snapshots" / "goals.g.msgpack")
    # The mark is not taken: the prefix digest is checked, and the snapshot's is wrong.
    assert titles(root) == EXPECTED


def test_the_mark_a_crashed_writer_left_behind_means_the_full_hash_then_is_renewed(
    store: Path, data_dir: Path, root: Path,
) -> None:
    """A writer killed after its fsync and before its mark leaves the older mark: the file
    grew since, so it matches nothing. Reproduced exactly: the mark's bytes from before an
    append put back after it."""
    target = store / "checkpoints" / "goals.g.mark"
    older = target.read_bytes()
    ok(root, "goals", "add", "g", "one more")
    target.write_bytes(older)
    stream = store / "streams" / "goals.g.jsonl"
    assert not verified_mark.decode("goals.g", older).matches(os.stat(stream))
    ledger, state = cold_start(data_dir, root)
    # The snapshot was checked by the prefix digest (the reader now keeps it), and is used.
    assert ledger.started_from == 4 and ledger.stream.prefix_digest() == hashlib.sha256(stream.read_bytes()).hexdigest()
    assert state == fold_file(stream)
    # That read verified every byte, so it left a mark of the file as it is.
    renewed = verified_mark.load(ledger.stream)
    assert renewed is not None and renewed.matches(os.stat(stream))
    again, _ = cold_start(data_dir, root)
    assert again.started_from == 4 and again.stream.prefix_digest() is None


def test_a_snapshot_without_a_prefix_digest_is_used_only_through_a_matching_mark(
    store: Path, data_dir: Path, root: Path,
) -> None:
    """A writer that started from the mark never hashed the prefix: its snapshot carries no
    digest. Without a matching mark nothing vouches for it, and the reader folds from byte 0."""
    older = (store / "checkpoints" / "goals.g.mark").read_bytes()
    writer = Service(data_dir=data_dir, domains=[GOALS])
    writer.execute(str(root), g.AddTodo(goal_id="g", title="by a marked writer"), "marked-1")
    ((head, written),) = writer.compact(str(root))
    assert written and head.sequence == 6
    stream = store / "streams" / "goals.g.jsonl"
    path = store / "snapshots" / "goals.g.msgpack"
    binding = msgspec.msgpack.decode(path.read_bytes(), type=SnapshotFile).binding
    assert binding.prefix_sha256 is None and binding.sequence == 6
    assert checkpoint.load(writer.folded(writer.project(str(root)), GOALS, "goals.g").ledger.stream).sequence == 4
    ledger, state = cold_start(data_dir, root)
    assert ledger.started_from == 6 and state == fold_file(stream)
    (store / "checkpoints" / "goals.g.mark").write_bytes(older)  # as a crash before the mark leaves it
    ledger, state = cold_start(data_dir, root)
    assert ledger.started_from is None and state == fold_file(stream)
    # That full read renewed the mark in place: the next reader uses the snapshot again.
    ledger, state = cold_start(data_dir, root)
    assert ledger.started_from == 6 and state == fold_file(stream)


def test_a_rechaining_command_drops_the_mark_with_the_checkpoint(store: Path, data_dir: Path, root: Path) -> None:
    ledger, _ = cold_start(data_dir, root)
    assert verified_mark.path_for(ledger.stream).exists()
    checkpoint.drop(ledger.stream)
    assert not verified_mark.path_for(ledger.stream).exists() and not checkpoint.path_for(ledger.stream).exists()
    assert snapshot.path_for(ledger.stream).exists()  # ignored by the next reader unless it still matches


def test_an_edit_hidden_behind_growth_from_a_long_lived_writer_is_never_marked(
    store: Path, data_dir: Path, root: Path,
) -> None:
    """A long-lived writer checks growth at its head line only (docs/storage.md, *Bytes that
    change under a long-lived process*): an edit further back plus a well-chained append by
    a process that takes no lock is its blind spot. It must not pass that on: the growth
    carries no mark of its writer, so the writer's own append renews none, and every cold
    reader hashes the prefix and refuses."""
    server = Service(data_dir=data_dir, domains=[GOALS])
    server.execute(str(root), g.AddTodo(goal_id="g", title="by the server"), "server-1")
    stream = store / "streams" / "goals.g.jsonl"
    data = stream.read_bytes()
    at = data.index(b'"title":"task 1"')
    with open(stream, "r+b") as out:
        out.seek(at)
        out.write(b'"title":"task 7"')
    held = server.folded(server.project(str(root)), GOALS, "goals.g").ledger.stream
    rogue = Stream(store, "goals.g", GOALS.layout)
    rogue.position, rogue.identity = held.position, held.identity
    last = decode_line(data.splitlines()[-1])
    layout = GOALS.layout
    fields = {key: value for key, value in last.items()
              if key not in (layout.sequence_field, layout.prev_field, layout.hash_field, "request_id", "request_fingerprint")}
    rogue.append([{**fields, "event_id": "00000000-0000-5000-8000-000000000099",
                   "payload": {"title": "rogue", "todo_id": "T099"}, "refs": {"todo_id": "T099"}}])
    server.execute(str(root), g.AddTodo(goal_id="g", title="after the rogue"), "server-2")
    mark = verified_mark.load(held)
    assert mark is not None and not mark.matches(os.stat(stream))
    refused = cli(root, "goals", "board", "g", "--json")
    assert refused.returncode == 1 and json.loads(refused.stdout)["error"]["code"] == "CORRUPT_LEDGER"


def test_a_read_renews_a_stale_mark_but_creates_none(store: Path, data_dir: Path, root: Path) -> None:
    target = store / "checkpoints" / "goals.g.mark"
    target.unlink()
    ledger, _ = cold_start(data_dir, root)
    assert ledger.started_from == 4 and ledger.stream.prefix_digest() is not None  # the full prefix hash
    assert not target.exists()
    ok(root, "goals", "board", "g")
    assert not target.exists()
    ok(root, "goals", "add", "g", "a write")  # a writer creates it
    assert verified_mark.load(ledger.stream).matches(os.stat(store / "streams" / "goals.g.jsonl"))


@settings(max_examples=20, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(where=st.floats(0, 1, exclude_max=True), flip=st.integers(1, 255))
@example(where=0.53125, flip=1)  # a key of an event before the snapshot's head misspelt (found by a fresh clone's run)
def test_any_byte_changed_before_the_snapshot_is_never_covered_by_the_mark(
    tmp_path_factory: pytest.TempPathFactory, where: float, flip: int,
) -> None:
    """For any byte before the snapshot's head and any change of it, same size, mtime put
    back: the cold read is CORRUPT_LEDGER, never the snapshot's state."""
    base = tmp_path_factory.mktemp("flip")
    (base / "workspace").mkdir()
    writer = Service(data_dir=base / "data", domains=[GOALS])
    root = str(base / "workspace")
    for number in range(4):
        writer.execute(root, g.AddTodo(goal_id="g", title=f"task {number}"), f"req-{number}")
    writer.compact(root)
    writer.execute(root, g.AddTodo(goal_id="g", title="after"), "req-after")
    ledger = writer.folded(writer.project(root), GOALS, "goals.g").ledger
    mark = verified_mark.load(ledger.stream)
    stream = ledger.stream.path
    assert mark is not None and mark.matches(os.stat(stream))
    head = msgspec.msgpack.decode(snapshot.path_for(ledger.stream).read_bytes(), type=SnapshotFile).binding.offset
    at = int(where * head)
    before = os.stat(stream)
    with open(stream, "r+b") as out:
        out.seek(at)
        byte = out.read(1)[0]
        out.seek(at)
        out.write(bytes([byte ^ flip]))
    os.utime(stream, ns=(before.st_atime_ns, before.st_mtime_ns))
    cold = Service(data_dir=base / "data", domains=[GOALS])
    with pytest.raises(LoopstateError) as refused:
        cold.refresh(cold.project(root), GOALS, "goals.g")
    assert refused.value.code is ErrorCode.CORRUPT_LEDGER
