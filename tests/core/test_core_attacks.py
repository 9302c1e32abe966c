"""Store paths replaced by links or special files, and bad project roots, are refused.

Every refusal is UNSAFE_PATH or INVALID_ROOT, and nothing is written: not the
stream, not the file a link points at, not a quarantine entry.
"""

from __future__ import annotations

import os

import pytest

from corekit import event, snapshot, write_stream
from loopstate.core import checkpoint, quarantine, verified_mark
from loopstate.core.errors import LoopstateError
from loopstate.core.ledger import Ledger
from loopstate.core.lock import StoreLock
from loopstate.core.paths import canonical_root
from loopstate.core.project import Project
from loopstate_protocol.errors import ErrorCode

from corekit import TEST_LAYOUT

KINDS = ["symlink", "hardlink", "fifo", "directory"]


@pytest.fixture
def victim(tmp_path):
    """A file outside the store that an attacker wants loopstate to write through."""
    path = tmp_path / "outside" / "victim.txt"
    path.parent.mkdir()
    path.write_bytes(b"precious\n")
    return path


def _replace(path, kind: str, victim) -> None:
    if os.path.lexists(path):
        os.unlink(path)
    path.parent.mkdir(mode=0o700, parents=True, exist_ok=True)
    if kind == "symlink":
        os.symlink(victim, path)
    elif kind == "hardlink":
        os.link(victim, path)
    elif kind == "fifo":
        os.mkfifo(path, 0o600)
    else:
        path.mkdir(mode=0o700)


def _seeded(project: Project) -> bytes:
    """A project with a two-event stream; returns the stream's bytes."""
    with Ledger(project, "core", TEST_LAYOUT).mutation() as tx:
        tx.append([event(1), event(2)])
    return (project.dir / "streams" / "core.jsonl").read_bytes()


def _refused(code: ErrorCode, action) -> LoopstateError:
    with pytest.raises(LoopstateError) as info:
        action()
    assert info.value.code is code, info.value
    return info.value


def _mutate(project: Project) -> None:
    with Ledger(project, "core", TEST_LAYOUT).mutation() as tx:
        tx.append([event(3)])


@pytest.mark.parametrize("kind", KINDS)
def test_a_stream_file_that_is_not_a_plain_file_is_refused_for_reads_and_writes(core_project, victim, kind):
    _seeded(core_project)
    path = core_project.dir / "streams" / "core.jsonl"
    _replace(path, kind, victim)
    before = snapshot(core_project.dir)
    _refused(ErrorCode.UNSAFE_PATH, lambda: Ledger(core_project, "core", TEST_LAYOUT).refresh())
    err = _refused(ErrorCode.UNSAFE_PATH, lambda: _mutate(core_project))
    assert "core.jsonl" in err.message and "point loopstate at a clean data dir" in err.message
    assert victim.read_bytes() == b"precious\n"
    assert snapshot(core_project.dir) == before


@pytest.mark.parametrize("kind", KINDS)
def test_a_lock_file_that_is_not_a_plain_file_is_refused(core_project, victim, kind):
    data = _seeded(core_project)
    _replace(core_project.dir / "locks" / "core.lock", kind, victim)
    _refused(ErrorCode.UNSAFE_PATH, lambda: _mutate(core_project))
    _refused(ErrorCode.UNSAFE_PATH, lambda: Ledger(core_project, "core", TEST_LAYOUT).refresh())
    assert victim.read_bytes() == b"precious\n"
    assert (core_project.dir / "streams" / "core.jsonl").read_bytes() == data


@pytest.mark.parametrize("kind", KINDS)
def test_a_quarantine_file_that_is_not_a_plain_file_stops_the_repair_before_any_cut(core_project, victim, kind):
    data = _seeded(core_project) + b'{"half a li'
    write_stream(core_project, "core", data)
    _replace(quarantine.path_for(core_project.dir, "core"), kind, victim)
    _refused(ErrorCode.UNSAFE_PATH, lambda: _mutate(core_project))
    assert victim.read_bytes() == b"precious\n"
    assert (core_project.dir / "streams" / "core.jsonl").read_bytes() == data  # the torn tail is not cut unaccounted


def test_a_quarantine_folder_that_is_a_symlink_is_refused(core_project, victim):
    data = _seeded(core_project) + b'{"half'
    write_stream(core_project, "core", data)
    os.symlink(victim.parent, core_project.dir / "quarantine")
    _refused(ErrorCode.UNSAFE_PATH, lambda: _mutate(core_project))
    assert os.listdir(victim.parent) == ["victim.txt"]
    assert (core_project.dir / "streams" / "core.jsonl").read_bytes() == data


@pytest.mark.parametrize("kind", KINDS)
def test_a_checkpoint_that_is_not_a_plain_file_is_refused(core_project, victim, kind):
    data = _seeded(core_project)
    _replace(checkpoint.path_for(Ledger(core_project, "core", TEST_LAYOUT).stream), kind, victim)
    _refused(ErrorCode.UNSAFE_PATH, lambda: Ledger(core_project, "core", TEST_LAYOUT).refresh())
    _refused(ErrorCode.UNSAFE_PATH, lambda: _mutate(core_project))
    assert victim.read_bytes() == b"precious\n"
    assert (core_project.dir / "streams" / "core.jsonl").read_bytes() == data


