"""Reads of a store this process cannot write; writes to it refused clearly.

A backup restored read-only, or a store owned by another user, must still be
readable. The suite runs as root, which file modes do not stop, so the reads
run as an unprivileged user (``setpriv --reuid=nobody``) on a store root made:
its files are readable by all and writable by root alone. The reader takes the
shared lock through a read-only descriptor; when it cannot open the lock file
at all it reads without it and says so on stderr once (docs/storage.md, Locks).
"""

from __future__ import annotations

import os
import shutil
import stat
import subprocess
import sys
import tempfile
from pathlib import Path
from typing import Iterator

import pytest

from tests.conftest import prerequisite
from tests.cli.clirun import cli

SETPRIV = shutil.which("setpriv")
AS_NOBODY = [SETPRIV or "setpriv", "--reuid=nobody", "--regid=nogroup", "--clear-groups"]
NOTE = "reading without the store lock"


def _can_drop_to_nobody() -> bool:
    if SETPRIV is None or os.geteuid() != 0:
        return False
    probe = subprocess.run([*AS_NOBODY, sys.executable, "-c", "import loopstate.cli.main"], capture_output=True,
                           timeout=60, env={**os.environ, "PYTHONDONTWRITEBYTECODE": "1"})
    return probe.returncode == 0


pytestmark = prerequisite(_can_drop_to_nobody(), "running as root with setpriv(1), and an interpreter and checkout "
                          "the user nobody can read (to read a store as a user who cannot write it)")


class Store:
    """A store made by root in a world-readable folder, and the CLI run as root or as nobody."""

    def __init__(self, base: Path) -> None:
        self.base = base
        self.root = base / "project"
        self.data_dir = base / "data"
        self.root.mkdir()

    def env(self) -> dict[str, str]:
        keep = {k: v for k, v in os.environ.items() if k not in ("LOOPSTATE_DATA_DIR", "CODEX_HOME", "PLUGIN_DATA")}
        return {**keep, "LOOPSTATE_DATA_DIR": str(self.data_dir), "PYTHONDONTWRITEBYTECODE": "1"}

    def as_root(self, *argv: str) -> subprocess.CompletedProcess[str]:
        done = cli(*argv, cwd=self.root, data_dir=self.data_dir)
        assert done.returncode == 0, done.stderr
        return done

    def as_nobody(self, *argv: str) -> subprocess.CompletedProcess[str]:
        return subprocess.run([*AS_NOBODY, sys.executable, "-m", "loopstate.cli.main", *argv], cwd=self.root,
                              env=self.env(), capture_output=True, text=True, timeout=120)

    def files(self) -> dict[str, bytes | None]:
        """Every path below the data dir with its bytes (None for a folder)."""
        out: dict[str, bytes | None] = {}
        for top, dirs, names in os.walk(self.data_dir):
            for name in dirs:
                out[os.path.relpath(os.path.join(top, name), self.data_dir)] = None
            for name in names:
                out[os.path.relpath(os.path.join(top, name), self.data_dir)] = Path(top, name).read_bytes()
        return out

    def make_world_readable(self) -> None:
        for top, _dirs, names in os.walk(self.base):
            os.chmod(top, 0o755)
            for name in names:
                os.chmod(os.path.join(top, name), 0o644)

    def lock_folder(self) -> Path:
        (project,) = (self.data_dir / "projects").iterdir()
        return project / "locks"


@pytest.fixture
def store() -> Iterator[Store]:
    # Not below pytest's tmp_path: its parent is 0700 and nobody could not reach the store.
    base = Path(tempfile.mkdtemp(prefix="loopstate-readonly-"))
    try:
        made = Store(base)
        made.as_root("intent", "start", "--label", "readonly", "--claim", "outcome:keep the backup readable")
        made.as_root("goals", "add", "ship", "first todo")
        made.run_id = made.as_root("run", "create", "--objective", "o", "--done-gate", "g",
                                   "--asset", "a.txt").stdout.strip()
        made.make_world_readable()
        yield made
    finally:
        shutil.rmtree(base, ignore_errors=True)


def reads(store: Store) -> list[list[str]]:
    return [["intent", "show"], ["goals", "board", "ship"], ["run", "status", store.run_id], ["log"], ["verify"]]


@pytest.mark.slow
def test_every_read_of_a_store_it_cannot_write_answers_as_for_its_owner(store: Store) -> None:
    for argv in reads(store):
        own = store.as_root(*argv)  # the owner's read may renew a verified mark (docs/storage.md): before the copy
        before = store.files()
        other = store.as_nobody(*argv)
        assert other.returncode == 0, (argv, other.stderr)
        assert other.stdout == own.stdout, argv
        assert NOTE not in other.stderr  # its lock files are readable: the shared lock was taken
        assert store.files() == before


def test_a_reader_that_cannot_open_the_lock_files_reads_unlocked_and_says_so_once(store: Store) -> None:
    locks = store.lock_folder()
    os.chmod(locks, 0o700)  # nobody may not even look inside
    assert stat.S_IMODE(locks.stat().st_mode) == 0o700
    for argv in reads(store):
        own = store.as_root(*argv)
        other = store.as_nobody(*argv)
        assert other.returncode == 0, (argv, other.stderr)
        assert other.stdout == own.stdout, argv
        assert other.stderr.count(NOTE) == 1, (argv, other.stderr)  # `log` and `verify` read several streams
        assert "Traceback" not in other.stderr


@pytest.mark.parametrize("argv", [
    ["intent", "start", "--label", "another"],
    ["goals", "add", "ship", "second todo"],
    ["goals", "add", "new-goal", "a goal with no stream yet"],
    ["intent", "start", "--label", "another", "--json"],
])
def test_a_write_to_a_store_it_cannot_write_is_refused_naming_the_path(store: Store, argv: list[str]) -> None:
    before = store.files()
    done = store.as_nobody(*argv)
    assert done.returncode == 1, done.stderr
    said = done.stdout if "--json" in argv else done.stderr
    assert "STORE_IO_ERROR" in said and "cannot write " + str(store.data_dir / "projects") in said
    assert "read-only to this process" in said and "LOOPSTATE_DATA_DIR" in said
    assert "Traceback" not in done.stderr and "internal error" not in done.stderr
    assert store.files() == before
