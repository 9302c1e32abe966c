"""Conditions of the machine are refusals a person can act on (exit 1), never "internal error" (exit 70).

A full disk, a LOOPSTATE_DATA_DIR that names a file, and an argument that is
not UTF-8 each get one line saying what is wrong and what to do; what the
store holds afterwards verifies, and the refused command left nothing.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from clirun import cli
from tests.conftest import prerequisite


def test_a_data_dir_that_names_a_file(tmp_path: Path) -> None:
    root, data_file = tmp_path / "proj", tmp_path / "data"
    root.mkdir()
    data_file.write_text("not a folder")
    for argv in (("goals", "add", "g", "t"), ("intent", "show"), ("run", "list")):
        done = subprocess.run([sys.executable, "-m", "loopstate.cli.main", *argv], cwd=root, capture_output=True,
                              text=True, env={**os.environ, "LOOPSTATE_DATA_DIR": str(data_file)}, timeout=60)
        assert done.returncode == 1, (argv, done)
        assert "internal error" not in done.stderr and "Traceback" not in done.stderr, done.stderr
        assert f"the data dir {data_file} is a file, not a folder: set LOOPSTATE_DATA_DIR to a folder" in done.stderr
    assert data_file.read_text() == "not a folder"


def test_an_argument_that_is_not_utf8(tmp_path: Path) -> None:
    root, data_dir = tmp_path / "proj", tmp_path / "data"
    root.mkdir()
    env = {**os.environ, "LOOPSTATE_DATA_DIR": str(data_dir)}
    for argv in ([b"intent", b"start", b"--claim", b"outcome:\xff\xfe bad"], [b"goals", b"add", b"g", b"\xff"],
                 [b"run", b"create", b"--objective", b"\xff", b"--done-gate", b"t", b"--asset", b"app"]):
        done = subprocess.run([sys.executable.encode(), b"-m", b"loopstate.cli.main", *argv], cwd=root, env=env,
                              capture_output=True, timeout=60)
        stderr = done.stderr.decode("utf-8", "replace")
        assert done.returncode == 1, (argv, stderr)
        assert "INVALID_PARAMS" in stderr and "not valid Unicode" in stderr and "send UTF-8 text" in stderr, stderr
    assert not data_dir.exists() or not list(data_dir.rglob("*.jsonl"))


def _can_mount() -> bool:
    return os.geteuid() == 0 and shutil.which("mount") is not None and sys.platform.startswith("linux")


@pytest.mark.slow
@prerequisite(_can_mount(), "a small tmpfs for a full disk needs root and mount(8) on Linux")
def test_a_full_disk(tmp_path: Path) -> None:
    disk = tmp_path / "disk"
    disk.mkdir()
    mounted = subprocess.run(["mount", "-t", "tmpfs", "-o", "size=512k", "tmpfs", str(disk)], capture_output=True)
    if mounted.returncode != 0:
        pytest.skip(f"prerequisite missing: mounting a tmpfs was refused here ({mounted.stderr.decode().strip()})")
    try:
        root, data_dir = tmp_path / "proj", disk / "data"
        root.mkdir()
        assert cli("goals", "add", "g", "first", cwd=root, data_dir=data_dir).returncode == 0
        filler = disk / "filler"
        fd = os.open(filler, os.O_WRONLY | os.O_CREAT, 0o600)
        try:  # every block the tmpfs has left
            while os.write(fd, b"\0" * 4096):
                pass
        except OSError:
            pass
        finally:
            os.close(fd)
        # A file's last page may still have room: add until a write needs a block the disk does not have.
        for attempt in range(64):
            title = f"attempt-{attempt} " + "x" * 250
            done = cli("goals", "add", "g", title, cwd=root, data_dir=data_dir)
            if done.returncode != 0:
                break
        assert done.returncode == 1, done
        assert "internal error" not in done.stderr and "Traceback" not in done.stderr, done.stderr
        assert "No space left on device" in done.stderr and "free some space and run it again" in done.stderr
        filler.unlink()
        assert cli("verify", cwd=root, data_dir=data_dir).returncode == 0
        board = cli("goals", "board", "g", "--json", "--all", cwd=root, data_dir=data_dir).stdout
        assert "first" in board and title not in board  # the refused command left nothing
        assert cli("goals", "add", "g", "second", cwd=root, data_dir=data_dir).returncode == 0
        assert cli("verify", cwd=root, data_dir=data_dir).returncode == 0
    finally:
        subprocess.run(["umount", "-l", str(disk)], capture_output=True)