def test_writing_a_checkpoint_over_a_hard_link_is_refused(core_project, victim):
    _seeded(core_project)
    ledger = Ledger(core_project, "core", TEST_LAYOUT)
    ledger.refresh()
    target = checkpoint.path_for(ledger.stream)
    target.parent.mkdir(mode=0o700, exist_ok=True)  # the read above may have written the verified mark there
    os.link(victim, target)
    _refused(ErrorCode.UNSAFE_PATH, lambda: checkpoint.save(ledger.stream, 0))
    assert victim.read_bytes() == b"precious\n"


def test_a_verified_mark_at_a_hard_link_is_never_written_through(core_project, victim):
    """The mark is a cache written on reads and appends: a link planted at its name is
    refused without failing the read or the append, and the file outside keeps its bytes."""
    _seeded(core_project)
    target = verified_mark.path_for(Ledger(core_project, "core", TEST_LAYOUT).stream)
    target.unlink()  # the append above wrote one
    os.link(victim, target)
    ledger = Ledger(core_project, "core", TEST_LAYOUT)
    ledger.refresh()
    _mutate(core_project)
    assert victim.read_bytes() == b"precious\n"


@pytest.mark.parametrize("folder", ["streams", "locks"])
def test_a_store_folder_that_is_a_symlink_is_refused(core_project, victim, folder):
    core_project.ensure()
    os.symlink(victim.parent, core_project.dir / folder)
    _refused(ErrorCode.UNSAFE_PATH, lambda: _mutate(core_project))
    assert sorted(os.listdir(victim.parent)) == ["victim.txt"]


def test_a_stream_hard_linked_from_outside_is_never_appended_through(core_project, tmp_path):
    data = _seeded(core_project)
    outside = tmp_path / "copy.jsonl"
    os.link(core_project.dir / "streams" / "core.jsonl", outside)
    err = _refused(ErrorCode.UNSAFE_PATH, lambda: _mutate(core_project))
    assert "2 hard links" in err.message
    assert outside.read_bytes() == data


def test_a_lock_file_as_symlink_is_refused_by_storelock_itself(core_project, victim):
    core_project.ensure()
    _replace(core_project.dir / "locks" / "core.lock", "symlink", victim)
    _refused(ErrorCode.UNSAFE_PATH, lambda: StoreLock(core_project.dir / "locks" / "core.lock", core_project.dir).exclusive())
    assert victim.read_bytes() == b"precious\n"


@pytest.mark.parametrize("spelling", ["{root}/../{name}", "{root}/./../{name}/.."])
def test_a_root_with_dotdot_is_refused_and_nothing_is_created(data_dir, root, spelling):
    raw = spelling.format(root=root, name=root.name)
    err = _refused(ErrorCode.INVALID_ROOT, lambda: Project(raw, data_dir=data_dir))
    assert "'..'" in err.message
    assert not data_dir.exists()


@pytest.mark.parametrize("raw", [
    "//server/share/project", "\\\\server\\share\\project", "\\\\?\\C:\\work", "\\\\.\\PhysicalDrive0",
    "\\??\\C:\\work", "//?/C:/work",
])
def test_unc_and_device_roots_are_refused_before_touching_the_filesystem(data_dir, raw):
    err = _refused(ErrorCode.INVALID_ROOT, lambda: Project(raw, data_dir=data_dir))
    assert "UNC or device path" in err.message
    assert not data_dir.exists()


@pytest.mark.parametrize("raw", ["workspace", "./workspace", "", "relative/dir"])
def test_relative_or_empty_roots_are_refused(data_dir, root, raw, monkeypatch):
    monkeypatch.chdir(root.parent)  # "workspace" exists relative to here: still refused
    _refused(ErrorCode.INVALID_ROOT, lambda: canonical_root(raw))


def test_a_root_that_is_a_file_or_missing_is_refused(data_dir, root):
    (root / "file.txt").write_text("x")
    _refused(ErrorCode.INVALID_ROOT, lambda: Project(str(root / "file.txt"), data_dir=data_dir))
    _refused(ErrorCode.INVALID_ROOT, lambda: Project(str(root / "missing"), data_dir=data_dir))
    _refused(ErrorCode.INVALID_ROOT, lambda: Project(str(root) + "\0x", data_dir=data_dir))


def test_two_spellings_of_one_root_through_a_symlink_name_one_project(data_dir, root, tmp_path):
    alias = tmp_path / "alias"
    os.symlink(root, alias)
    assert Project(str(alias), data_dir=data_dir).project_id == Project(str(root), data_dir=data_dir).project_id


