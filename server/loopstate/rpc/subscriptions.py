"""Subscriptions: who follows which stream, and what each is owed.

Two halves, split by thread. The registry lives on the service thread (the
single worker that runs every Service call): a subscription is registered in
the same job that computed its first snapshot, and the service's listener
(called under the service lock, right after new events are folded) reads it,
so no event falls between a snapshot and the first notification.

Delivery lives on the event loop. Each subscription has one ``Slot``: what was
last delivered (a sequence) and what is pending. A snapshot subscription's
pending state is just the newest head; an events subscription keeps at most
``MAX_PENDING_EVENTS`` events and past that falls back to a snapshot. A
catch-up that brought more than that reaches the loop as its new head alone
(the service hands listeners no longer list: ``NEWS_LIMIT``), so following a
stream that grew by N events holds no N events anywhere. A slot
sends only while stdout is not backed up, so a client that stops reading costs
one slot per subscription, however much the store changes.
"""

from __future__ import annotations

import asyncio
import itertools
import logging
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable

import msgspec

from loopstate_protocol import methods
from loopstate_protocol.base import ErrorData, Head
from loopstate_protocol.errors import ErrorCode
from loopstate_protocol.messages import ChangedNotification, StreamErrorNotification

from loopstate.core.errors import LoopstateError
from loopstate.core.news import News
from loopstate.core.project import Project
from loopstate.rpc.kill_switch import halt_if_switched
from loopstate.rpc.project_topics import ProjectSubscription, snapshot_of
from loopstate.service import Domain
from loopstate.service.engine import NEWS_LIMIT, Folded, Service
from loopstate.service.live import Follower, Live

log = logging.getLogger("loopstate.rpc")

MAX_PENDING_EVENTS = NEWS_LIMIT

Send = Callable[[str, Any], None]


@dataclass(frozen=True)
class Subscription:
    id: str
    topic: str
    root: str
    project: Project
    domain: Domain
    view: str
    key: str | None
    stream: str
    deliver: str
    switches: tuple[Path, ...] = ()

    @property
    def stream_key(self) -> tuple[str, str]:
        return (self.project.project_id, self.stream)

    @property
    def folder(self) -> Path:
        return self.project.dir / "streams"


def parse_topic(topic: str) -> tuple[str, str, str | None]:
    """``<domain>/<view>[/<key>]`` -> (domain, view, key)."""
    parts = topic.split("/", 2)
    if len(parts) < 2 or not all(parts):
        raise LoopstateError(
            ErrorCode.INVALID_PARAMS,
            f"topic {topic!r} is not '<domain>/<view>[/<key>]'; for example 'intent/snapshot' or 'runs/status/<run_id>'",
            topic=topic,
        )
    return parts[0], parts[1], parts[2] if len(parts) == 3 else None


def head_of(event: dict[str, Any], domain: Domain, stream: str) -> Head:
    layout = domain.layout
    return Head(stream=stream, sequence=event[layout.sequence_field], hash=event[layout.hash_field])


def events_between(service: Service, root: str, stream: str, after: int, until: int) -> list[dict[str, Any]]:
    """Verified events with ``after < sequence <= until``: the service's ``project.log``, page by page."""
    from loopstate_protocol.project import MAX_LOG_LIMIT, ProjectLog

    out: list[dict[str, Any]] = []
    while after < until:
        page = service.query(root, ProjectLog(stream=stream, after=after, before=until + 1, limit=MAX_LOG_LIMIT))
        out += page.events
        if page.next_after is None:
            break
        after = page.next_after
    return out


