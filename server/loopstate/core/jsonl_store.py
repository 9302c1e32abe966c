"""The local JSONL store behind the storage contract (``core/backend.py``): the default.

One folder per project below the data dir, one JSONL file per stream
(``core/project.py`` has the layout). This module only maps the contract onto
the pieces that keep the files: ``Ledger`` (``core/ledger.py``) is the
``StreamLedger``, with its lock, torn-tail repair, checkpoints, snapshots,
verified marks and group commit; ``Stream`` (``core/stream.py``) reads and
appends the verified bytes; ``StoreLock`` the exclusive sections. Nothing here
changes a byte on disk: a store opened through this module and one opened the
way loopstate always did are the same files, read and written the same way.

Growth of a stream is seen with a file watcher on the project's ``streams``
folder (watchdog's native observer, imported by the first ``changes``), the
way the sidecar's own watcher sees it (``service/watch.py``).
"""

from __future__ import annotations

import contextlib
import os
import threading
from collections.abc import Callable, Iterator, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

from loopstate.core import canonical, quarantine, recovery
from loopstate.core.backend import ChangeFn, Head, HeadConflict, RecordFn, StoredEvent, Wakes
from loopstate.core.chain import BATCH, ChainLayout
from loopstate.core.ledger import Ledger
from loopstate.core.project import Project
from loopstate.core.record import ProgressFn
from loopstate.core.stream import Stream

if TYPE_CHECKING:
    from loopstate.core.snapshot import Codec

# Records read under one hold of the shared lock by ``read``: the lock is let go between
# blocks, so a long read never keeps writers waiting for more than one block's decode.
READ_BLOCK = 4096


def open_store(url: str, project: Project) -> JsonlStore:
    """The opener ``core/stores.py`` calls for ``jsonl:`` (and ``file:``) URLs."""
    return JsonlStore(url, project)


class JsonlStore:
    """A project's streams as JSONL files below the data dir (``Store`` in ``core/backend.py``)."""

    def __init__(self, url: str, project: Project) -> None:
        self.url = url
        self.project = project
        self._writers: dict[str, Ledger] = {}  # one per stream, for ``append`` (no fold, no request index)
        self._guard = threading.Lock()

    # streams -------------------------------------------------------------------------------

    def stream_names(self) -> list[str]:
        return self.project.stream_names()

    def open_ledger(
        self, name: str, layout: ChainLayout, *, on_record: RecordFn | None = None,
        on_reset: Callable[[], None] | None = None, keep_requests: bool = True, announce_history: bool = True,
        snapshots: Codec | None = None, news_limit: int | None = None,
    ) -> Ledger:
        return Ledger(
            self.project, name, layout, on_record=on_record, on_reset=on_reset, keep_requests=keep_requests,
            announce_history=announce_history, snapshots=snapshots, news_limit=news_limit,
        )

    def head(self, name: str, layout: ChainLayout) -> Head:
        ledger = self._writer(name, layout)
        ledger.catch_up(collect=False)
        return Head(*ledger.head)

    def read(self, name: str, layout: ChainLayout, *, after: int = 0) -> Iterator[StoredEvent]:
        """Every event verified from byte 0 (the chain is checked whole), those after ``after``
        yielded in blocks of READ_BLOCK, each block read under the stream's shared lock."""
        stream = Stream(self.project.dir, name, layout)
        lock = self.project.lock(name)
        while True:
            block: list[StoredEvent] = []
            with lock.shared():
                reads = stream.read_new()
                try:
                    for record in reads:
                        sequence = record.event[layout.sequence_field]
                        if sequence > after:
                            block.append(StoredEvent(sequence, record.event[layout.hash_field],
                                                     canonical.encode(record.event), record.start))
                        if len(block) >= READ_BLOCK and _closes_batch(record.event):
                            break  # the head written back is this record's end: the next block goes on from it
                finally:
                    reads.close()
            yield from block
            if len(block) < READ_BLOCK:
                return

    def append(self, name: str, layout: ChainLayout, lines: Sequence[StoredEvent], *, expected: Head) -> Head:
        ledger = self._writer(name, layout)
        with ledger.mutation() as tx:
            actual = Head(*ledger.head)
            if actual != expected:
                raise HeadConflict(name, expected, actual)
            tx.append_sealed(lines)
        return Head(*ledger.head)

    def _writer(self, name: str, layout: ChainLayout) -> Ledger:
        with self._guard:
            ledger = self._writers.get(name)
            if ledger is None or ledger.layout != layout:
                ledger = self._writers[name] = Ledger(self.project, name, layout, keep_requests=False)
            return ledger

    # exclusion and change ------------------------------------------------------------------

    @contextlib.contextmanager
    def exclusive(self, section: str) -> Iterator[None]:
        with self.project.lock(section).exclusive():
            yield

    def changes(self, names: Sequence[str] | None = None, on_change: ChangeFn | None = None) -> FolderFeed:
        return FolderFeed(self.project.dir / "streams", names, on_change)

    def close(self) -> None:
        with self._guard:
            writers, self._writers = list(self._writers.values()), {}
        for ledger in writers:
            ledger.close()

    # capabilities --------------------------------------------------------------------------

    def quarantined(self, name: str) -> list[dict[str, Any]]:
        return quarantine.entries(self.project.dir, name)

    def verify_stream(self, name: str, layout: ChainLayout, progress: ProgressFn | None = None) -> dict[str, Any]:
        with self.project.lock(name).shared():
            return recovery.verify_stream(Stream(self.project.dir, name, layout), progress)

    def recover_stream(self, name: str, layout: ChainLayout) -> dict[str, Any]:
        with self.project.lock(name).exclusive():
            return recovery.recover_stream(self.project, Stream(self.project.dir, name, layout))


