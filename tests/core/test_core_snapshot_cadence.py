"""When and how a writer writes a snapshot (core/ledger.py ``_snapshot_due``): once the verified tail
since the last one passes both SNAPSHOT_MIN_TAIL and 1/SNAPSHOT_TAIL_SHARE of the last
snapshot's size, at the first append that crosses it, so a cold reader folds at most that
tail. Real ledgers of the goals domain on real files."""

from __future__ import annotations

import fcntl
import os
from pathlib import Path

import msgspec
import pytest

from loopstate.core import ledger as ledger_module
from loopstate.core import snapshot
from loopstate.core.snapshot import SnapshotFile
from loopstate.domains.goals import DOMAIN as GOALS
from loopstate.service import Service
from loopstate_protocol import goals as g


def snapshot_of(store: Path) -> tuple[SnapshotFile, int] | None:
    path = store / "snapshots" / "goals.g.msgpack"
    if not path.exists():
        return None
    data = path.read_bytes()
    return msgspec.msgpack.decode(data, type=SnapshotFile), len(data)


def grow(data_dir: Path, root: Path, appends: int, title: str = "x" * 280):
    """Append ``appends`` todos through one long-lived service; yield, after each, the stream's
    size and the snapshot file (envelope, size) then on disk."""
    service = Service(data_dir=data_dir, domains=[GOALS])
    for n in range(appends):
        service.execute(str(root), g.AddTodo(goal_id="g", title=f"{n} {title}"), f"req-{n}")
        store = service.project(str(root)).dir
        yield (store / "streams" / "goals.g.jsonl").stat().st_size, snapshot_of(store)


def test_the_first_snapshot_comes_with_the_append_that_crosses_the_minimum_tail(data_dir: Path, root: Path) -> None:
    before = 0
    for size, found in grow(data_dir, root, 400):
        if found is not None:
            envelope, _ = found
            assert envelope.binding.offset == size >= ledger_module.SNAPSHOT_MIN_TAIL > before
            # This writer hashed every byte (its first open read from byte 0): the checkpoint
            # of the same head is written beside it, with the prefix digest.
            assert envelope.binding.prefix_sha256 is not None
            return
        before = size
    pytest.fail("no snapshot after 400 appends")


def test_later_snapshots_wait_for_a_share_of_the_last_ones_size(data_dir: Path, root: Path, monkeypatch) -> None:
    """With a small minimum, the share of the state's size decides: each snapshot is written at
    the first append whose tail since the previous one reaches size/SHARE, never before."""
    monkeypatch.setattr(ledger_module, "SNAPSHOT_MIN_TAIL", 1024)
    share = ledger_module.SNAPSHOT_TAIL_SHARE
    previous: tuple[int, int] | None = None  # (offset, snapshot size) of the last snapshot seen
    before = 0
    written = 0
    for size, found in grow(data_dir, root, 300):
        assert found is not None or size < 1024
        if found is not None:
            envelope, length = found
            offset = envelope.binding.offset
            if previous is not None and offset != previous[0]:
                due = max(1024, -(-previous[1] // share))
                assert offset == size and offset - previous[0] >= due > before - previous[0]
                written += 1
            elif previous is not None:
                assert size - previous[0] < max(1024, -(-previous[1] // share))
            if previous is None or offset != previous[0]:
                previous = (offset, length)
        before = size
    assert written >= 3  # the state grows, so the gaps do too


def test_a_cold_reader_folds_at_most_the_tail_the_cadence_allows(data_dir: Path, root: Path) -> None:
    size, found = list(grow(data_dir, root, 260))[-1]
    envelope, length = found
    cold = Service(data_dir=data_dir, domains=[GOALS])
    folded = cold.refresh(cold.project(str(root)), GOALS, "goals.g")
    assert folded.ledger.started_from == envelope.binding.sequence
    tail = size - envelope.binding.offset
    assert tail < max(ledger_module.SNAPSHOT_MIN_TAIL, length // ledger_module.SNAPSHOT_TAIL_SHARE) + 1024
    assert os.path.getsize(cold.project(str(root)).dir / "streams" / "goals.g.jsonl") == size


def test_a_due_snapshot_is_written_once_the_append_released_the_lock(data_dir: Path, root: Path, monkeypatch) -> None:
    """Under the lock only the binding and the state's encoding are taken; the file is
    written after the release (another descriptor can take the stream's lock right then).
    `compact` writes under its lock, which the same probe sees held."""
    lock_free: list[bool] = []
    real_write = snapshot.Pending.write

    def write_probing_the_lock(self, stream):
        fd = os.open(stream.base / "locks" / f"{stream.name}.lock", os.O_RDWR)
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
            fcntl.flock(fd, fcntl.LOCK_UN)
            lock_free.append(True)
        except BlockingIOError:
            lock_free.append(False)
        finally:
            os.close(fd)
        return real_write(self, stream)

    monkeypatch.setattr(snapshot.Pending, "write", write_probing_the_lock)
    for _, found in grow(data_dir, root, 400):
        if found is not None:
            break
    assert lock_free and all(lock_free)
    service = Service(data_dir=data_dir, domains=[GOALS])
    service.compact(str(root))
    assert lock_free[-1] is False
    cold = Service(data_dir=data_dir, domains=[GOALS])
    assert cold.refresh(cold.project(str(root)), GOALS, "goals.g").ledger.started_from is not None
