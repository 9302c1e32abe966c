"""Store locks across real processes: shared vs exclusive, bounded waits, dead holders."""

from __future__ import annotations

import os
import signal

import pytest

from corekit import event, spawn
from loopstate.core import canonical
from loopstate.core.errors import LoopstateError
from loopstate.core.ledger import Ledger
from loopstate.core.lock import RECORD_WIDTH
from loopstate.core.project import Project
from loopstate_protocol.errors import ErrorCode

from corekit import TEST_LAYOUT


@pytest.fixture
def holder(core_project, data_dir):
    """Start a child that takes the stream's lock in the given mode and keeps it."""
    children = []

    def start(mode: str):
        core_project.ensure()
        child = spawn(data_dir, "hold", core_project.root, "core", mode)
        children.append(child)
        assert child.stdout.readline().strip() == "held", child.stderr.read()
        return child

    yield start
    for child in children:
        if child.poll() is None:
            child.kill()
        child.communicate()


def _quick(project: Project) -> Project:
    return Project(project.root, data_dir=project.data_dir, lock_timeout=0.3)


def test_a_writer_waiting_on_an_exclusive_holder_times_out_naming_its_pid(core_project, holder):
    child = holder("exclusive")
    with pytest.raises(LoopstateError) as info:
        with _quick(core_project).lock("core").exclusive():
            pass
    err = info.value
    assert err.code is ErrorCode.LOCK_TIMEOUT
    assert err.details["holder"]["pid"] == child.pid
    assert f"pid {child.pid}" in err.message and "core.lock" in err.message
    record = canonical.decode((core_project.dir / "locks" / "core.lock").read_bytes())
    assert record["pid"] == child.pid and len(record["token"]) == 32 and record["acquired_at"].endswith("Z")


def test_a_reader_waits_for_a_writer(core_project, holder):
    holder("exclusive")
    with pytest.raises(LoopstateError) as info:
        Ledger(_quick(core_project), "core", TEST_LAYOUT).refresh()
    assert info.value.code is ErrorCode.LOCK_TIMEOUT


def test_a_writer_waits_for_a_reader_and_readers_share(core_project, holder, new_ledger):
    with new_ledger().mutation() as tx:  # readers lock only a lock file that a mutation made
        tx.append([event(0)])
    data = (core_project.dir / "streams" / "core.jsonl").read_bytes()
    reader = holder("shared")
    with _quick(core_project).lock("core").shared():  # a second reader gets in
        pass
    with pytest.raises(LoopstateError) as info:
        with Ledger(_quick(core_project), "core", TEST_LAYOUT).mutation() as tx:
            tx.append([event(1)])
    assert info.value.code is ErrorCode.LOCK_TIMEOUT
    # The kernel's lock table names the reader, though the record still names the last writer (us).
    assert info.value.details["holder"]["mode"] == "shared"
    assert info.value.details["holder"]["pid"] == reader.pid
    assert f"pid {reader.pid} (shared)" in info.value.message
    assert (core_project.dir / "streams" / "core.jsonl").read_bytes() == data


def test_the_os_releases_a_sigkilled_holders_lock(core_project, holder):
    child = holder("exclusive")
    os.kill(child.pid, signal.SIGKILL)
    child.wait()
    # No stale-lock guesswork: the next writer simply gets the lock.
    with Ledger(Project(core_project.root, data_dir=core_project.data_dir, lock_timeout=5), "core", TEST_LAYOUT).mutation() as tx:
        (record,) = tx.append([event(1)])
    assert record.event["sequence"] == 1