class Registry:
    """Subscriptions by id and by stream; touched only on the service thread."""

    def __init__(self) -> None:
        self.by_id: dict[str, Subscription] = {}
        self.by_stream: dict[tuple[str, str], list[Subscription]] = {}
        self.last_sequence: dict[tuple[str, str], int] = {}  # of followed streams, to spot a rewrite
        self.projects: dict[str, ProjectSubscription] = {}  # project/... topics, by id
        self._ids = itertools.count(1)

    def new_id(self) -> str:
        return f"sub-{next(self._ids)}"

    def add(self, sub: Subscription, head: Head) -> None:
        self.by_id[sub.id] = sub
        self.last_sequence[sub.stream_key] = head.sequence
        self.by_stream.setdefault(sub.stream_key, []).append(sub)

    def remove(self, sub_id: str) -> Subscription | ProjectSubscription:
        project_sub = self.projects.pop(sub_id, None)
        if project_sub is not None:
            return project_sub
        sub = self.by_id.pop(sub_id, None)
        if sub is None:
            raise LoopstateError(
                ErrorCode.UNKNOWN_SUBSCRIPTION,
                f"no subscription {sub_id!r} on this connection; it was never made or is already closed",
                subscription_id=sub_id,
            )
        subs = self.by_stream[sub.stream_key]
        subs.remove(sub)
        if not subs:
            del self.by_stream[sub.stream_key]
            self.last_sequence.pop(sub.stream_key, None)
        return sub


@dataclass
class Slot:
    """Delivery state of one subscription on the event loop."""

    sub: Subscription
    delivered: int
    released: bool = False
    pending_head: Head | None = None
    pending_events: list[dict[str, Any]] = field(default_factory=list)
    overflowed: bool = False
    computing: bool = False
    error: LoopstateError | None = None
    errored: bool = False  # a streamError was owed or sent and no change has been delivered since
    rewritten: bool = False

    def fail(self, exc: LoopstateError) -> bool:
        """Owe the subscriber a streamError, once per failure: every wake of a broken stream
        (one hand edit can be two file events; a recovery in another process is several) fails
        the same way until a change is delivered again, and repeating the error would stand in
        front of that change. Returns whether there is something to send."""
        if self.errored:
            return False
        self.error, self.errored = exc, True
        return True

    def rewrite(self, events: list[dict[str, Any]], empty_head: Head) -> None:
        """The stream was re-chained: forget what was delivered, send the new projection."""
        self.delivered = 0
        self.pending_head, self.pending_events = (None if events else empty_head), []
        self.rewritten = True
        self.add(events)
        self.overflowed = True  # a snapshot, not events that would read as a continuation

    def add(self, events: list[dict[str, Any]]) -> None:
        seq = self.sub.domain.layout.sequence_field
        fresh = [e for e in events if e[seq] > max(self.delivered, self.pending_head.sequence if self.pending_head else 0)]
        if not fresh:
            return
        self.pending_head = head_of(fresh[-1], self.sub.domain, self.sub.stream)
        if self.sub.deliver == "events" and not self.overflowed:
            self.pending_events.extend(fresh)
            if len(self.pending_events) > MAX_PENDING_EVENTS:
                self.pending_events = []
                self.overflowed = True

    def skip_to(self, head: Head) -> None:
        """More events came than are ever passed on as events: owed the state at ``head``."""
        if head.sequence > max(self.delivered, self.pending_head.sequence if self.pending_head else 0):
            self.pending_head, self.pending_events, self.overflowed = head, [], True

    def clear_through(self, sequence: int) -> None:
        self.delivered = sequence
        if self.pending_head is not None and self.pending_head.sequence <= sequence:
            self.pending_head = None
            self.pending_events = []
            self.overflowed = False


