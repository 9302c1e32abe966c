"""The store's live views as MCP resources, and who is told when one changes.

Three kinds of URI, one per view the sidecar also serves as a topic:

- ``loopstate://<project_id>/intent``: the intent snapshot (intent/snapshot)
- ``loopstate://<project_id>/runs/<run_id>``: a run's status (runs/status)
- ``loopstate://<project_id>/goals/<goal_id>``: a goal's board (goals/board)

A resource's bytes are the view as JSON, exactly what ``loopstate/query``
would return. Change delivery has no polling: the process's live-follow
engine (``service/live``, the one the sidecar uses too) tells its followers
of every event the service folds, whether this process wrote it or caught up
with another process's append, and wakes one catch-up as soon as a followed
stream file changes. So a CLI append in another process reaches a subscriber
as one catch-up and one ``notifications/resources/updated``.
"""

from __future__ import annotations

import asyncio
import logging
import re
from dataclasses import dataclass
from typing import Any, Callable, Coroutine

import msgspec

from loopstate_protocol.errors import ErrorCode

from loopstate.core.errors import LoopstateError
from loopstate.core.news import News
from loopstate.core.project import Project
from loopstate.service.engine import Service
from loopstate.service.live import Follower, Live

log = logging.getLogger("loopstate.mcp")

SCHEME = "loopstate"
_URI = re.compile(r"^loopstate://(?P<project>[0-9a-f]{64})/(?:(?P<intent>intent)|(?P<kind>runs|goals)/(?P<key>[^/]+))$")
# kind -> (domain, view)
VIEWS = {"intent": ("intent", "snapshot"), "runs": ("runs", "status"), "goals": ("goals", "board")}


@dataclass(frozen=True)
class View:
    """What a resource URI names: a project's view, in the service's terms."""

    project_id: str
    kind: str  # intent | runs | goals
    key: str | None

    @property
    def uri(self) -> str:
        tail = "intent" if self.kind == "intent" else f"{self.kind}/{self.key}"
        return f"{SCHEME}://{self.project_id}/{tail}"

    @property
    def domain(self) -> str:
        return VIEWS[self.kind][0]

    @property
    def view(self) -> str:
        return VIEWS[self.kind][1]


def parse(uri: str) -> View:
    match = _URI.match(uri)
    if match is None:
        raise LoopstateError(
            ErrorCode.NOT_FOUND,
            f"{uri!r} is not a loopstate resource; resources are loopstate://<project_id>/intent, "
            ".../runs/<run_id> and .../goals/<goal_id> (resources/list names them)",
            uri=uri,
        )
    if match["intent"]:
        return View(match["project"], "intent", None)
    return View(match["project"], match["kind"], match["key"])


def listing(service: Service, root: str) -> list[tuple[View, str]]:
    """Every resource of the project at ``root`` with a short name, the intent snapshot first (service thread).

    The runs and goals are those the protocol's ``project.runs`` and ``project.goals`` list, the
    same reads the editors make, whatever store holds them."""
    from loopstate_protocol.project import GoalList, ProjectGoals, ProjectRuns, RunList

    project_id = service.project(root).project_id
    runs: RunList = service.query(root, ProjectRuns())
    goals: GoalList = service.query(root, ProjectGoals())
    found = [(View(project_id, "intent", None), "intent snapshot")]
    found += [(View(project_id, "runs", run.run_id), f"run {run.run_id} status") for run in runs.runs]
    found += [(View(project_id, "goals", goal.goal_id), f"goal {goal.goal_id} board") for goal in goals.goals]
    return found


def check_project(service: Service, root: str, view: View) -> None:
    """NOT_FOUND unless ``view`` is of the project at ``root`` (service thread)."""
    project = service.project(root)
    if view.project_id != project.project_id:
        raise LoopstateError(
            ErrorCode.NOT_FOUND,
            f"{view.uri} belongs to another project than this server's ({project.project_id}); "
            "list resources again for the current ones",
            uri=view.uri,
        )


def read(service: Service, root: str, view: View) -> str:
    """The view's current JSON (service thread), after catching up with other processes."""
    check_project(service, root, view)
    _, snapshot = service.view(root, view.domain, view.view, view.key)
    return msgspec.json.encode(snapshot).decode()


Notify = Callable[[str], Coroutine[Any, Any, None]]  # an async function of the URI


class Updates(Follower):
    """Subscribed URIs, fed by the process's live-follow engine (``service/live``).

    ``subscribe`` records the URI and its stream (computed on the service
    thread) and has the engine follow that stream (which catches it up once,
    so nothing appended between the subscriber's read and the watch is
    missed). Any folded event of a subscribed stream schedules ``notify(uri)``
    on the event loop; the subscription tables are touched only there.
    """

    def __init__(self, service: Service, live: Live, loop: asyncio.AbstractEventLoop, notify: Notify) -> None:
        self.service = service
        self.live = live
        self.loop = loop
        self.notify = notify
        self._by_stream: dict[tuple[str, str], dict[str, View]] = {}  # (project, stream) -> uri -> view
        self._followed: dict[str, tuple[Project, str]] = {}  # uri -> the stream it is followed through
        self._counts: dict[str, int] = {}  # uri -> subscriptions (resources/subscribe, subscriptions/listen)
        self.closed = False
        live.add_follower(self)

    # service thread ------------------------------------------------------------

    def news(self, project: Project, stream: str, news: News) -> None:
        try:
            self.loop.call_soon_threadsafe(self._folded, (project.project_id, stream))
        except RuntimeError:  # the loop is gone: the server is exiting
            pass

    def failed(self, project: Project, stream: str, error: LoopstateError) -> None:
        log.warning("%s: cannot catch up: %s", stream, error.message)

    def _stream_of(self, root: str, view: View) -> tuple[Project, str]:
        project = self.service.project(root)
        domain = self.service.domains[view.domain]
        return project, domain.stream_for_view(view.view, view.key)

    # event loop ----------------------------------------------------------------

    async def subscribe(self, root: str, view: View) -> None:
        """Follow ``view`` (counted: each subscribe needs its own unsubscribe)."""
        self._counts[view.uri] = self._counts.get(view.uri, 0) + 1
        if self._counts[view.uri] > 1:
            return
        project, stream = await self.loop.run_in_executor(self.live.worker, self._stream_of, root, view)
        self._by_stream.setdefault((project.project_id, stream), {})[view.uri] = view
        self._followed[view.uri] = (project, stream)
        self.live.follow(project, self.service.domains[view.domain], stream)

    def unsubscribe(self, uri: str) -> None:
        count = self._counts.get(uri, 0) - 1
        if count > 0:
            self._counts[uri] = count
            return
        self._counts.pop(uri, None)
        followed = self._followed.pop(uri, None)
        if followed is None:
            return
        project, stream = followed
        key = (project.project_id, stream)
        uris = self._by_stream.get(key, {})
        uris.pop(uri, None)
        if not uris:
            self._by_stream.pop(key, None)
        self.live.unfollow(project, stream)

    def close(self) -> None:
        self.closed = True
        self._by_stream.clear()
        self.live.close()

    def _folded(self, key: tuple[str, str]) -> None:
        """New events of a stream were folded: tell the subscribers of its URIs."""
        for uri in list(self._by_stream.get(key, ())) if not self.closed else ():
            task = self.loop.create_task(self.notify(uri))
            task.add_done_callback(_log_failure)


def _log_failure(task: asyncio.Task) -> None:
    if not task.cancelled() and task.exception() is not None:
        log.warning("a resource update could not be sent: %s", task.exception())
