"""The pygls server and its method table: each method decodes, calls the service, encodes.

Handlers are a few lines each. Params are decoded here with msgspec (pygls
would drop a request whose params its converter cannot build), every Service
call runs on one worker thread (so commands apply in arrival order and the
event loop never waits on a lock or an fsync), and results leave as plain
builtins (pygls cannot serialize a msgspec Struct).
"""

from __future__ import annotations

import asyncio
import logging
from concurrent.futures import ThreadPoolExecutor
from typing import Any, Callable

import msgspec
from lsprotocol import types
from pygls.exceptions import FeatureRequestError
from pygls.lsp.server import LanguageServer

from loopstate_protocol import PROTOCOL_VERSION, methods
from loopstate_protocol.errors import ErrorCode
from loopstate_protocol.messages import (
    ExecuteParams,
    ExecuteResult,
    LoopstateCapability,
    QueryParams,
    SubscribeParams,
    SubscribeResult,
    UnsubscribeParams,
    UnsubscribeResult,
)

from loopstate import __version__
from loopstate.core.errors import LoopstateError
from loopstate.rpc import project_topics
from loopstate.rpc.errors import decode_params, from_exception
from loopstate.rpc.kill_switch import switch_paths
from loopstate.rpc.protocol import LoopstateProtocol
from loopstate.rpc.subscriptions import Hub, Subscription, events_between, parse_topic
from loopstate.service.engine import Service

log = logging.getLogger("loopstate.rpc")

MAX_IN_FLIGHT = 64  # requests read but not answered; the reader waits beyond this
MAX_SINCE_EVENTS = 10_000  # events one subscribe with since may return
# Seconds without a request after which the server writes the projection snapshots its
# streams are due (``Service.snapshot_idle``). The check is armed by activity (a request,
# or news the service saw: another process's append to a followed stream) and runs once
# per quiet spell, so an idle server has no timer and wakes for nothing.
IDLE_SNAPSHOT_AFTER = 2.0


