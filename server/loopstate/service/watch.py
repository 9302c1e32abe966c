"""Wake up when another process appends to a watched stream, on every OS.

The watching itself is watchdog's: its native observer for the platform
(inotify on Linux, FSEvents on macOS, ReadDirectoryChangesW on Windows,
kqueue on the BSDs). Each of its threads (on Linux: the inotify reader, one
per watched folder, the dispatcher) blocks in the kernel with no timeout, and
its events reach the event loop through ``call_soon_threadsafe``, so an idle
server makes no wake-ups at all (measured with watchdog 7.1:
tests/bench/bench_watch.py, docs/benchmarks.md). watchdog's polling fallback is refused: a poll is a
wake-up a second, and without a native watcher changes by other processes
show at the next request, as the server says once in its log.

What is loopstate's own, above the library: reference-counted folder watches
(two subscriptions on one folder share a watch), and a watched folder that
does not exist yet (a project nobody has written to) armed on its nearest
existing ancestor and moved down as folders appear. watchdog is imported at
the first ``watch``, so a server that never subscribes never pays for it.
"""

from __future__ import annotations

import asyncio
import logging
import os
from pathlib import Path
from typing import Any, Callable

log = logging.getLogger("loopstate.service")

ChangeFn = Callable[[Path, str | None], None]
"""Called with a watched folder and the name that changed in it (None: anything may have)."""

# What a change is. A writer keeps its stream descriptor open between appends, so an
# append shows as a modification at its write, before its fsync: the refresh it
# triggers takes the stream's shared lock, which waits for the writer to release its
# exclusive lock after the fsync, so only durable bytes are read. A write cut short by
# a crash (a torn tail) and the cut of one are modifications too. A re-chained stream
# put in place is a move; a kill switch removed by hand is a deletion; a folder made
# below a watched ancestor is a creation. Opens and reads are left out (on inotify the
# mask leaves out IN_OPEN and IN_CLOSE_*): the server's own refresh reads the stream,
# and hearing that would wake it for nothing.
_KINDS = ("FileModifiedEvent", "FileCreatedEvent", "FileMovedEvent", "FileDeletedEvent",
          "DirCreatedEvent", "DirMovedEvent", "DirDeletedEvent")


def _observer() -> Any:
    """A started native watchdog observer, or None (no native watcher, or the OS refused one)."""
    try:
        from watchdog.observers import Observer
        from watchdog.observers.polling import PollingObserver
    except Exception as exc:  # not installed, or its platform module failed to load
        log.warning("no file watcher (%s): other processes' changes show at the next request", exc)
        return None
    # watchdog types Observer as a factory (a callable protocol); it is the chosen observer class.
    if isinstance(Observer, type) and issubclass(Observer, PollingObserver):
        log.warning("no native file watcher on this platform: other processes' changes show at the next request")
        return None
    try:
        observer = Observer()
        observer.start()
    except OSError as exc:  # inotify instances exhausted (fs.inotify.max_user_instances), and the like
        log.warning("file watcher unavailable (%s): other processes' changes show at the next request",
                    os.strerror(exc.errno) if exc.errno else exc)
        return None
    return observer


class _Handler:
    """Hands each event from watchdog's thread to the loop's, tagged with the folder watched."""

    def __init__(self, loop: asyncio.AbstractEventLoop, deliver: Callable[[Path, Any], None], folder: Path) -> None:
        self.loop = loop
        self.deliver = deliver
        self.folder = folder
        # How the folder may be spelled in an event's path: as watched, and resolved
        # (FSEvents reports real paths: /private/var/... for a folder under /var/...).
        self.spellings = frozenset({os.path.normpath(folder), os.path.realpath(folder)})

    def dispatch(self, event: Any) -> None:
        try:
            self.loop.call_soon_threadsafe(self.deliver, self.folder, event)
        except RuntimeError:  # the loop is closed: the server is exiting
            pass


