"""Every module of loopstate and loopstate_protocol imports on Windows and macOS, as far as faking can tell.

A child process sets ``sys.platform`` before importing each module fresh
(``platform_import_child.py``): ``win32`` with ``fcntl`` unimportable, and
``darwin``. What this shows: no module imports ``fcntl`` or branches on the
platform in a way that breaks at import there, the store lock picks its
Windows primitive (portalocker) on Windows and flock elsewhere, and the
watcher refuses watchdog's polling fallback where no native observer loads
(here neither FSEvents nor ReadDirectoryChangesW can; on those systems they
do). What it cannot show: calls that only fail when run there (``os.pread``,
``O_NOFOLLOW``, folder fsyncs), which need a real Windows or macOS.
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

CHILD = Path(__file__).resolve().parent / "platform_import_child.py"


@pytest.fixture(scope="module")
def listing() -> str:
    done = subprocess.run([sys.executable, str(CHILD), "list"], capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr
    return done.stdout


def imported(listing: str, *args: str) -> dict:
    done = subprocess.run([sys.executable, str(CHILD), "import", *args], input=listing, capture_output=True,
                          text=True, timeout=300)
    assert done.returncode == 0, done.stderr
    return json.loads(done.stdout)


def test_the_listing_covers_every_package(listing: str) -> None:
    modules = json.loads(listing)["modules"]
    for name in ("loopstate.core.lock", "loopstate.core.lock_posix", "loopstate.core.lock_windows",
                 "loopstate.service.watch", "loopstate.rpc.stdio", "loopstate.mcpserver.resources",
                 "loopstate.cli.main", "loopstate_protocol.client"):
        assert name in modules
    assert len(modules) > 100


def test_windows_without_fcntl(listing: str) -> None:
    said = imported(listing, "win32", "nofcntl", "watch")
    # Only the POSIX primitive needs fcntl, and only POSIX imports it.
    assert list(said["failed"]) == ["loopstate.core.lock_posix"], said["failed"]
    assert "import of fcntl halted" in said["failed"]["loopstate.core.lock_posix"]
    assert said["lock"] == "loopstate.core.lock_windows"
    assert said["watch"]["available"] is False  # this Linux has no ReadDirectoryChangesW: no polling instead
    assert said["watch"]["log"] == ["no native file watcher on this platform: other processes' changes show at "
                                    "the next request"]


def test_macos(listing: str) -> None:
    said = imported(listing, "darwin", "watch")
    assert said["failed"] == {}
    assert said["lock"] == "loopstate.core.lock_posix"
    assert said["watch"]["available"] is False  # no FSEvents (nor kqueue) on this Linux: refused, not polled


def test_the_real_platform_is_the_control(listing: str) -> None:
    said = imported(listing, sys.platform, "watch")
    assert said["failed"] == {}
    assert said["lock"] == "loopstate.core.lock_posix"
    assert said["watch"] == {"available": True, "log": []}
