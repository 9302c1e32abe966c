"""Following the store live: one watcher, one worker, one catch-up per change, every follower told.

A long-lived front door (the sidecar's subscriptions, the MCP server's
resource updates) must learn of what other processes append as soon as it
lands, without polling, and must not do the same work once per subscriber.
``Live`` is that engine, once per process:

- one store watcher (``service/watch``), armed on the ``streams`` folder of
  every followed project on the local store and on any other folder a follower
  asks for (the kill switches' folders);
- on a team's shared store (PostgreSQL), no files to watch: one change feed per
  followed project instead (the storage contract's ``Store.changes``: LISTEN on
  the project's channel), whose wake schedules the same catch-up. The catch-up
  reads after the last sequence it folded, so a wake that is missed, merged or
  spurious (the feed wakes once after it reconnects) loses nothing;
- one worker, the service thread every Service call of the process runs on;
- one catch-up per change: a changed stream file schedules one
  ``Service.refresh`` of that stream (changes that land while it waits are
  coalesced into it), however many subscriptions follow the stream;
- one service listener, fanned out to every ``Follower``: each hears every
  folded event (``news``), whether this process wrote it or a catch-up read
  it, and the catch-up's fault (``failed``) or end (``caught_up``).

Followers compute what they deliver from the state the catch-up folded
(``view_now``), so a snapshot notification costs no second catch-up.
"""

from __future__ import annotations

import asyncio
import logging
import threading
from concurrent.futures import Executor
from pathlib import Path
from typing import Any, Callable

from loopstate.core.errors import LoopstateError
from loopstate.core.news import News
from loopstate.core.project import Project
from loopstate.domains.base import Domain
from loopstate.service.engine import Folded, Service
from loopstate.service.watch import Watcher

log = logging.getLogger("loopstate.service")

StreamKey = tuple[str, str]  # (project id, stream)
FileCallback = Callable[[Path, "str | None"], None]


def _shared(project: Project) -> bool:
    """Whether the project's streams are on a shared store (not files this process can watch)."""
    from loopstate.core.stores import configured_url

    url = configured_url(project.root)
    return url is not None and url.split(":", 1)[0] not in ("jsonl", "file")


class Follower:
    """What a front door hears from ``Live``; every method is called on the service thread and may do nothing."""

    def news(self, project: Project, stream: str, news: News) -> None:
        """New events of ``stream`` were folded (by a command of this process or a catch-up)."""

    def caught_up(self, project: Project, stream: str, folded: Folded) -> None:
        """A live catch-up of ``stream`` ended (after any ``news`` it brought)."""

    def failed(self, project: Project, stream: str, error: LoopstateError) -> None:
        """A live catch-up of ``stream`` could not read it (a corrupt or unreadable stream)."""

    def store_changed(self, project_id: str, stream: str | None) -> None:
        """A shared store's feed woke for ``stream`` of the project (None: maybe any); on the event loop.
        For what follows many streams at once (the ``project/...`` topics), which no catch-up of one stream serves."""


class _Feed:
    """A shared store's change feed of one project, shared by every followed stream of it."""

    __slots__ = ("feed", "count")

    def __init__(self, feed: Any) -> None:
        self.feed, self.count = feed, 0


class _Followed:
    __slots__ = ("project", "domain", "stream", "count")

    def __init__(self, project: Project, domain: Domain, stream: str) -> None:
        self.project, self.domain, self.stream, self.count = project, domain, stream, 0


