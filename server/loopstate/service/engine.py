"""The one place commands are applied and projections are kept current.

For each (project, stream) the service keeps a Ledger and the domain state
folded from it. A command runs as: exclusive lock, catch up on what other
processes appended, idempotency check, the domain's pure ``decide``, one
durable append, fold, notify listeners. A query catches up under a shared lock
and asks the domain. Listeners hear about every new event exactly once, in
order, whether this process or another wrote it: as records while one catch-up
brings at most NEWS_LIMIT of them, past that as its first and last record and
count (``core/news.py``), so a server following a stream that grew by N events
never holds N records at once.

The optional steps each domain takes part in are declared, with no-op
defaults, in ``domains/base.Domain`` (the pure side) and
``service/lifecycle.Effects`` (the impure side); lifecycle.py lists them in
the order a command meets them.
"""

from __future__ import annotations

import datetime as dt
import threading
from pathlib import Path
from typing import TYPE_CHECKING, Any, Callable, cast

import msgspec

from loopstate_protocol.base import Command, Head, Query
from loopstate_protocol.errors import ErrorCode

from loopstate.core import snapshot
from loopstate.core.backend import LocalFile
from loopstate.core.clock import ClockFn, system_clock
from loopstate.core.errors import LoopstateError
from loopstate.core.idempotency import check_request_id, fingerprint
from loopstate.core.ids import IdFactory, random_uuid
from loopstate.core.lock import DEFAULT_TIMEOUT
from loopstate.core.nesting import check_command
from loopstate.core.news import News
from loopstate.core.project import Project
from loopstate.core.stores import open_store
from loopstate.core.stream import Record
from loopstate.domains.base import Context, Domain
from loopstate.service.lifecycle import NO_EFFECTS, Effects, Prepared, Prerequisite, command_tag
from loopstate.service.shared_stop import on_shared_store
from loopstate.service.tree_heads import grow_tree, grow_tree_in_store

if TYPE_CHECKING:
    from loopstate_protocol.project import ProjectCommand, ProjectQuery

Listener = Callable[[Project, str, News], None]

# What a domain takes from domains/base.Domain when it subclasses it (each has a default there).
OPTIONAL_STEPS = ("check", "fingerprint_params", "evolve_record", "decision", "replayed_refusal", "stream_prefixes")

# The most records of one catch-up (or one command) listeners get as a list; past it they
# get the News' bounds only. A subscriber owed more events than this gets the new state.
NEWS_LIMIT = 256


class Outcome(msgspec.Struct):
    """What one command did: its events, the new head, and whether it was a retry."""

    events: list[dict[str, Any]]
    head: Head
    replayed: bool


class Folded:
    """A ledger and the domain state folded from it."""

    def __init__(
        self, service: "Service | None", project: Project, domain: Domain, stream: str, *, snapshots: bool = True,
    ) -> None:
        self.domain = domain
        self.stream = stream
        self.state = domain.initial(stream)
        # The history found when the service first opens the stream is state, not
        # news: it is folded without being collected (listeners hear what is
        # appended after that), so a large stream's first open holds no event list.
        # A domain with a snapshot codec starts from its projection snapshot when one
        # matches the file, and leaves one beside each checkpoint it writes.
        codec = snapshot.codec_for(domain, stream, self._get_state, self._put_state) if snapshots else None
        # The stream's ledger from the project's store (core/stores.py: the local JSONL store unless
        # a store URL names another), through the storage contract (core/backend.py).
        self.ledger = open_store(project).open_ledger(
            stream, domain.layout, on_record=self._on_record, on_reset=self._on_reset, announce_history=False,
            snapshots=codec, news_limit=NEWS_LIMIT,
        )
        # The stream's local JSONL file, on the JSONL store (None on another): its Merkle tree grows beside it.
        self.local = self.ledger.stream if isinstance(self.ledger, LocalFile) else None

    def _get_state(self) -> Any:
        return self.state

    def _put_state(self, state: Any) -> None:
        self.state = state

    def _on_record(self, record: Record) -> None:
        self.state = self.domain.evolve_record(self.state, record)

    def _on_reset(self) -> None:
        self.state = self.domain.initial(self.stream)

    def head(self) -> Head:
        sequence, hash_ = self.ledger.head
        return Head(stream=self.stream, sequence=sequence, hash=hash_)