def test_the_owner_record_names_the_last_exclusive_holder_and_is_written_once_a_second(core_project, new_ledger):
    ledger = new_ledger()
    lock_path = core_project.dir / "locks" / "core.lock"
    with ledger.mutation() as tx:
        assert not lock_path.exists()  # a first mutation makes its lock file at its first write
        tx.append([event(1)])
        first = lock_path.read_bytes()
        assert len(first) == RECORD_WIDTH and canonical.decode(first)["pid"] == os.getpid()
    assert lock_path.read_bytes() == first  # kept after release: it names the last exclusive holder
    written = lock_path.stat().st_mtime_ns
    with ledger.mutation() as tx:
        tx.append([event(2)])
    record = canonical.decode(lock_path.read_bytes())
    assert record["token"] == canonical.decode(first)["token"]  # one token per holder
    if record["acquired_at"] == canonical.decode(first)["acquired_at"]:
        assert lock_path.stat().st_mtime_ns == written  # the same record: read, not written again
    assert oct(lock_path.stat().st_mode & 0o777) == "0o600"
    assert oct((core_project.dir / "locks").stat().st_mode & 0o777) == "0o700"


def test_a_record_of_another_holder_is_overwritten_on_the_next_acquisition(core_project, new_ledger):
    ledger = new_ledger()
    with ledger.mutation() as tx:
        tx.append([event(1)])
    lock_path = core_project.dir / "locks" / "core.lock"
    other = canonical.encode({"pid": 1, "token": "0" * 32, "acquired_at": "2026-01-01T00:00:00Z"}).ljust(RECORD_WIDTH)
    lock_path.write_bytes(other)
    with ledger.mutation() as tx:
        assert canonical.decode(lock_path.read_bytes())["pid"] == os.getpid()
        tx.append([event(2)])


def test_without_a_kernel_lock_table_the_waiter_names_the_last_recorded_holder(core_project, holder, monkeypatch):
    """Where /proc/locks is missing (not Linux), the record is all there is, and the message says so."""
    from loopstate.core import flock_wait

    child = holder("exclusive")
    monkeypatch.setattr(flock_wait, "_kernel_holders", lambda info: None)
    with pytest.raises(LoopstateError) as info:
        with _quick(core_project).lock("core").exclusive():
            pass
    assert info.value.details["holder"]["pid"] == child.pid
    assert "the last process to record itself" in info.value.message


def test_taking_a_lock_imports_neither_portalocker_nor_importlib_metadata(core_project, data_dir):
    """portalocker's import resolves its version through importlib.metadata (~43 ms of a fresh
    process's wall); a hook pays startup on every prompt, and every read locks."""
    import subprocess
    import sys

    code = (
        "import sys\n"
        "from loopstate.core.ledger import Ledger\n"
        "from loopstate.core.project import Project\n"
        f"project = Project({core_project.root!r})\n"
        "project.ensure()\n"
        "with project.lock('core').exclusive():\n"
        "    pass\n"
        "with project.lock('core').shared():\n"
        "    pass\n"
        "assert not {'portalocker', 'importlib.metadata'} & set(sys.modules), 'imported'\n"
    )
    done = subprocess.run([sys.executable, "-c", code], env={**os.environ, "LOOPSTATE_DATA_DIR": str(data_dir)},
                          capture_output=True, text=True)
    assert done.returncode == 0, done.stderr


def test_a_ledger_mutated_again_from_inside_its_own_mutation_times_out_instead_of_sharing_the_lock(data_dir, root):
    """The kept lock descriptor must not let a second mutation in through the same flock."""
    project = Project(str(root), data_dir=data_dir, lock_timeout=0.2)
    ledger = Ledger(project, "core", TEST_LAYOUT)
    with ledger.mutation() as tx:
        tx.append([event(1)])
        with pytest.raises(LoopstateError) as info:
            with ledger.mutation():
                pass
        assert info.value.code is ErrorCode.LOCK_TIMEOUT
    with ledger.mutation() as tx:
        tx.append([event(2)])
    assert ledger.head[0] == 2


