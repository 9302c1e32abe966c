"""The store watcher (``service/watch.py``, on watchdog) sees what other processes do to a watched folder.

A real Watcher on this test's event loop, and every change made by a
separate Python process: an append to an open stream, a file created, one
replaced by rename, one deleted, one moved in from elsewhere; a folder that
appears only after the watch began, several levels down; a folder deleted
and made again. Reads are not changes (the server's own refresh reads the
stream: hearing it would wake the server for nothing). Reference counts and
close are checked on the watches themselves.
"""

from __future__ import annotations

import asyncio
import subprocess
import sys
from pathlib import Path

import pytest

from loopstate.service.watch import Watcher

pytestmark = pytest.mark.skipif(not sys.platform.startswith("linux"), reason="the other process's changes are "
                                "checked where this suite runs (Linux); macOS and Windows use the same code")


class Seen:
    """on_change calls, in order, with a way to wait for one."""

    def __init__(self) -> None:
        self.calls: list[tuple[Path, str | None]] = []
        self.changed = asyncio.Event()

    def __call__(self, folder: Path, name: str | None) -> None:
        self.calls.append((folder, name))
        self.changed.set()

    async def wait_for(self, call: tuple[Path, str | None], timeout: float = 10.0) -> None:
        async def until() -> None:
            while call not in self.calls:
                self.changed.clear()
                await self.changed.wait()

        await asyncio.wait_for(until(), timeout)

    async def quiet(self, seconds: float = 0.5) -> list[tuple[Path, str | None]]:
        """What arrives in ``seconds`` from now."""
        start = len(self.calls)
        await asyncio.sleep(seconds)
        return self.calls[start:]


async def other_process(code: str, **paths: Path) -> None:
    """Run ``code`` in a separate Python process, with ``paths`` bound as pathlib Paths."""
    setup = "import os\nfrom pathlib import Path\n" + "".join(f"{k} = Path({str(v)!r})\n" for k, v in paths.items())
    done = await asyncio.to_thread(subprocess.run, [sys.executable, "-c", setup + code], capture_output=True,
                                   text=True, timeout=60)
    assert done.returncode == 0, done.stderr


@pytest.fixture
async def watcher():
    seen = Seen()
    made = Watcher(asyncio.get_running_loop(), seen)
    yield made, seen
    made.close()


async def test_changes_by_another_process_are_seen_by_name(watcher, tmp_path: Path) -> None:
    w, seen = watcher
    folder = tmp_path / "streams"
    folder.mkdir()
    w.watch(folder)
    assert w.available
    assert seen.calls == [(folder, None)]  # an existing folder: anything may have changed before the watch
    steps = [
        ("f = open(d / 'intent.jsonl', 'ab')\nf.write(b'{}\\n'); f.flush(); os.fsync(f.fileno())", "intent.jsonl"),
        ("(d / 'runs.r1.jsonl').write_bytes(b'')", "runs.r1.jsonl"),  # created
        ("os.rename(d / 'x.tmp', d / 'intent.jsonl')", "intent.jsonl"),  # replaced by rename (a re-chained stream)
        ("os.unlink(d / 'runs.r1.jsonl')", "runs.r1.jsonl"),  # deleted
        ("os.rename(o, d / 'goals.g1.jsonl')", "goals.g1.jsonl"),  # moved in from another folder
    ]
    outside = tmp_path / "elsewhere.jsonl"
    outside.write_bytes(b"")
    for code, name in steps:
        if "x.tmp" in code:
            (folder / "x.tmp").write_bytes(b"a new chain\n")
        await seen.quiet(0.2)  # what this process did settles first
        seen.calls.clear()
        await other_process(code, d=folder, o=outside)
        await seen.wait_for((folder, name))


async def test_a_removed_file_is_reported_once_it_is_gone(watcher, tmp_path: Path) -> None:
    """A kill switch removed by hand: the deletion itself is the news."""
    w, seen = watcher
    switch = tmp_path / "STOP"
    switch.write_bytes(b"")
    w.watch(tmp_path)
    seen.calls.clear()
    await other_process("os.unlink(s)", s=switch)
    await seen.wait_for((tmp_path, "STOP"))
    assert not switch.exists()


async def test_reads_by_anyone_are_not_changes(watcher, tmp_path: Path) -> None:
    w, seen = watcher
    stream = tmp_path / "intent.jsonl"
    stream.write_bytes(b"{}\n")
    w.watch(tmp_path)
    await seen.quiet(0.2)
    seen.calls.clear()
    await other_process("for _ in range(20): f.read_bytes()", f=stream)
    stream.read_bytes()
    assert await seen.quiet(1.0) == []