def _is_project(message: Command | Query) -> bool:
    """A ``project.*`` message (told by its tag, so a domain-only reader never imports the project module)."""
    tag = type(message).__struct_config__.tag
    return isinstance(tag, str) and tag.startswith("project.")


class Service:
    def __init__(
        self,
        *,
        data_dir: Path | None = None,
        clock: ClockFn = system_clock,
        new_id: IdFactory = random_uuid,
        lock_timeout: float = DEFAULT_TIMEOUT,
        domains: list[Domain] | None = None,
        snapshots: bool = True,
    ) -> None:
        self.data_dir = data_dir
        self.snapshots = snapshots  # start folds from projection snapshots (False: a full fold, `--no-snapshot`)
        self.clock = clock
        self.new_id = new_id
        self.lock_timeout = lock_timeout
        self._domains: dict[str, Domain] = {}
        self._effects: dict[str, Effects[Any] | None] = {}
        self._by_type: dict[type, Domain] = {}
        # Without an explicit list, every served domain, each imported when a message
        # first needs it: a short-lived reader of one domain pays for that domain alone.
        self._all_loaded = domains is not None
        for domain in domains or ():
            self._add_domain(domain)
        self._projects: dict[str, Project] = {}
        self._folded: dict[tuple[str, str], Folded] = {}
        self._listeners: list[Listener] = []
        self._lock = threading.RLock()

    def _add_domain(self, domain: Domain) -> None:
        from loopstate.service.registry import effects_for

        missing = [step for step in OPTIONAL_STEPS if not hasattr(domain, step)]
        if missing:
            raise TypeError(f"domain {domain.name!r} has no {', '.join(missing)}: subclass loopstate.domains.base.Domain, "
                            "which gives every optional step its default")
        self._domains[domain.name] = domain
        self._effects[domain.name] = effects_for(domain.name)
        for cls in (*domain.commands, *domain.queries):
            self._by_type[cls] = domain

    def _domain_named(self, name: str) -> Domain | None:
        domain = self._domains.get(name)
        if domain is None and not self._all_loaded:
            from loopstate.service.registry import load_domain

            with self._lock:
                domain = self._domains.get(name) or load_domain(name)
                if domain is not None and domain.name not in self._domains:
                    self._add_domain(domain)
        return domain

    @property
    def domains(self) -> dict[str, Domain]:
        """Every domain this service serves, by name (loading those not used yet)."""
        if not self._all_loaded:
            from loopstate.service.registry import DOMAIN_PACKAGES

            for name in DOMAIN_PACKAGES:
                self._domain_named(name)
            self._all_loaded = True
        return self._domains

    # plumbing ------------------------------------------------------------------

    def project(self, root: str) -> Project:
        project = Project(root, data_dir=self.data_dir, lock_timeout=self.lock_timeout)
        return self._projects.setdefault(project.project_id, project)

    def add_listener(self, listener: Listener) -> None:
        self._listeners.append(listener)

    def effects_of(self, domain: Domain) -> Effects[Any] | None:
        """The service-side glue bound to ``domain`` by the registry (None for a pure domain)."""
        return self._effects.get(domain.name)

    def _steps(self, domain: Domain) -> Effects[Any]:
        """The effects steps the engine calls: the domain's, or no-ops for a pure domain."""
        return self._effects.get(domain.name) or NO_EFFECTS

    def domain_of(self, message: Command | Query) -> Domain:
        domain = self._by_type.get(type(message))
        if domain is None and not self._all_loaded:
            tag = type(message).__struct_config__.tag
            if isinstance(tag, str) and self._domain_named(tag.split(".", 1)[0]) is not None:
                domain = self._by_type.get(type(message))
        if domain is None:
            raise LoopstateError(ErrorCode.INVALID_PARAMS, f"no domain serves {type(message).__name__}")
        return domain

    def folded(self, project: Project, domain: Domain, stream: str) -> Folded:
        key = (project.project_id, stream)
        folded = self._folded.get(key)
        if folded is None:
            folded = self._folded[key] = Folded(self, project, domain, stream, snapshots=self.snapshots)
        return folded

    def context(self, project: Project, request_id: str = "", now: dt.datetime | None = None) -> Context:
        return Context(
            now=self.clock() if now is None else now, new_id=self.new_id, project_id=project.project_id,
            project_root=project.root, request_id=request_id,
        )

    def read_context(self, project: Project, domain: Domain, state: Any) -> Context:
        """A read's context; the domain's effects may add what readers see beside the log
        (optional ``before_query``: runs, whether a kill switch stands; goals, the project's goal ids)."""
        return self._steps(domain).before_query(self, project, state, self.context(project))

    def _notify(self, project: Project, stream: str, news: News | None) -> None:
        if news:
            for listener in list(self._listeners):
                listener(project, stream, news)

    # the three verbs ---------------------------------------------------------------

    def execute(self, root: str, command: Command, request_id: str) -> Any:
        """Apply one command durably, or return the first result of its exact retry.

        A command whose effects ask for a prerequisite (a run created without a grant
        asks for its default grant) is applied in two steps, each a command of its own
        with its own lock: the prerequisite first, then this command again from a fresh
        catch-up. Between the two, nothing holds a lock; a crash there leaves the
        prerequisite durable and this command undone, and the exact retry of this
        command finds the prerequisite (its request id is derived, so it replays) and
        completes. The prerequisite is asked for only once this command, decided
        against it, would pass. A project command (``project.*``: no stream of its own)
        goes to ``service/project_commands``.
        """
        if _is_project(command):
            from loopstate.service import project_commands

            return project_commands.execute(self, root, cast("ProjectCommand", command), request_id)
        check_request_id(request_id)
        check_command(command)  # before anything walks it: fingerprint, domain rules, encoder
        domain = self.domain_of(command)
        domain.check(command, request_id)
        applied = self._apply(root, domain, command, request_id)
        if isinstance(applied, Outcome):
            return applied
        self.execute(root, applied.command, applied.request_id)
        again = self._apply(root, domain, command, request_id, now=applied.now)
        if isinstance(again, Prerequisite):
            raise LoopstateError(
                ErrorCode.INTERNAL_ERROR,
                f"{type(command).__name__} still asks for {type(again.command).__name__} after it was recorded",
            )
        return again

    def _apply(
        self, root: str, domain: Domain, command: Command, request_id: str, now: dt.datetime | None = None,
    ) -> Outcome | Prerequisite:
        """One pass under the stream's exclusive lock (service/lifecycle.py lists the steps)."""
        with self._lock:
            project = self.project(root)
            stream = domain.stream_for(command)
            fp = fingerprint(command_tag(command), domain.fingerprint_params(command))
            folded = self.folded(project, domain, stream)
            effects = self._steps(domain)
            records: list[Record] = []
            caught_up: News | None = None
            prepared: Prepared | None = None
            refusal: LoopstateError | None = None
            try:
                with folded.ledger.mutation() as tx:
                    caught_up = tx.caught_up
                    earlier = tx.earlier(request_id, fp)
                    replay = None if earlier is None else Outcome([r.event for r in earlier], folded.head(), replayed=True)
                    if replay is None:
                        prepared = effects.before_decide(self, project, folded.state, command,
                                                         self.context(project, request_id, now))
                        try:
                            if prepared.prerequisite is None:
                                decision = domain.decision(folded.state, command, prepared.ctx)
                                refusal = decision.refusal
                                records = tx.append(decision.events, request_id=request_id, fp=fp) if decision.events else []
                                effects.after_append(self, project, folded, records, prepared)
                                if records and folded.local is not None:
                                    grow_tree(project, folded.local, records)
                                elif records:
                                    grow_tree_in_store(project, open_store(project), stream, domain.layout, records)
                        finally:
                            effects.release(prepared)
            finally:
                # Others' events first read under this lock: heard before ours, even when ours is refused.
                self._notify(project, stream, caught_up)
            if replay is not None:
                outcome = effects.after_commit(self, project, command, replay, None)
                refusal = domain.replayed_refusal(command, outcome.events)
            else:
                assert prepared is not None
                if prepared.prerequisite is not None:
                    return prepared.prerequisite
                self._notify(project, stream, News(NEWS_LIMIT, records))
                outcome = Outcome([r.event for r in records], folded.head(), replayed=False)
                outcome = effects.after_commit(self, project, command, outcome, prepared)
            if refusal is not None:
                # A durable safety append instead of the requested work (a kill switch halt): refused.
                raise LoopstateError(refusal.code, refusal.message, **refusal.details, events=outcome.events)
            return outcome

    def query(self, root: str, query: Query, *, progress: Callable[[str], Any] | None = None) -> Any:
        """One read; a project query (``project.*``) goes to ``service/project_reads`` (``progress``: verify's)."""
        if _is_project(query):
            from loopstate.service import project_reads

            with self._lock:
                return project_reads.answer(self, root, cast("ProjectQuery", query), progress=progress)
        with self._lock:
            project = self.project(root)
            domain = self.domain_of(query)
            folded = self.refresh(project, domain, domain.stream_for(query))
            return domain.query(folded.state, query, self.read_context(project, domain, folded.state))

    def view(self, root: str, domain_name: str, view: str, key: str | None, *, catch_up: bool = True) -> tuple[Folded, Any]:
        """The current projection behind a subscription topic, after catching up (``catch_up=False``: from the
        state already folded, for a notification of what a catch-up just brought; a stream not open yet is read)."""
        with self._lock:
            project = self.project(root)
            domain = self._domain_named(domain_name)
            if domain is None or view not in domain.views:
                raise LoopstateError(
                    ErrorCode.INVALID_PARAMS,
                    f"unknown topic {domain_name}/{view}; topics are "
                    + ", ".join(f"{d.name}/{v}" for d in self.domains.values() for v in d.views),
                )
            stream = domain.stream_for_view(view, key)
            known = self._folded.get((project.project_id, stream))
            folded = self.refresh(project, domain, stream) if catch_up or known is None else known
            return folded, domain.view(folded.state, view, key, self.read_context(project, domain, folded.state))

    def compact(self, root: str, streams: list[str] | None = None) -> list[tuple[Head, bool]]:
        """``loopstate compact``: for each stream (default: every stream of the project), catch
        up under the exclusive lock and write its checkpoint and projection snapshot now,
        instead of at the next checkpoint an append is due. Returns each stream's head and
        whether a snapshot was written (not for a stream whose domain keeps none)."""
        with self._lock:
            project = self.project(root)
            shared = on_shared_store(project.root)  # a shared store's streams need no folder on this machine
            known = open_store(project).stream_names() if shared or project.exists() else []
            if not known:
                raise LoopstateError(ErrorCode.NOT_FOUND, f"no loopstate store for {project.root}; nothing to compact")
            for name in streams or ():
                if name not in known:
                    raise LoopstateError(
                        ErrorCode.NOT_FOUND, f"no stream {name!r} in this project; its streams are " + ", ".join(known),
                        stream=name,
                    )
            done = []
            for name in streams or known:
                domain = self._domain_of_stream(name)
                folded = self.folded(project, domain, name)
                caught_up: News | None = None
                try:
                    with folded.ledger.mutation() as tx:
                        caught_up = tx.caught_up
                        written = folded.ledger.save_snapshot()
                finally:
                    self._notify(project, name, caught_up)
                done.append((folded.head(), written))
            return done

    def snapshot_idle(self, busy: Callable[[], bool]) -> list[str]:
        """For a long-lived server with nothing else to do: write the projection snapshot of
        each stream it holds whose tail since its last snapshot passed the writers' threshold
        (``Ledger.snapshot_behind``: others appended, or it started from an old snapshot),
        so the next cold reader folds a short tail. Checks ``busy()`` before each stream and
        stops as soon as a request waits; each write is a mutation's lock hold (the snapshot
        file itself is written after the release). Returns the streams written."""
        written = []
        for folded in list(self._folded.values()):
            if busy():
                break
            if not folded.ledger.snapshot_behind():
                continue
            with self._lock:
                caught_up: News | None = None
                try:
                    with folded.ledger.mutation() as tx:
                        caught_up = tx.caught_up
                        if folded.ledger.snapshot_behind() and folded.ledger.save_snapshot(after_release=True):
                            written.append(folded.stream)
                except LoopstateError:
                    continue  # a broken or busy stream: the next request that reads it names it
                finally:
                    self._notify(folded.ledger.project, folded.stream, caught_up)
        return written

    def _domain_of_stream(self, stream: str) -> Domain:
        prefix = stream.split(".", 1)[0]
        for domain in self.domains.values():
            if prefix in domain.stream_prefixes:
                return domain
        raise LoopstateError(
            ErrorCode.NOT_FOUND, f"no domain owns stream {stream!r}; was it written by a newer loopstate?", stream=stream,
        )

    def refresh(self, project: Project, domain: Domain, stream: str) -> Folded:
        """Catch one stream up with other processes' appends; listeners hear of them."""
        with self._lock:
            folded = self.folded(project, domain, stream)
            news = folded.ledger.catch_up()
            self._steps(domain).after_refresh(self, project, folded)
            self._notify(project, stream, news)
            return folded