class LoopstateServer(LanguageServer):
    """A LanguageServer whose features are loopstate's methods."""

    capability_key = methods.CAPABILITY
    protocol: LoopstateProtocol  # pygls types it as the base protocol; protocol_cls below makes it this

    def __init__(self, service: Service) -> None:
        super().__init__(
            "loopstate", __version__, protocol_cls=LoopstateProtocol,
            text_document_sync_kind=types.TextDocumentSyncKind.None_,
        )
        self.service = service
        self.worker = ThreadPoolExecutor(max_workers=1, thread_name_prefix="loopstate-service")
        self.hub: Hub | None = None
        self.inflight: set[asyncio.Task] = set()
        self.room = asyncio.Event()  # set while fewer than MAX_IN_FLIGHT requests are in flight
        self.room.set()
        self.shutting_down = False
        self._last_request = 0.0  # loop time a request last started or ended
        self._idle_timer: asyncio.TimerHandle | None = None
        self._idle_running = False
        self._loop: asyncio.AbstractEventLoop | None = None  # set by the first arm, from the loop's thread
        for name, params_type, job in METHOD_TABLE:
            self.feature(name)(self._handler(name, params_type, job))

    def report_server_error(self, error: Exception, source: Any) -> None:
        """Out-of-band faults go to the log, not to a window/showMessage the client did not ask for.

        A request's error was already answered (and a fault logged with its
        traceback by ``errors.from_exception``), so only other sources are logged.
        """
        if source is not FeatureRequestError:
            log.error("%s: %s", getattr(source, "__name__", source), error)

    def capability(self) -> dict[str, Any]:
        return msgspec.to_builtins(LoopstateCapability(
            protocol_version=PROTOCOL_VERSION,
            domains=sorted(self.service.domains),
            topics=[*(f"{d.name}/{v}" for d in self.service.domains.values() for v in d.views), *project_topics.TOPICS],
            methods=list(methods.REQUESTS),
        ))

    async def finish_requests(self) -> None:
        """For ``shutdown``: refuse new requests, let the running ones answer, stop pushing."""
        self.shutting_down = True
        current = asyncio.current_task()
        running: set[asyncio.Future[Any]] = {t for t in self.inflight if t is not current}
        # pygls types its request futures as concurrent ones; a coroutine handler's is an asyncio Future.
        futures: list[object] = list(self.protocol._request_futures.values())
        running |= {f for f in futures if isinstance(f, asyncio.Future) and f is not current}
        if running:
            await asyncio.gather(*running, return_exceptions=True)
        await asyncio.sleep(0)  # their responses are sent from done-callbacks: let those run
        if self._idle_timer is not None:
            self._idle_timer.cancel()
        if self.hub is not None:
            self.hub.stop()

    def arm_idle_check(self) -> None:
        """Look for a quiet spell IDLE_SNAPSHOT_AFTER seconds from now, unless a check is armed already
        (on the loop's thread)."""
        if self._idle_timer is None and not self.shutting_down:
            self._loop = asyncio.get_running_loop()
            self._idle_timer = self._loop.call_later(IDLE_SNAPSHOT_AFTER, self._idle_check)

    def on_news(self, *_: Any) -> None:
        """A service listener (any thread): news may make snapshots due, so look again once things are quiet."""
        loop = self._loop
        if loop is not None and not loop.is_closed():
            loop.call_soon_threadsafe(self.arm_idle_check)

    def _idle_check(self) -> None:
        """IDLE_SNAPSHOT_AFTER seconds after activity: when no request is in flight and none came
        for that long, hand the service worker the idle snapshot job, and arm nothing more until
        the next activity; otherwise look again when the spell could be long enough.

        The worker runs one job at a time, so the job never runs beside a request's; it
        stops before each stream as soon as a request is in flight (``busy``), so a request
        that arrives meanwhile waits for at most one stream's snapshot capture."""
        loop = asyncio.get_running_loop()
        self._idle_timer = None
        if self.shutting_down:
            return
        quiet_for = loop.time() - self._last_request
        if self.inflight or quiet_for < IDLE_SNAPSHOT_AFTER:  # look again when this spell could be long enough
            self._idle_timer = loop.call_later(max(IDLE_SNAPSHOT_AFTER - quiet_for, 0.05) if not self.inflight
                                               else IDLE_SNAPSHOT_AFTER, self._idle_check)
        elif not self._idle_running:
            self._idle_running = True
            job = loop.run_in_executor(self.worker, self.service.snapshot_idle, self._busy)
            job.add_done_callback(self._idle_done)

    def _busy(self) -> bool:
        return bool(self.inflight) or self.shutting_down

    def _idle_done(self, job: asyncio.Future) -> None:
        self._idle_running = False
        if not job.cancelled() and job.exception() is not None:
            log.error("idle snapshots: %s", job.exception())
        elif not job.cancelled() and job.result():
            log.info("idle snapshots written: %s", ", ".join(job.result()))

    def _handler(self, name: str, params_type: type, job: Callable[..., Any]):
        async def handle(params: Any) -> Any:
            task = asyncio.current_task()
            assert task is not None  # pygls runs each request's coroutine as a task of the loop
            self.inflight.add(task)
            loop = asyncio.get_running_loop()
            self._last_request = loop.time()
            self.arm_idle_check()
            if len(self.inflight) >= MAX_IN_FLIGHT:
                self.room.clear()
            try:
                decoded = decode_params(name, params, params_type)
                reply = await loop.run_in_executor(self.worker, job, self, decoded)
            except BaseException as exc:  # noqa: BLE001 - every fault becomes an answer
                raise from_exception(name, exc) from None
            finally:
                self.inflight.discard(task)
                self._last_request = loop.time()
                if len(self.inflight) < MAX_IN_FLIGHT:
                    self.room.set()
            if isinstance(reply, Reply):
                if reply.on_sent is not None:
                    self.protocol.after_response[self.protocol.msg_id] = reply.on_sent
                return reply.result
            return reply

        handle.__name__ = name.replace("/", "_")
        return handle


class Reply:
    """A result plus what to do once it has been written (for ``subscribe``)."""

    __slots__ = ("result", "on_sent")

    def __init__(self, result: Any, on_sent: Callable[[bool], None] | None) -> None:
        self.result = result
        self.on_sent = on_sent


# The jobs: run on the service thread, return plain builtins. -----------------------------

def _execute(server: LoopstateServer, p: ExecuteParams) -> Any:
    outcome = server.service.execute(p.root, p.command, p.request_id)
    return msgspec.to_builtins(ExecuteResult(events=outcome.events, head=outcome.head, replayed=outcome.replayed,
                                             project=getattr(outcome, "project", None)))


