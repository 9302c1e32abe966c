"""Durability pieces a power cut would expose, checked directly: checkpoints bound to
more than an inode number, folders made with every ancestor, lock files created durably.

The states a power cut leaves after whole commands are in test_core_power_loss.py.
"""

from __future__ import annotations

import os
import stat

import msgspec

from corekit import STREAM, TEST_LAYOUT, event, sealed_lines, write_stream
from loopstate.core import checkpoint, safefs


def _checkpointed(new_ledger, monkeypatch):
    monkeypatch.setattr(checkpoint, "CHECKPOINT_EVERY", 500)
    ledger = new_ledger()
    for n in range(10):
        with ledger.mutation() as tx:
            tx.append([event(n)])
    saved = checkpoint.load(ledger.stream)
    assert saved is not None and saved.first_hash is not None
    return ledger, saved


def test_a_stale_checkpoint_on_a_reused_inode_number_is_ignored_not_corrupt(core_project, new_ledger, monkeypatch):
    """A re-chaining command replaced the stream and the file system gave the new file
    the old one's inode number: the checkpoint names the right (device, inode) but
    another first record, so it is a lost cache and the new file is verified whole."""
    ledger, saved = _checkpointed(new_ledger, monkeypatch)
    _, lines = sealed_lines([event(100 + n) for n in range(3)], TEST_LAYOUT)
    path = write_stream(core_project, STREAM, b"".join(lines))  # O_TRUNC: the same inode, other content
    info = os.stat(path)
    assert (info.st_dev, info.st_ino) == (saved.dev, saved.ino)
    fresh = new_ledger()
    seen = []
    fresh.on_record = lambda record: seen.append(record.event["n"])
    fresh.refresh(collect=False)
    assert seen == [100, 101, 102]


def test_a_checkpoint_of_the_same_file_still_catches_a_truncation(core_project, new_ledger, monkeypatch):
    ledger, saved = _checkpointed(new_ledger, monkeypatch)
    os.truncate(ledger.stream.path, saved.line_start)  # whole lines gone, the first record kept
    fresh = new_ledger()
    try:
        fresh.refresh()
    except Exception as exc:
        assert "acknowledged events are gone" in str(exc)
    else:
        raise AssertionError("a truncation below the checkpoint went unnoticed")


def test_a_checkpoint_from_before_the_binding_is_a_lost_cache(core_project, new_ledger, monkeypatch):
    ledger, saved = _checkpointed(new_ledger, monkeypatch)
    old = {k: v for k, v in msgspec.to_builtins(saved).items() if k != "first_hash"}
    checkpoint.path_for(ledger.stream).write_bytes(msgspec.json.encode(old))
    assert checkpoint.validate(ledger.stream, checkpoint.load(ledger.stream)) == 0
    fresh = new_ledger()
    fresh.refresh(collect=False)
    assert fresh.head == ledger.head


def test_drop_removes_the_checkpoint_and_tolerates_none(core_project, new_ledger, monkeypatch):
    ledger, _ = _checkpointed(new_ledger, monkeypatch)
    checkpoint.drop(ledger.stream)
    assert not checkpoint.path_for(ledger.stream).exists()
    checkpoint.drop(ledger.stream)


def test_make_dirs_durably_makes_every_missing_ancestor_owner_only(tmp_path):
    target = tmp_path / "home" / ".local" / "state" / "loopstate" / "v1"
    (tmp_path / "home").mkdir()
    safefs.make_dirs_durably(target)
    for folder in (tmp_path / "home" / ".local", target):
        assert stat.S_IMODE(os.lstat(folder).st_mode) == 0o700
    safefs.make_dirs_durably(target)  # all there: nothing to do
    assert target.is_dir()


def test_open_rw_creates_a_lock_file_once_and_reports_a_missing_folder(core_project):
    core_project.ensure()
    path = core_project.dir / "locks" / "x.lock"
    assert safefs.open_rw(path, core_project.dir, create=True) is None  # no locks folder yet
    assert not path.exists()
    safefs.ensure_dir(path.parent, core_project.dir)
    for _ in range(2):
        fd = safefs.open_rw(path, core_project.dir, create=True)
        assert fd is not None
        os.close(fd)
    assert stat.S_IMODE(os.lstat(path).st_mode) == 0o600
    assert safefs.open_rw(core_project.dir / "locks" / "y.lock", core_project.dir, create=False) is None