class Live:
    """The process's one live-follow engine over ``service`` (see the module docstring).

    ``follow``/``unfollow``/``watch_files``/``close`` are called on the event
    loop; catch-ups run on ``worker``; followers are called on the worker.
    """

    def __init__(self, service: Service, worker: Executor, loop: asyncio.AbstractEventLoop) -> None:
        self.service = service
        self.worker = worker
        self.loop = loop
        self.watcher = Watcher(loop, self._on_folder_change)
        self.followers: list[Follower] = []
        self.catch_ups = 0  # live catch-ups run (each is logged at debug level: what tests count)
        self._followed: dict[StreamKey, _Followed] = {}
        self._file_callbacks: dict[Path, list[FileCallback]] = {}
        self._feeds: dict[str, _Feed] = {}  # project id -> its shared store's change feed
        self._pending: set[StreamKey] = set()
        self._pending_lock = threading.Lock()
        self.closed = False
        service.add_listener(self._news)

    @property
    def available(self) -> bool:
        """Whether changes by other processes are seen as they land (False: at the next request)."""
        return self.watcher.available

    def add_follower(self, follower: Follower) -> None:
        self.followers.append(follower)

    # event loop ----------------------------------------------------------------

    def follow(self, project: Project, domain: Domain, stream: str) -> None:
        """Catch ``stream`` up whenever its file changes (counted: each follow needs its unfollow).
        The first follow of a stream also catches it up once: it may have changed before the watch."""
        key = (project.project_id, stream)
        followed = self._followed.get(key)
        if followed is None:
            followed = self._followed[key] = _Followed(project, domain, stream)
        followed.count += 1
        if followed.count == 1:
            self._watch_project(project)
        self.catch_up(project, domain, stream)

    def unfollow(self, project: Project, stream: str) -> None:
        key = (project.project_id, stream)
        followed = self._followed.get(key)
        if followed is None:
            return
        followed.count -= 1
        if followed.count <= 0:
            del self._followed[key]
            self._unwatch_project(project)

    def _watch_project(self, project: Project) -> None:
        """Wake on the project's appends: its streams folder, or its shared store's change feed."""
        feed = self._feeds.get(project.project_id)
        if feed is None and not _shared(project):
            self.watcher.watch(project.dir / "streams")
            return
        if feed is None:
            from loopstate.core.stores import open_store

            project_id, loop = project.project_id, self.loop

            def woke(stream: str | None) -> None:  # the store's thread
                try:
                    loop.call_soon_threadsafe(self._on_store_change, project_id, stream)
                except RuntimeError:  # the loop is closed: the process is exiting
                    pass

            feed = self._feeds[project_id] = _Feed(open_store(project).changes(None, on_change=woke))
        feed.count += 1

    def watch_store(self, project: Project) -> bool:
        """Open (counted) the project's shared store feed for a follower of many streams; False on the local
        store, whose stream files the follower watches itself (``watch_files``). Each True needs ``unwatch_store``."""
        if project.project_id not in self._feeds and not _shared(project):
            return False
        self._watch_project(project)
        return True

    def unwatch_store(self, project: Project) -> None:
        self._unwatch_project(project)

    def _unwatch_project(self, project: Project) -> None:
        feed = self._feeds.get(project.project_id)
        if feed is None:
            self.watcher.unwatch(project.dir / "streams")
            return
        feed.count -= 1
        if feed.count <= 0:
            del self._feeds[project.project_id]
            feed.feed.close()

    def watch_files(self, folder: Path, callback: FileCallback) -> None:
        """Call ``callback(folder, name)`` on the loop when a file in ``folder`` is created, written or removed
        (``name`` None: anything in it may have changed). Counted, like ``follow``."""
        self._file_callbacks.setdefault(folder, []).append(callback)
        self.watcher.watch(folder)

    def unwatch_files(self, folder: Path, callback: FileCallback) -> None:
        callbacks = self._file_callbacks.get(folder)
        if callbacks and callback in callbacks:
            callbacks.remove(callback)
            if not callbacks:
                del self._file_callbacks[folder]
            self.watcher.unwatch(folder)

    def close(self) -> None:
        self.closed = True
        self._followed.clear()
        self._file_callbacks.clear()
        feeds, self._feeds = list(self._feeds.values()), {}
        for feed in feeds:
            feed.feed.close()
        self.watcher.close()

    def catch_up(self, project: Project, domain: Domain, stream: str) -> None:
        """Schedule one catch-up of ``stream`` on the worker, unless one is already waiting (any thread)."""
        key = (project.project_id, stream)
        with self._pending_lock:
            if key in self._pending or self.closed:
                return
            self._pending.add(key)
        try:
            self.worker.submit(self._catch_up, key, project, domain, stream)
        except RuntimeError:  # the worker is shut down: the process is exiting
            with self._pending_lock:
                self._pending.discard(key)

    def _on_folder_change(self, folder: Path, name: str | None) -> None:
        if self.closed:
            return
        for callback in list(self._file_callbacks.get(folder, ())):
            callback(folder, name)
        stream = name[: -len(".jsonl")] if name and name.endswith(".jsonl") else None
        if name is not None and stream is None:
            return  # a lock file, a checkpoint, a snapshot: not an append
        for key, followed in list(self._followed.items()):
            if followed.project.dir / "streams" == folder and (stream is None or key[1] == stream):
                self.catch_up(followed.project, followed.domain, followed.stream)

    def _on_store_change(self, project_id: str, stream: str | None) -> None:
        if self.closed:
            return
        for key, followed in list(self._followed.items()):
            if key[0] == project_id and (stream is None or key[1] == stream):
                self.catch_up(followed.project, followed.domain, followed.stream)
        for follower in list(self.followers):
            follower.store_changed(project_id, stream)

    # service thread ------------------------------------------------------------

    def _catch_up(self, key: StreamKey, project: Project, domain: Domain, stream: str) -> None:
        with self._pending_lock:
            self._pending.discard(key)
        if self.closed:
            return
        self.catch_ups += 1
        log.debug("live: catching up %s of project %s", stream, project.project_id[:12])
        try:
            folded = self.service.refresh(project, domain, stream)
        except LoopstateError as error:
            for follower in list(self.followers):
                follower.failed(project, stream, error)
            return
        except Exception:
            log.exception("catching up %s failed", stream)
            return
        for follower in list(self.followers):
            follower.caught_up(project, stream, folded)

    def _news(self, project: Project, stream: str, news: News) -> None:
        for follower in list(self.followers):
            follower.news(project, stream, news)

    def view_now(self, root: str, domain_name: str, view: str, key: str | None) -> tuple[Folded, Any]:
        """A topic's projection from the state already folded, with no catch-up of its own (service thread):
        for a notification of news a catch-up (or a command) just folded, the state is at least that new."""
        return self.service.view(root, domain_name, view, key, catch_up=False)