async def test_a_folder_made_after_the_watch_is_armed_as_it_appears(watcher, tmp_path: Path) -> None:
    w, seen = watcher
    folder = tmp_path / "data" / "projects" / "p1" / "streams"
    w.watch(folder)
    assert seen.calls == []  # nothing there yet
    assert list(w._watches) == [tmp_path]  # the nearest existing ancestor
    await other_process("d.mkdir(parents=True)", d=folder)
    await seen.wait_for((folder, None))
    assert list(w._watches) == [folder]  # moved down, the ancestor dropped
    await other_process("(d / 'intent.jsonl').write_bytes(b'{}\\n')", d=folder)
    await seen.wait_for((folder, "intent.jsonl"))


async def test_a_folder_deleted_and_made_again_is_watched_again(watcher, tmp_path: Path) -> None:
    w, seen = watcher
    folder = tmp_path / "project" / "streams"
    folder.mkdir(parents=True)
    w.watch(folder)
    await other_process("import shutil\nshutil.rmtree(p)", p=folder.parent)
    for _ in range(100):  # the deletion re-arms on the nearest ancestor left
        if list(w._watches) == [tmp_path]:
            break
        await asyncio.sleep(0.05)
    assert list(w._watches) == [tmp_path]
    seen.calls.clear()
    await other_process("d.mkdir(parents=True)\n(d / 'intent.jsonl').write_bytes(b'')", d=folder)
    await seen.wait_for((folder, None))
    await other_process("(d / 'intent.jsonl').write_bytes(b'{}\\n')", d=folder)
    await seen.wait_for((folder, "intent.jsonl"))


async def test_watches_are_counted_and_dropped_with_the_last(watcher, tmp_path: Path) -> None:
    w, seen = watcher
    w.watch(tmp_path)
    w.watch(tmp_path)
    w.unwatch(tmp_path)
    await other_process("(d / 'a.jsonl').write_bytes(b'')", d=tmp_path)
    await seen.wait_for((tmp_path, "a.jsonl"))
    w.unwatch(tmp_path)
    assert w._watches == {} and w.targets == {}
    await seen.quiet(0.2)  # anything queued before the watch went
    await other_process("(d / 'b.jsonl').write_bytes(b'')", d=tmp_path)
    assert await seen.quiet(1.0) == []
    w.unwatch(tmp_path)  # one too many: nothing to drop, no error
    assert w.targets == {}


async def test_nothing_is_reported_after_close(tmp_path: Path) -> None:
    seen = Seen()
    w = Watcher(asyncio.get_running_loop(), seen)
    w.watch(tmp_path)
    w.close()
    seen.calls.clear()
    await other_process("(d / 'a.jsonl').write_bytes(b'')", d=tmp_path)
    assert await seen.quiet(1.0) == []
    assert not w.available  # closed: it does not start again
    w.watch(tmp_path)
    assert seen.calls == []


async def test_a_watcher_that_never_watches_never_loads_the_library(tmp_path: Path) -> None:
    code = ("import asyncio, sys\nfrom loopstate.service.watch import Watcher\n"
            "w = Watcher(asyncio.new_event_loop(), lambda f, n: None)\nw.close()\n"
            "assert 'watchdog' not in sys.modules, 'loaded'\n")
    done = await asyncio.to_thread(subprocess.run, [sys.executable, "-c", code], capture_output=True, text=True,
                                   timeout=60)
    assert done.returncode == 0, done.stderr


async def test_a_folder_watched_through_a_symlink_is_reported_as_watched(watcher, tmp_path: Path) -> None:
    """inotify reports paths as watched; FSEvents (macOS) reports them resolved. Either spelling is the folder."""
    w, seen = watcher
    real = tmp_path / "real" / "streams"
    real.mkdir(parents=True)
    (tmp_path / "link").symlink_to(tmp_path / "real")
    folder = tmp_path / "link" / "streams"
    w.watch(folder)
    await other_process("(d / 'intent.jsonl').write_bytes(b'{}\\n')", d=real)
    await seen.wait_for((folder, "intent.jsonl"))
    # What FSEvents would send for the same change: the resolved path (an event of watchdog's own
    # kind, handed to the watcher as its observer thread hands it; no macOS here to make one).
    from watchdog.events import FileCreatedEvent

    seen.calls.clear()
    w._deliver(folder, FileCreatedEvent(str(real / "runs.r1.jsonl")))
    w._deliver(folder, FileCreatedEvent(str(tmp_path / "elsewhere" / "x.jsonl")))  # not in the folder
    assert seen.calls == [(folder, "runs.r1.jsonl")]


async def test_a_watched_folder_that_is_itself_a_symlink_is_followed(watcher, tmp_path: Path) -> None:
    """A data dir given as a symlink: the watch is on the folder it names, as a plain inotify watch is."""
    w, seen = watcher
    (tmp_path / "real").mkdir()
    folder = tmp_path / "data"
    folder.symlink_to(tmp_path / "real")
    w.watch(folder)
    await other_process("(d / 'intent.jsonl').write_bytes(b'{}\\n')", d=tmp_path / "real")
    await seen.wait_for((folder, "intent.jsonl"))
