"""The store lock through both OS primitives behind ``core/lock.py``, in real processes.

``core/lock_posix.py`` (flock from ``fcntl``) is what POSIX runs;
``core/lock_windows.py`` is what Windows runs, on portalocker. portalocker
runs on Linux too (there it calls flock), so the Windows module's own code,
its flag mapping, its BlockingIOError for a busy lock, its polled waits
(no SIGALRM on Windows) and its pread/pwrite, is run here through the same
StoreLock and Ledger, between real processes. What only Windows can show
(LockFileEx's mandatory ranges) is not tested here.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from corekit import child_env
from loopstate.core import lock_posix, lock_windows

CHILD = Path(__file__).resolve().parent / "lock_platform_child.py"
IMPLS = ["posix", "windows"]


def start(data_dir: Path, *args: str) -> subprocess.Popen:
    return subprocess.Popen([sys.executable, str(CHILD), *args], env=child_env(data_dir), stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True, bufsize=1)


def run(data_dir: Path, *args: str) -> list[str]:
    done = subprocess.run([sys.executable, str(CHILD), *args], env=child_env(data_dir), capture_output=True,
                          text=True, timeout=120)
    assert done.returncode == 0, done.stderr
    return done.stdout.splitlines()


def header(line: str, impl: str) -> None:
    said = json.loads(line)
    assert said["primitive"] == f"loopstate.core.lock_{impl}"
    assert said["portalocker"] is (impl == "windows")  # POSIX never imports it


@pytest.fixture
def holders(data_dir):
    children: list[subprocess.Popen] = []

    def hold(impl: str, root: Path, mode: str) -> subprocess.Popen:
        child = start(data_dir, impl, "hold", str(root), mode)
        children.append(child)
        header(child.stdout.readline(), impl)
        assert child.stdout.readline().strip() == "held", child.stderr.read()
        return child

    yield hold
    for child in children:
        if child.poll() is None:
            child.kill()
        child.communicate()


@pytest.mark.parametrize("impl", IMPLS)
def test_mutations_through_the_primitive_found_a_store_and_append(impl, data_dir, root):
    lines = run(data_dir, impl, "append", str(root), "5")
    header(lines[0], impl)
    (project,) = (data_dir / "projects").iterdir()
    stream = (project / "streams" / "core.jsonl").read_bytes().splitlines()
    assert [json.loads(line)["i"] for line in stream] == list(range(5))
    record = json.loads((project / "locks" / "core.lock").read_bytes())  # written through the module's pwrite
    assert isinstance(record["pid"], int) and len(record["token"]) == 32


@pytest.mark.parametrize("writer_impl", IMPLS)
@pytest.mark.parametrize("holder_impl", IMPLS)
def test_an_exclusive_holder_excludes_the_other_process_until_the_timeout(holder_impl, writer_impl, data_dir, root,
                                                                          holders):
    child = holders(holder_impl, root, "exclusive")
    started = time.monotonic()
    lines = run(data_dir, writer_impl, "try", str(root), "exclusive", "0.5")
    waited = time.monotonic() - started
    header(lines[0], writer_impl)
    said = json.loads(lines[1])
    assert said["code"] == "LOCK_TIMEOUT", said
    assert said["holder"]["pid"] == child.pid and f"pid {child.pid}" in said["message"]
    assert waited >= 0.5


@pytest.mark.parametrize("impl", IMPLS)
def test_readers_share_and_keep_a_writer_out(impl, data_dir, root, holders):
    run(data_dir, impl, "append", str(root), "1")  # readers lock only a lock file a mutation made
    reader = holders(impl, root, "shared")
    assert run(data_dir, impl, "try", str(root), "shared", "0.5")[1] == "got"
    said = json.loads(run(data_dir, impl, "try", str(root), "exclusive", "0.5")[1])
    assert said["code"] == "LOCK_TIMEOUT" and said["holder"] == {"pid": reader.pid, "mode": "shared",
                                                                 "describe": f"pid {reader.pid} (shared)"}


@pytest.mark.parametrize("impl", IMPLS)
def test_a_killed_holder_releases_its_lock(impl, data_dir, root, holders):
    child = holders(impl, root, "exclusive")
    waiter = start(data_dir, impl, "try", str(root), "exclusive", "30")
    header(waiter.stdout.readline(), impl)
    time.sleep(0.3)  # the waiter is waiting (polling, for the Windows module)
    assert waiter.poll() is None
    child.send_signal(signal.SIGKILL)
    out, err = waiter.communicate(timeout=60)
    assert out.strip() == "got", err


def test_the_windows_module_keeps_flocks_contract(tmp_path):
    """In one process, through two open file descriptions of one file (flock's unit of ownership)."""
    path = tmp_path / "x.lock"
    path.write_bytes(b"")
    first, second = os.open(path, os.O_RDWR), os.open(path, os.O_RDWR)
    try:
        assert (lock_windows.LOCK_SH, lock_windows.LOCK_EX, lock_windows.LOCK_NB, lock_windows.LOCK_UN) == (
            lock_posix.LOCK_SH, lock_posix.LOCK_EX, lock_posix.LOCK_NB, lock_posix.LOCK_UN)
        lock_windows.flock(first, lock_windows.LOCK_EX | lock_windows.LOCK_NB)
        with pytest.raises(BlockingIOError):
            lock_windows.flock(second, lock_windows.LOCK_SH | lock_windows.LOCK_NB)
        lock_windows.flock(first, lock_windows.LOCK_UN)
        lock_windows.flock(second, lock_windows.LOCK_SH | lock_windows.LOCK_NB)
        lock_windows.flock(first, lock_windows.LOCK_SH | lock_windows.LOCK_NB)  # readers share
        with pytest.raises(ValueError, match="exactly one of LOCK_EX and LOCK_SH"):
            lock_windows.flock(first, lock_windows.LOCK_NB)
        assert lock_windows.pwrite(first, b"record", 2) == 6
        assert lock_windows.pread(second, 10, 0) == b"\0\0record"
    finally:
        os.close(first)
        os.close(second)
    closed = os.open(path, os.O_RDWR)
    os.close(closed)
    with pytest.raises(OSError) as info:  # not contention: the caller reports it instead of waiting
        lock_windows.flock(closed, lock_windows.LOCK_EX | lock_windows.LOCK_NB)
    assert not isinstance(info.value, BlockingIOError)


def test_a_posix_cli_read_imports_neither_portalocker_nor_the_watcher_library(data_dir, root):
    """What a hook's or a person's read pays for the other platforms: nothing (``-X importtime``)."""
    run(data_dir, "posix", "append", str(root), "1")
    done = subprocess.run([sys.executable, "-X", "importtime", "-m", "loopstate.cli.main", "intent", "show", "--root",
                           str(root)], env=child_env(data_dir), capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr
    imported = {line.rsplit("|", 1)[-1].strip() for line in done.stderr.splitlines() if line.startswith("import time:")}
    assert "loopstate.core.lock_posix" in imported  # the control: the lock was loaded, through its POSIX module
    assert not {name for name in imported if name.split(".")[0] in ("portalocker", "watchdog")}
    assert "loopstate.core.lock_windows" not in imported