def test_the_data_dir_inside_the_workspace_is_refused_unless_explicit(root, monkeypatch):
    monkeypatch.delenv("LOOPSTATE_DATA_DIR", raising=False)
    monkeypatch.delenv("CODEX_HOME", raising=False)
    monkeypatch.setenv("PLUGIN_DATA", str(root / ".state"))
    _refused(ErrorCode.INVALID_ROOT, lambda: Project(str(root)))
    assert not (root / ".state").exists()


def test_stream_names_that_could_escape_the_store_are_refused(core_project):
    for name in ["../core", "core/../../x", "Core", "core.", "", "a" * 40]:
        _refused(ErrorCode.INVALID_PARAMS, lambda: Ledger(core_project, name, TEST_LAYOUT))


def _swap_stream(path, kind: str, victim):
    """Give the stream a second name (``hardlink``), or move it aside and put ``kind``
    at its path; returns where the stream's own bytes now are."""
    if kind == "hardlink":
        kept = victim.parent / "second-name.jsonl"
        os.link(path, kept)
    else:
        kept = victim.parent / "moved.jsonl"
        os.rename(path, kept)
        _replace(path, kind, victim)
    return kept


@pytest.mark.parametrize("kind", KINDS)
def test_a_long_lived_ledger_notices_a_stream_swapped_after_it_verified_it(core_project, victim, kind):
    """The one-lstat 'nothing changed' shortcut never lets a swapped file through."""
    ledger = Ledger(core_project, "core", TEST_LAYOUT)
    with ledger.mutation() as tx:
        tx.append([event(1)])
    path = core_project.dir / "streams" / "core.jsonl"
    data = path.read_bytes()
    kept = _swap_stream(path, kind, victim)
    with pytest.raises(LoopstateError) as info:
        with ledger.mutation() as tx:
            tx.append([event(2)])
    assert info.value.code is ErrorCode.UNSAFE_PATH
    assert victim.read_bytes() == b"precious\n"
    assert kept.read_bytes() == data


@pytest.mark.parametrize("kind", KINDS)
def test_a_stream_swapped_between_two_appends_of_one_mutation_is_not_appended_through(core_project, victim, kind):
    """Every write checks the file it writes to again, not only the first of a long-lived ledger."""
    ledger = Ledger(core_project, "core", TEST_LAYOUT)
    path = core_project.dir / "streams" / "core.jsonl"
    with pytest.raises(LoopstateError) as info:
        with ledger.mutation() as tx:
            tx.append([event(1)])  # durable; the ledger now holds a verified head
            data = path.read_bytes()
            kept = _swap_stream(path, kind, victim)
            tx.append([event(2)])
    assert info.value.code is ErrorCode.UNSAFE_PATH
    assert victim.read_bytes() == b"precious\n"
    assert kept.read_bytes() == data


def test_a_stream_replaced_by_a_copy_between_two_appends_is_not_appended_to(core_project):
    """Same bytes, same size, another inode: not the verified file, so nothing is appended to it."""
    ledger = Ledger(core_project, "core", TEST_LAYOUT)
    path = core_project.dir / "streams" / "core.jsonl"
    with pytest.raises(LoopstateError) as info:
        with ledger.mutation() as tx:
            tx.append([event(1)])
            data = path.read_bytes()
            copy = path.with_name("copy.tmp")
            copy.write_bytes(data)
            os.chmod(copy, 0o600)
            os.replace(copy, path)
            tx.append([event(2)])
    assert info.value.code is ErrorCode.CORRUPT_LEDGER
    assert "changed since it was verified" in info.value.message
    assert path.read_bytes() == data


@pytest.mark.parametrize("kind", KINDS)
def test_a_lock_file_swapped_between_two_mutations_of_one_ledger_is_refused(core_project, victim, kind):
    """The lock descriptor kept open between mutations is re-checked before each lock."""
    ledger = Ledger(core_project, "core", TEST_LAYOUT)
    with ledger.mutation() as tx:
        tx.append([event(1)])
    data = (core_project.dir / "streams" / "core.jsonl").read_bytes()
    lock = core_project.dir / "locks" / "core.lock"
    if kind == "hardlink":
        os.link(lock, victim.parent / "lock-second-name")
    else:
        _replace(lock, kind, victim)
    _refused(ErrorCode.UNSAFE_PATH, lambda: ledger.mutation().__enter__())
    assert victim.read_bytes() == b"precious\n"
    assert (core_project.dir / "streams" / "core.jsonl").read_bytes() == data


def test_a_lock_file_removed_between_mutations_is_made_again_and_still_excludes(core_project):
    """A kept lock descriptor whose file is gone would lock nothing: a new file is opened and locked."""
    ledger = Ledger(core_project, "core", TEST_LAYOUT)
    with ledger.mutation() as tx:
        tx.append([event(1)])
    lock = core_project.dir / "locks" / "core.lock"
    os.unlink(lock)
    with ledger.mutation() as tx:
        other = core_project.lock("core")
        with pytest.raises(LoopstateError) as info:
            other.exclusive()
        assert info.value.code is ErrorCode.LOCK_TIMEOUT
        tx.append([event(2)])
    assert ledger.head[0] == 2