def _query(server: LoopstateServer, p: QueryParams) -> Any:
    return msgspec.to_builtins(server.service.query(p.root, p.query))


def _subscribe(server: LoopstateServer, p: SubscribeParams) -> Reply:
    hub = server.hub
    assert hub is not None
    if project_topics.is_project_topic(p.topic):
        return _subscribe_project(server, hub, p)
    domain_name, view, key = parse_topic(p.topic)
    if p.since is not None and p.since < 0:
        raise LoopstateError(ErrorCode.INVALID_PARAMS, f"since must be a sequence >= 0, not {p.since}")
    folded, snapshot = server.service.view(p.root, domain_name, view, key)
    head = folded.head()
    project = server.service.project(p.root)
    domain = server.service.domains[domain_name]
    events = None
    if p.since is not None:
        if p.since > head.sequence:
            raise LoopstateError(
                ErrorCode.INVALID_PARAMS,
                f"since {p.since} is past the head of {folded.stream!r} ({head.sequence}): the stream was "
                "rewritten (recover, purge) or belongs to another store; subscribe without since to start over",
                since=p.since, head=head.sequence,
            )
        if head.sequence - p.since > MAX_SINCE_EVENTS:
            raise LoopstateError(
                ErrorCode.INVALID_PARAMS,
                f"{head.sequence - p.since} events since {p.since} are more than one subscribe returns "
                f"({MAX_SINCE_EVENTS}); subscribe without since to start from the snapshot, or read them "
                "with `loopstate log`",
                since=p.since, head=head.sequence,
            )
        events = events_between(server.service, p.root, folded.stream, p.since, head.sequence)
    sub = Subscription(
        id=hub.registry.new_id(), topic=p.topic, root=p.root, project=project, domain=domain,
        view=view, key=key, stream=folded.stream, deliver=p.deliver,
        switches=switch_paths(domain_name, view, project.root),
    )
    result = msgspec.to_builtins(SubscribeResult(
        subscription_id=sub.id, topic=p.topic, head=head, snapshot=snapshot, events=events,
    ))
    hub.open(sub, head)
    return Reply(result, lambda sent: hub.release(sub.id) if sent else hub.discard(sub.id))


def _subscribe_project(server: LoopstateServer, hub: Hub, p: SubscribeParams) -> Reply:
    """``project/<view>``: its snapshot is the project query's result; snapshots only (module project_topics)."""
    view = project_topics.parse(p.topic)
    if p.since is not None:
        raise LoopstateError(ErrorCode.INVALID_PARAMS, f"{p.topic} is not a stream of events: subscribe without since "
                             "(the snapshot is the whole state)", topic=p.topic)
    if p.deliver != "snapshot":
        raise LoopstateError(ErrorCode.INVALID_PARAMS, f"{p.topic} delivers snapshots only; subscribe with "
                             "deliver \"snapshot\" (or follow each stream's own topic for its events)", topic=p.topic)
    project = server.service.project(p.root)
    snapshot, digest = project_topics.snapshot_of(server.service, p.root, view)
    sub = project_topics.ProjectSubscription(
        id=hub.registry.new_id(), topic=p.topic, root=p.root, project=project, view=view,
        switches=project_topics.switch_files(project.root, server.service.data_dir), sequence=1, last_hash=digest,
    )
    result = msgspec.to_builtins(SubscribeResult(subscription_id=sub.id, topic=p.topic, head=sub.head(1, digest),
                                                 snapshot=snapshot))
    hub.open_project(sub)
    return Reply(result, lambda sent: hub.release(sub.id) if sent else hub.discard(sub.id))


def _unsubscribe(server: LoopstateServer, p: UnsubscribeParams) -> Any:
    assert server.hub is not None
    server.hub.close(p.subscription_id)
    return msgspec.to_builtins(UnsubscribeResult(subscription_id=p.subscription_id))


METHOD_TABLE: tuple[tuple[str, type, Callable[..., Any]], ...] = (
    (methods.EXECUTE, ExecuteParams, _execute),
    (methods.QUERY, QueryParams, _query),
    (methods.SUBSCRIBE, SubscribeParams, _subscribe),
    (methods.UNSUBSCRIBE, UnsubscribeParams, _unsubscribe),
)