def _closes_batch(event: dict[str, Any]) -> bool:
    marker = event.get(BATCH)
    return not (type(marker) is list and len(marker) == 2 and marker[0] != marker[1])


class FolderFeed:
    """Wakes when a ``.jsonl`` file in a project's ``streams`` folder is written, made or moved
    (``ChangeFeed``). A folder not made yet is watched from its nearest existing ancestor, and
    the watch moves down as folders appear (each such move is also a wake: a spurious one
    costs a catch-up that finds nothing)."""

    def __init__(self, folder: Path, names: Sequence[str] | None, on_change: ChangeFn | None) -> None:
        from watchdog.events import FileSystemEvent, FileSystemEventHandler
        from watchdog.observers import Observer

        self._folder = folder
        self._names = None if names is None else frozenset(names)
        self._wakes = Wakes(on_change)
        self._guard = threading.Lock()
        feed = self

        class Handler(FileSystemEventHandler):
            def on_any_event(self, event: FileSystemEvent) -> None:
                feed._heard(event)

        self._handler = Handler()
        self._observer = Observer()
        self._observer.start()
        self._watch: Any = None
        self._watched: Path | None = None
        self._arm()

    def _arm(self) -> None:
        """Watch the streams folder, or, until it exists, its nearest existing ancestor."""
        with self._guard:
            target = self._folder
            while not target.is_dir() and target.parent != target:
                target = target.parent
            if target == self._watched:
                return
            if self._watch is not None:
                self._observer.unschedule(self._watch)
            self._watch = self._observer.schedule(self._handler, os.fspath(target), recursive=False)
            self._watched = target

    def _heard(self, event: Any) -> None:
        if event.event_type in ("opened", "closed_no_write", "closed"):
            return
        if self._watched != self._folder:
            self._arm()  # a folder on the way may have appeared
            self._wakes.wake(None)
            return
        paths = [event.src_path, getattr(event, "dest_path", "")]
        for raw in paths:
            path = os.fsdecode(raw) if raw else ""
            base = os.path.basename(path)
            if not base.endswith(".jsonl") or os.path.dirname(path) != os.fspath(self._folder):
                continue
            name = base[: -len(".jsonl")]
            if self._names is None or name in self._names:
                self._wakes.wake(name)
                return

    def wait(self, timeout: float | None = None) -> bool:
        return self._wakes.wait(timeout)

    def close(self) -> None:
        self._observer.stop()
        self._observer.join()