def test_a_forked_child_does_not_share_the_parents_kept_lock_descriptor(data_dir, root):
    """A kept descriptor inherited across fork is the parent's open file description: a
    flock through it would not exclude the parent, so the child opens its own."""
    project = Project(str(root), data_dir=data_dir, lock_timeout=0.3)
    ledger = Ledger(project, "core", TEST_LAYOUT)
    with ledger.mutation() as tx:
        tx.append([event(1)])  # the lock descriptor is now kept open, unlocked
    locked_r, locked_w = os.pipe()
    done_r, done_w = os.pipe()
    pid = os.fork()
    if pid == 0:  # the child: hold the exclusive lock through the inherited ledger until told
        try:
            with ledger.mutation():
                os.write(locked_w, b"x")
                os.read(done_r, 1)
        finally:
            os._exit(0)
    try:
        assert os.read(locked_r, 1) == b"x"
        with pytest.raises(LoopstateError) as info:
            with ledger.mutation():
                pass
        assert info.value.code is ErrorCode.LOCK_TIMEOUT
    finally:
        os.write(done_w, b"x")
        os.waitpid(pid, 0)
    with ledger.mutation() as tx:
        tx.append([event(2)])
    assert ledger.head[0] == 2


def test_a_lock_the_kernel_refuses_fails_at_once_with_store_io_error_not_after_a_wait(core_project):
    """flock failing for a reason other than contention is no reason to wait out the timeout."""
    import time

    core_project.ensure()
    lock = Project(core_project.root, data_dir=core_project.data_dir, lock_timeout=5).lock("core")
    path = core_project.dir / "locks" / "core.lock"
    path.parent.mkdir(mode=0o700, exist_ok=True)
    path.touch(mode=0o600)
    fd = os.open(path, os.O_PATH)  # flock(2) on an O_PATH descriptor: EBADF from the kernel
    started = time.monotonic()
    with pytest.raises(LoopstateError) as info:
        lock._acquire(fd, exclusive=True)
    assert time.monotonic() - started < 2
    assert info.value.code is ErrorCode.STORE_IO_ERROR
    assert "core.lock" in info.value.message and "flock" in info.value.message
    with pytest.raises(OSError):
        os.fstat(fd)  # the descriptor the call owned is closed


def test_a_failed_owner_record_write_lets_go_of_the_lock(core_project, data_dir):
    """A full disk while the record is written must not leave the lock taken (every
    later mutation of that ledger would fail as if it were held)."""
    import subprocess
    import sys

    ledger = Ledger(core_project, "core", TEST_LAYOUT)
    with ledger.mutation() as tx:
        tx.append([event(1)])  # the lock file now holds this process's record
    code = (
        "import errno, resource, signal\n"
        "from loopstate.core.project import Project\n"
        f"project = Project({core_project.root!r})\n"
        "with project.lock('core').exclusive():\n"  # this process's record left
        "    pass\n"
        "lock = project.lock('core')\n"  # another holder: its record differs, so it must be written
        "signal.signal(signal.SIGXFSZ, signal.SIG_IGN)\n"
        "resource.setrlimit(resource.RLIMIT_FSIZE, (0, resource.RLIM_INFINITY))\n"
        "try:\n"
        "    lock.exclusive()\n"
        "except OSError as exc:\n"
        "    assert exc.errno == errno.EFBIG, exc\n"
        "else:\n"
        "    raise AssertionError('the record write did not fail')\n"
        "resource.setrlimit(resource.RLIMIT_FSIZE, (resource.RLIM_INFINITY, resource.RLIM_INFINITY))\n"
        "with lock.exclusive():\n"  # taken again: the failed attempt let go of it
        "    print('retaken', flush=True)\n"
    )
    done = subprocess.run([sys.executable, "-c", code], env={**os.environ, "LOOPSTATE_DATA_DIR": str(data_dir)},
                          capture_output=True, text=True, timeout=60)
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == "retaken"
    with ledger.mutation() as tx:  # and this process takes it back
        tx.append([event(2)])
    assert ledger.head[0] == 2