class Hub(Follower):
    """Feeds subscriptions from the process's live-follow engine (``service/live``): its news, its
    catch-ups' faults and ends, and the switch files it watches for the hub."""

    def __init__(self, service: Service, live: Live, loop: asyncio.AbstractEventLoop,
                 send: Send, is_paused: Callable[[], bool]) -> None:
        self.service = service
        self.live = live
        self.worker = live.worker
        self.loop = loop
        self.send = send
        self.is_paused = is_paused
        self.registry = Registry()
        self.slots: dict[str, Slot] = {}
        self.project_slots: dict[str, ProjectSubscription] = {}  # on the event loop
        self.store_watched: set[str] = set()  # project subscriptions that hold their shared store's feed
        self.stopped = False
        live.add_follower(self)

    # service thread ------------------------------------------------------------

    def _post(self, callback: Callable[..., None], *args: Any) -> None:
        """Hand work to the event loop; after exit the loop is gone and there is no one to tell."""
        try:
            self.loop.call_soon_threadsafe(callback, *args)
        except RuntimeError:
            pass

    def news(self, project: Project, stream: str, news: News) -> None:
        if not self.live.available:  # else the watcher wakes them, once per file change
            for project_sub in list(self.registry.projects.values()):
                if project_sub.project.project_id == project.project_id and project_sub.concerns_stream(stream):
                    self._post(self._wake_project, project_sub.id)
        key = (project.project_id, stream)
        subs = self.registry.by_stream.get(key)
        if subs:
            domain = subs[0].domain
            sequence = domain.layout.sequence_field
            assert news.first is not None and news.last is not None
            first, last = news.first.event[sequence], self.registry.last_sequence.get(key, 0)
            rewritten = first <= last
            self.registry.last_sequence[key] = news.last.event[sequence]
            if not news.complete:
                head = head_of(news.last.event, domain, stream)
                for sub in subs:
                    self._post(self._on_skip, sub.id, head, rewritten)
                return
            events = [r.event for r in news.records]
            if first > last + 1:
                events = self._missed(project, domain, stream, last, first - 1) + events
            for sub in subs:
                self._post(self._on_events, sub.id, events, rewritten)

    def _missed(self, project: Project, domain: Domain, stream: str, after: int, until: int) -> list[dict[str, Any]]:
        """Events some path folded without announcing (the service promises none does): read them back."""
        log.warning("%s: events %d-%d were not announced by the service; reading them from the stream", stream, after + 1, until)
        try:
            return events_between(self.service, project.root, stream, after, until)
        except LoopstateError as exc:
            log.error("%s: cannot read events %d-%d back: %s", stream, after + 1, until, exc.message)
            return []

    def open(self, sub: Subscription, head: Head) -> None:
        """Register ``sub`` (service thread): events after ``head`` will be delivered."""
        self.registry.add(sub, head)
        self._post(self._open_slot, sub, head.sequence)

    def close(self, sub_id: str) -> Subscription | ProjectSubscription:
        sub = self.registry.remove(sub_id)
        self._post(self._close_project if isinstance(sub, ProjectSubscription) else self._close_slot, sub)
        return sub

    def open_project(self, sub: ProjectSubscription) -> None:
        """Register a project topic (service thread): changes after its snapshot will be pushed."""
        self.registry.projects[sub.id] = sub
        self._post(self._open_project, sub)

    def caught_up(self, project: Project, stream: str, folded: Folded) -> None:
        key = (project.project_id, stream)
        if folded.head().sequence == 0 < self.registry.last_sequence.get(key, 0):
            # Re-chained to nothing (a purge of everything): no record tells the listener.
            self.registry.last_sequence[key] = 0
            for other in self.registry.by_stream.get(key, ()):
                self._post(self._on_events, other.id, [], True)

    def failed(self, project: Project, stream: str, error: LoopstateError) -> None:
        for other in self.registry.by_stream.get((project.project_id, stream), ()):
            self._post(self._on_error, other.id, error)

    # event loop ----------------------------------------------------------------

    def stop(self) -> None:
        """After ``shutdown``: no more notifications, no more watches."""
        self.stopped = True
        self.slots.clear()
        self.project_slots.clear()
        self.live.close()

    def _open_slot(self, sub: Subscription, delivered: int) -> None:
        if self.stopped:
            return
        self.slots[sub.id] = Slot(sub, delivered)
        self.live.follow(sub.project, sub.domain, sub.stream)  # and one catch-up: what landed since the snapshot
        for folder in {switch.parent for switch in sub.switches}:
            self.live.watch_files(folder, self._on_switch_file)
        self._check_switches(sub)

    def _check_switches(self, sub: Subscription) -> None:
        """Have the service thread halt the followed run if one of its kill switches stands (only a
        runs/status topic has switches, and its key is the run id)."""
        if sub.switches and sub.key is not None:
            self.worker.submit(halt_if_switched, self.service, sub.root, sub.key, sub.switches)

    def _close_slot(self, sub: Subscription) -> None:
        if self.slots.pop(sub.id, None) is not None:
            self.live.unfollow(sub.project, sub.stream)
            for folder in {switch.parent for switch in sub.switches}:
                self.live.unwatch_files(folder, self._on_switch_file)

    def release(self, sub_id: str) -> None:
        """The subscribe response is out: notifications may follow it."""
        project_sub = self.project_slots.get(sub_id)
        if project_sub is not None:
            project_sub.released = True
            self._compute_project(project_sub)
            return
        slot = self.slots.get(sub_id)
        if slot is not None:
            slot.released = True
            self._flush(slot)

    def discard(self, sub_id: str) -> None:
        """The subscribe response failed to go out: drop the subscription quietly."""
        if not self.stopped:
            self.worker.submit(self._discard, sub_id)

    def _discard(self, sub_id: str) -> None:
        try:
            self.close(sub_id)
        except LoopstateError:
            pass

    def _on_switch_file(self, folder: Path, name: str | None) -> None:
        """From the live engine: a file in a kill switch's folder changed (``name`` None: maybe any)."""
        if self.stopped:
            return
        for slot in list(self.slots.values()):
            sub = slot.sub
            if any(s.parent == folder and (name is None or s.name == name) for s in sub.switches):
                self._check_switches(sub)

    def store_changed(self, project_id: str, stream: str | None) -> None:
        """From the live engine (event loop): a shared store's stream changed; wake the project topics it concerns."""
        if self.stopped:
            return
        for project_sub in list(self.project_slots.values()):
            if project_sub.project.project_id == project_id and (stream is None or project_sub.concerns_stream(stream)):
                self._wake_project(project_sub.id)

    def _on_project_file(self, folder: Path, name: str | None) -> None:
        """From the live engine: a file a project topic depends on changed (a stream, a switch)."""
        if self.stopped:
            return
        for project_sub in list(self.project_slots.values()):
            if project_sub.concerns_file(folder, name):
                self._wake_project(project_sub.id)

    def _on_events(self, sub_id: str, events: list[dict[str, Any]], rewritten: bool) -> None:
        slot = self.slots.get(sub_id)
        if slot is not None:
            if rewritten:
                slot.rewrite(events, Head(stream=slot.sub.stream, sequence=0, hash=None))
            else:
                slot.add(events)
            self._flush(slot)

    def _on_skip(self, sub_id: str, head: Head, rewritten: bool) -> None:
        slot = self.slots.get(sub_id)
        if slot is not None:
            if rewritten:
                slot.rewrite([], Head(stream=slot.sub.stream, sequence=0, hash=None))
            slot.skip_to(head)
            self._flush(slot)

    def _on_error(self, sub_id: str, exc: LoopstateError) -> None:
        slot = self.slots.get(sub_id)
        if slot is not None and slot.fail(exc):
            self._flush(slot)

    def flush_all(self) -> None:
        """stdout drained: send what each slot holds."""
        for slot in list(self.slots.values()):
            self._flush(slot)
        for project_sub in list(self.project_slots.values()):
            self._flush_project(project_sub)

    # project topics (event loop) ---------------------------------------------------

    def _open_project(self, sub: ProjectSubscription) -> None:
        if self.stopped:
            return
        self.project_slots[sub.id] = sub
        sub.folders = sub.watched_folders()
        for folder in sub.folders:
            self.live.watch_files(folder, self._on_project_file)
        if self.live.watch_store(sub.project):  # a shared store: its runs and goals change on other machines
            self.store_watched.add(sub.id)
        sub.wanted = True  # whatever changed between the snapshot and the watch

    def _close_project(self, sub: ProjectSubscription) -> None:
        if self.project_slots.pop(sub.id, None) is not None:
            for folder in sub.folders:
                self.live.unwatch_files(folder, self._on_project_file)
            if sub.id in self.store_watched:
                self.store_watched.discard(sub.id)
                self.live.unwatch_store(sub.project)

    def _wake_project(self, sub_id: str) -> None:
        sub = self.project_slots.get(sub_id)
        if sub is not None:
            sub.wanted = True
            self._compute_project(sub)

    def _compute_project(self, sub: ProjectSubscription) -> None:
        """Recompute the snapshot once for every wake since the last computation began."""
        if self.stopped or not sub.released or sub.computing or not sub.wanted:
            return
        sub.computing, sub.wanted = True, False
        future = self.loop.run_in_executor(self.worker, snapshot_of, self.service, sub.root, sub.view)
        future.add_done_callback(lambda f: self._project_done(sub, f))

    def _project_done(self, sub: ProjectSubscription, future: asyncio.Future) -> None:
        sub.computing = False
        if self.project_slots.get(sub.id) is not sub:
            return
        exc = future.exception()
        if exc is not None:
            if not sub.errored:
                sub.error = exc if isinstance(exc, LoopstateError) else LoopstateError(
                    ErrorCode.INTERNAL_ERROR, f"the projection could not be computed: {type(exc).__name__}: {exc}")
            sub.errored, sub.pending = True, None
        else:
            snapshot, digest = future.result()
            if digest != sub.last_hash or sub.errored:
                sub.pending = (snapshot, digest, sub.errored)
            sub.errored = False
        self._flush_project(sub)
        self._compute_project(sub)

    def _flush_project(self, sub: ProjectSubscription) -> None:
        if not sub.released or self.is_paused():
            return
        if sub.error is not None:
            exc, sub.error = sub.error, None
            self.send(methods.STREAM_ERROR, msgspec.to_builtins(StreamErrorNotification(
                subscription_id=sub.id, topic=sub.topic,
                error=ErrorData(code=exc.code.value, details=msgspec.to_builtins(exc.details, enc_hook=str)),
                message=exc.message,
            )))
        if sub.pending is None:
            return
        (snapshot, digest, rewritten), sub.pending = sub.pending, None
        previous, sub.sequence, sub.last_hash = sub.sequence, sub.sequence + 1, digest
        self.send(methods.CHANGED, msgspec.to_builtins(ChangedNotification(
            subscription_id=sub.id, topic=sub.topic, head=sub.head(sub.sequence, digest),
            previous_sequence=previous, snapshot=snapshot, rewritten=rewritten,
        )))

    def _flush(self, slot: Slot) -> None:
        if not slot.released or slot.computing or self.is_paused():
            return
        sub = slot.sub
        if slot.error is not None:
            exc, slot.error = slot.error, None
            self.send(methods.STREAM_ERROR, msgspec.to_builtins(StreamErrorNotification(
                subscription_id=sub.id, topic=sub.topic,
                error=ErrorData(code=exc.code.value, details=msgspec.to_builtins(exc.details, enc_hook=str)),
                message=exc.message,
            )))
        if slot.pending_head is None:
            return
        if sub.deliver == "events" and not slot.overflowed:
            head, events, previous = slot.pending_head, slot.pending_events, slot.delivered
            slot.clear_through(head.sequence)
            slot.errored = False
            self.send(methods.CHANGED, msgspec.to_builtins(ChangedNotification(
                subscription_id=sub.id, topic=sub.topic, head=head, previous_sequence=previous, events=events,
            )))
            return
        slot.computing = True
        future = self.loop.run_in_executor(self.worker, self._snapshot, sub)
        future.add_done_callback(lambda f: self._snapshot_done(slot, f))

    def _snapshot(self, sub: Subscription) -> tuple[Head, Any]:
        # From the state the news came with: the catch-up (or command) that announced it folded it already.
        folded, snapshot = self.live.view_now(sub.root, sub.domain.name, sub.view, sub.key)
        return folded.head(), msgspec.to_builtins(snapshot)

    def _snapshot_done(self, slot: Slot, future: asyncio.Future) -> None:
        slot.computing = False
        if self.slots.get(slot.sub.id) is not slot:
            return
        exc = future.exception()
        if exc is not None:
            if slot.fail(exc if isinstance(exc, LoopstateError) else LoopstateError(
                    ErrorCode.INTERNAL_ERROR, f"the projection could not be computed: {type(exc).__name__}: {exc}")):
                self._flush(slot)
            return
        head, snapshot = future.result()
        previous = slot.delivered
        if head.sequence > previous or slot.rewritten:
            slot.clear_through(head.sequence)
            rewritten, slot.rewritten, slot.errored = slot.rewritten, False, False
            self.send(methods.CHANGED, msgspec.to_builtins(ChangedNotification(
                subscription_id=slot.sub.id, topic=slot.sub.topic, head=head,
                previous_sequence=previous, snapshot=snapshot, rewritten=rewritten,
            )))
        elif slot.pending_head is not None:
            # The projection is behind what was announced: only a rewritten
            # stream (recover, purge) does that. Drop the stale pending state.
            log.warning("%s: head %d is behind pending %d", slot.sub.topic, head.sequence, slot.pending_head.sequence)
            slot.clear_through(previous)
            slot.pending_head, slot.pending_events, slot.overflowed = None, [], False
        self._flush(slot)