class Watcher:
    """Reference-counted folder watches feeding ``on_change`` on the loop's thread."""

    def __init__(self, loop: asyncio.AbstractEventLoop, on_change: ChangeFn) -> None:
        self.loop = loop
        self.on_change = on_change
        self.targets: dict[Path, int] = {}  # folder -> number of interested subscriptions
        self._observer: Any = None
        self._started = False  # the observer has been asked for (at the first watch)
        self._closed = False
        self._kinds: list[type] = []
        self._watches: dict[Path, tuple[Any, _Handler]] = {}  # watched folder -> (watchdog's watch, handler)

    @property
    def available(self) -> bool:
        """Whether changes by other processes are pushed (asks for the observer if not yet)."""
        return self._start()

    def watch(self, folder: Path) -> None:
        self.targets[folder] = self.targets.get(folder, 0) + 1
        if self.targets[folder] == 1:
            self._arm(folder)

    def unwatch(self, folder: Path) -> None:
        count = self.targets.get(folder, 0) - 1
        if count > 0:
            self.targets[folder] = count
            return
        self.targets.pop(folder, None)
        self._prune()

    def close(self) -> None:
        self._closed = True
        observer, self._observer = self._observer, None
        self._watches.clear()
        if observer is not None:
            observer.stop()  # unschedules every watch; its threads are daemons, blocked in the kernel
            observer.join(timeout=1.0)

    # the library's plumbing ----------------------------------------------------

    def _start(self) -> bool:
        if not self._started and not self._closed:
            self._started = True
            self._observer = _observer()
            if self._observer is not None:
                import watchdog.events as events

                self._kinds = [getattr(events, name) for name in _KINDS]
        return self._observer is not None

    def _add(self, path: Path) -> bool:
        if path in self._watches:
            return True
        handler = _Handler(self.loop, self._deliver, path)
        try:
            # follow_symlink: a folder given as a symlink (a data dir that is one) is watched where it points.
            watch = self._observer.schedule(handler, os.fspath(path), recursive=False, event_filter=self._kinds,
                                            follow_symlink=True)
        except OSError as exc:
            if not isinstance(exc, (FileNotFoundError, NotADirectoryError)):
                log.warning("cannot watch %s: %s", path, exc.strerror or exc)
            return False
        self._watches[path] = (watch, handler)
        return True

    def _drop(self, path: Path) -> None:
        entry = self._watches.pop(path, None)
        if entry is not None and self._observer is not None:
            try:
                self._observer.unschedule(entry[0])
            except KeyError:  # watchdog already let it go (the folder was deleted)
                pass

    def _arm(self, folder: Path) -> None:
        """Watch ``folder``, or its nearest existing ancestor until it appears."""
        if not self._start():
            return
        while True:
            path = folder
            while not self._add(path):
                if path.parent == path:
                    return
                path = path.parent
            if path == folder:
                self.on_change(folder, None)  # it may have changed before the watch existed
                return
            # Watching an ancestor: the next folder down may have been created between
            # the failed attempt and this watch, with no event to tell. Look again.
            child = folder
            while child.parent != path:
                child = child.parent
            if not os.path.isdir(child):
                return  # its creation will be reported

    def _prune(self) -> None:
        """Drop watches no target needs (neither the folder nor an ancestor of a missing one)."""
        needed: set[Path] = set()
        for target in self.targets:
            path = target
            while path not in self._watches and path.parent != path:
                path = path.parent
            needed.add(path)
        for path in list(self._watches):
            if path not in needed:
                self._drop(path)

    def _deliver(self, folder: Path, event: Any) -> None:
        """One event from watchdog, on the loop's thread: re-arm if folders came or went, then tell."""
        entry = self._watches.get(folder)
        if self._closed or entry is None:
            return  # queued before its watch was dropped
        spellings = entry[1].spellings
        kind = type(event).__name__
        src = os.fsdecode(event.src_path)
        dest = os.fsdecode(getattr(event, "dest_path", "") or "")
        if os.path.normpath(src) in spellings:
            if kind == "DirDeletedEvent":  # the watched folder itself went: watchdog has stopped its watch
                self._drop(folder)
                self._rearm()
            return
        names = [os.path.basename(p) for p in (src, dest) if p and os.path.dirname(os.path.normpath(p)) in spellings]
        if kind in ("FileCreatedEvent", "DirCreatedEvent", "FileMovedEvent", "DirMovedEvent"):
            self._rearm()  # a folder we wait for may have appeared
        if folder in self.targets:
            for name in names:
                self.on_change(folder, name)

    def _rearm(self) -> None:
        for target in list(self.targets):
            if target not in self._watches:
                self._arm(target)
        self._prune()
