"""The intent domain's impure glue: private sessions and purge re-chaining.

Private sessions. A private task's semantic events live only in this
process's memory (``PrivateMemory``); the only durable trace is a control
file ``<project>/private-sessions/<host_session_hash>.json`` holding schema
version, project id, task id, the hashed host session id, mode and time, and
no statement or excerpt. Session/task ownership is one-to-one and checked by
compare-and-set under the intent stream's exclusive lock. After a restart the
control is a recovery handle (``intent.private_recover``). Re-enabling appends
the durable event and removes the control under the same lock; if the process
dies in between, the exact retry (or any later mutation) finishes the cleanup.

Purge. A user-confirmed purge of one claim or one task rewrites the intent
stream under the exclusive lock: the kept events are re-chained from sequence
1 and written with an atomic replace, quarantine summaries lose their hashes,
the checkpoint and the projection snapshot (which holds the folded claims) are
dropped, the task's controls are removed, and a purge record keeps only
counts, sequences and the new head (nothing of what was removed). The record
is made durable before the stream is replaced, and marked done
after: a purge cut short by a crash is finished by its retry. Readers notice
the new file identity and fold again from the start.
"""

from __future__ import annotations

import os
import weakref
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING, Any

import msgspec

from loopstate_protocol import intent as p
from loopstate_protocol.errors import ErrorCode

from loopstate.core import canonical, checkpoint, quarantine, recordlog, safefs, snapshot
from loopstate.core.backend import ReadsAt
from loopstate.core.chain import ChainError, Position, check_line, rebatch, seal
from loopstate.core.clock import format_time
from loopstate.core.errors import LoopstateError
from loopstate.core.idempotency import fingerprint
from loopstate.core.project import Project
from loopstate.core.stores import open_store
from loopstate.domains.base import Context
from loopstate.domains.intent import retired, rules
from loopstate.domains.intent.decide import HANDLED_IN_MEMORY, PRIVATE_DECISION, REENABLE
from loopstate.domains.intent.records import SCHEMA_VERSION, STREAM, Task
from loopstate.domains.intent.state import IntentState
from loopstate.domains.intent.wording import op
from loopstate.service import tree_heads
from loopstate.service.lifecycle import Effects, Prepared, command_tag
from loopstate.service.shared_stop import on_shared_store

if TYPE_CHECKING:
    from loopstate_protocol.base import Command

    from loopstate.core.stream import Record
    from loopstate.service.engine import Folded, Outcome, Service

CONTROL_DIR = "private-sessions"
PURGE_LOG = Path("purges") / f"{STREAM}.jsonl"


def session_hash(host_session_id: str, *, stored: bool = True) -> str:
    """The control file's name: a domain-separated hash, never the host's id itself (``stored``: the
    control is about to be written, so the id is checked as rules.opaque_id checks a stored one)."""
    value = rules.opaque_id(host_session_id, "host_session_id", stored=stored)
    return canonical.sha256_hex(("intent-session-v1\0" + value).encode("utf-8"))


# --- retired claims, read back from the stream ------------------------------------------


LINE_READ = 4096  # most records are one read; a longer line doubles the read until its newline


class StreamRecords:
    """A verified read of one record of the intent stream by its place (the state's ``reader``).

    A retired claim is kept as the places of the records that added and
    retired it (domains/intent/retired.py); the audit views, exports and
    refusals read them back here. The line is checked as the chain check
    does (core/chain.check_line: canonical form, its hash over its content),
    and that hash must be the one the fold kept: a byte changed under a
    retired claim since the fold is reported as CORRUPT_LEDGER, never shown.
    A stream replaced by a recover or a purge resets the folded state, so a
    place never points into another file's lines.
    """

    def __init__(self, name: str, layout: Any, line_at: Callable[[int], bytes | None]) -> None:
        self._name, self._layout, self._line_at = name, layout, line_at

    @classmethod
    def of_file(cls, stream: Any, layout: Any) -> StreamRecords:
        """Records read from the stream's local JSONL file (the local store)."""
        path, base, name = stream.path, stream.base, stream.name

        def line_at(offset: int) -> bytes | None:
            fd = safefs.open_read(path, base)
            if fd is None:
                raise ChainError(name, offset, None, "the stream is gone, but the folded state holds claims read from it")
            try:
                return _line_at(fd, offset)
            finally:
                os.close(fd)

        return cls(name, layout, line_at)

    @classmethod
    def of_store(cls, store: ReadsAt, name: str, layout: Any) -> StreamRecords:
        """Records read from a store that reads a line back by its place (``ReadsAt``: PostgreSQL)."""
        return cls(name, layout, lambda offset: store.line_at(name, offset))

    def __call__(self, offset: int, digest: bytes) -> dict[str, Any]:
        line = self._line_at(offset)
        if line is None:
            raise ChainError(self._name, offset, None, "the record of a retired claim is no longer where the stream had it")
        try:
            head = canonical.decode(line)
            at = Position(offset, head[self._layout.sequence_field] - 1, head[self._layout.prev_field])
        except Exception:  # not JSON, not an object, no sequence: check_line words it
            at = Position(offset, 0, None)
        event = check_line(line, self._layout, at, self._name)
        if retired.digest_of(event[self._layout.hash_field]) != digest:
            raise ChainError(
                self._name, offset, event.get("sequence"), "the record of a retired claim is not the one its hash chain had",
            )
        return event


def _line_at(fd: int, offset: int) -> bytes | None:
    """The line that starts at ``offset`` (without its newline); None when the file ends before one does."""
    data, size = b"", LINE_READ
    while True:
        chunk = os.pread(fd, size, offset + len(data))
        if not chunk:
            return None
        end = chunk.find(b"\n")
        if end >= 0:
            return data + chunk[:end]
        data, size = data + chunk, size * 2


def _attach_reader(state: IntentState, folded: Any) -> None:
    """The state's reader of retired claims: the local file, else the store by place; a store that can do
    neither leaves no reader, and asking for a retired claim then says so (domains/intent/state.py)."""
    if folded.local is not None:
        state.reader = StreamRecords.of_file(folded.local, folded.domain.layout)
        return
    store = open_store(folded.ledger.project)
    state.reader = StreamRecords.of_store(store, folded.stream, folded.domain.layout) if isinstance(store, ReadsAt) else None


# --- in-memory private tasks ---------------------------------------------------------


class PrivateTask(msgspec.Struct):
    task_id: str
    session: str
    state: IntentState
    requests: dict[str, tuple[str, list[dict[str, Any]]]] = msgspec.field(default_factory=dict)


class PrivateMemory:
    """One project's private tasks in this process; never written anywhere."""

    def __init__(self) -> None:
        self.tasks: dict[str, PrivateTask] = {}

    def states(self) -> dict[str, IntentState]:
        return {task_id: task.state for task_id, task in self.tasks.items()}

    def apply(self, task: PrivateTask, events: list[dict[str, Any]]) -> list[dict[str, Any]]:
        from loopstate.domains.intent.evolve import evolve

        out = []
        for event in events:
            event = {**event, "sequence": task.state.sequence + 1}
            evolve(task.state, event)
            out.append(event)
        return out

    def find_request(self, request_id: str) -> PrivateTask | None:
        return next((t for t in self.tasks.values() if request_id in t.requests), None)


def _empty_private(task_id: str, session: str, project_id: str, started_at: str) -> PrivateTask:
    state = IntentState()
    state.tasks[task_id] = Task(task_id=task_id, project_id=project_id, mode="private", started_at=started_at)
    return PrivateTask(task_id=task_id, session=session, state=state)


# --- control files -------------------------------------------------------------------


def control_path(project: Project, session: str) -> Path:
    return project.dir / CONTROL_DIR / f"{session}.json"


CONTROL_FIELDS = {"schema_version", "project_id", "task_id", "host_session_hash", "mode", "updated_at"}


def read_control(project: Project, session: str) -> dict[str, Any] | None:
    """A control file, checked: a malformed or newer one stops the mutation, never guessed at."""
    path = control_path(project, session)
    data = safefs.read_file(path, project.dir) if project.exists() else None
    if data is None:
        return None
    try:
        control = canonical.decode(data)
    except Exception:
        control = None
    if isinstance(control, dict) and type(control.get("schema_version")) is int and control["schema_version"] > SCHEMA_VERSION:
        raise LoopstateError(
            ErrorCode.FUTURE_SCHEMA,
            f"private-session control {path.name} has schema_version {control['schema_version']}; upgrade loopstate to use it",
            path=str(path),
        )
    if not isinstance(control, dict) or set(control) != CONTROL_FIELDS or control.get("host_session_hash") != session \
            or type(control.get("schema_version")) is not int or control["schema_version"] != SCHEMA_VERSION \
            or control.get("mode") != "private":
        raise LoopstateError(
            ErrorCode.CORRUPT_LEDGER,
            f"private-session control {path.name} is malformed; remove it by hand (it holds no statement) "
            "after checking which task it protected",
            path=str(path),
        )
    return control


def list_controls(project: Project) -> list[dict[str, Any]]:
    folder = project.dir / CONTROL_DIR
    try:
        names = sorted(os.listdir(folder))
    except FileNotFoundError:
        return []
    out = []
    for name in names:
        if name.endswith(".json") and safefs.TEMP_MARK not in name:
            control = read_control(project, name[: -len(".json")])
            if control is not None:
                out.append(control)
    return out


def write_control(project: Project, session: str, task_id: str, now: str) -> None:
    record = {
        "schema_version": SCHEMA_VERSION, "project_id": project.project_id, "task_id": task_id,
        "host_session_hash": session, "mode": "private", "updated_at": now,
    }
    project.ensure()  # written before the task's first event: a first command may find no project folder yet
    safefs.ensure_dir(project.dir / CONTROL_DIR, project.dir)
    safefs.atomic_write(control_path(project, session), project.dir, canonical.encode(record))


def remove_control(project: Project, session: str) -> None:
    safefs.unlink_durably(control_path(project, session), project.dir)


def is_private(project: Project, *, task_id: str | None = None, host_session_id: str | None = None) -> bool:
    """What a hook path checks before injecting anything: the session's association and the task's control.

    True when this host session owns a private task, or when ``task_id`` has a
    private control under any session. Reads only; creates nothing.
    """
    if host_session_id is not None and read_control(project, session_hash(host_session_id, stored=False)) is not None:
        return True
    return task_id is not None and any(c.get("task_id") == task_id for c in list_controls(project))


def read_purges(project: Project) -> list[dict[str, Any]]:
    """The purge records, oldest first; a line a crash cut short is skipped."""
    return recordlog.read(project.dir / PURGE_LOG, project.dir) if project.exists() else []


def purge_state(project: Project, request_id: str) -> str | None:
    """What the records say of the purge with this request id: None (no purge used
    it), "prepared" (recorded, but it may not have replaced the stream: a crash) or "done".
    A record from before records were marked (no ``state``) is done."""
    digest = _request_digest(request_id)
    states = {r.get("state", "done") for r in read_purges(project) if r.get("request_digest") == digest}
    return "done" if "done" in states else ("prepared" if states else None)


# --- the effects object ----------------------------------------------------------------


class _Pending(msgspec.Struct):
    """What before_decide arranged for the rest of one command."""

    command: Any
    kind: str  # memory | to_private | reenable | purge
    project: Project
    task_id: str | None = None
    session: str | None = None
    events: list[dict[str, Any]] = msgspec.field(default_factory=list)
    replayed: bool = False
    appended: bool = False
    request_id: str = ""
    memory: PrivateMemory | None = None


class IntentPrepared(Prepared):
    """An intent command's context, and what its later steps finish (None: nothing to finish)."""

    def __init__(self, ctx: Context, pending: _Pending | None = None) -> None:
        super().__init__(ctx)
        self.pending = pending


def _pending_of(prepared: Prepared | None) -> _Pending | None:
    return prepared.pending if isinstance(prepared, IntentPrepared) else None


class IntentEffects(Effects[IntentState]):
    """One per process; private memory is kept per Service (one serving process's store)."""

    def __init__(self) -> None:
        self._memory: weakref.WeakKeyDictionary[Service, dict[str, PrivateMemory]] = weakref.WeakKeyDictionary()

    def memory(self, service: Service, project: Project) -> PrivateMemory:
        return self._memory.setdefault(service, {}).setdefault(os.fspath(project.dir), PrivateMemory())

    # engine hooks ---------------------------------------------------------------

    def after_refresh(self, service: Service, project: Project, folded: Folded) -> None:
        """Re-attach this Service's private memory, and the tasks that have private controls, to the state.

        Reads only. A control that cannot be read does not stop the read; it
        marks the state so that hook context fails closed (injects nothing).
        """
        state = folded.state
        state.private = self.memory(service, project)
        _attach_reader(state, folded)
        try:
            state.private_controls = frozenset(c["task_id"] for c in list_controls(project))
            state.controls_unreadable = False
        except LoopstateError:
            state.private_controls, state.controls_unreadable = frozenset(), True

    def before_decide(
        self, service: Service, project: Project, state: IntentState, command: Command, ctx: Context,
    ) -> Prepared:
        # The command's own fields were checked by DOMAIN.check, before the store was opened.
        memory = self.memory(service, project)
        state.private = memory
        from loopstate.domains.intent import DOMAIN

        _attach_reader(state, service.folded(project, DOMAIN, STREAM))
        for folder in (CONTROL_DIR, "quarantine"):
            safefs.remove_orphan_temps(project.dir / folder)  # a crash mid atomic_write, under the lock
        self._finish_reenables(project, state, memory)
        extra = dict(ctx.extra)
        if isinstance(command, p.IntentPurge):
            return IntentPrepared(msgspec.structs.replace(ctx, extra=extra),
                                  self._check_purge(project, state, memory, command, ctx))
        if purge_state(project, ctx.request_id) is not None:
            # A purge appends nothing to the ledger, so the core cannot see that this id was used.
            raise LoopstateError(
                ErrorCode.REQUEST_ID_REUSED,
                f"request id {ctx.request_id!r} was already used for a purge; use a new request id",
                request_id=ctx.request_id,
            )
        if isinstance(command, p.IntentPrivateRecover):
            return self._recover(project, state, memory, command, ctx, extra)
        if isinstance(command, p.IntentTaskStart) and command.mode == "private":
            return self._start_private(project, state, memory, command, ctx, extra)
        if isinstance(command, p.IntentModeSet):
            return self._mode_set(project, state, memory, command, ctx, extra)
        task_id = getattr(command, "task_id", None)
        if isinstance(task_id, str):
            task = memory.tasks.get(task_id)
            if task is not None:
                return self._in_memory(project, memory, task, command, ctx, extra)
            self._refuse_foreign_private(project, task_id)
        return IntentPrepared(msgspec.structs.replace(ctx, extra=extra))

    def after_append(self, service: Service, project: Project, folded: Folded, records: list[Record],
                     prepared: Prepared) -> None:
        pending = _pending_of(prepared)
        if pending is None:
            return
        pending.appended = True
        if pending.kind == "reenable":
            assert pending.session is not None and pending.memory is not None and pending.task_id is not None
            remove_control(project, pending.session)
            pending.memory.tasks.pop(pending.task_id, None)

    def release(self, prepared: Prepared) -> None:
        """A switch to private whose durable mode_set did not happen takes its control back."""
        pending = _pending_of(prepared)
        if pending is not None and pending.kind == "to_private" and not pending.appended:
            assert pending.session is not None and pending.memory is not None and pending.task_id is not None
            remove_control(pending.project, pending.session)
            pending.memory.tasks.pop(pending.task_id, None)
            assert isinstance(prepared, IntentPrepared)
            prepared.pending = None

    def after_commit(self, service: Service, project: Project, command: Command, outcome: Outcome,
                     prepared: Prepared | None) -> Outcome:
        if outcome.replayed:
            if _reenables(command):
                self._cleanup_after_replay(service, project)
            return outcome
        pending = _pending_of(prepared)
        if pending is None:
            return outcome
        if pending.kind == "memory":
            return msgspec.structs.replace(outcome, events=pending.events, replayed=pending.replayed)
        if pending.kind == "purge":
            if pending.replayed:
                return msgspec.structs.replace(outcome, replayed=True)
            assert isinstance(command, p.IntentPurge)
            return self._purge(service, project, command, outcome, pending.request_id)
        return outcome

    # private sessions -------------------------------------------------------------

    def _refuse_foreign_private(self, project: Project, task_id: str) -> None:
        for control in list_controls(project):
            if control.get("task_id") == task_id:
                raise LoopstateError(
                    ErrorCode.PRIVACY_VIOLATION,
                    f"task {task_id} is private and its memory is not in this process; "
                    f"use {op('intent.private_recover')} with its host session (resume, durable_on, durable_off or delete)",
                    task_id=task_id,
                )

    def _owner_checks(self, project: Project, session: str, task_id: str) -> None:
        """Compare-and-set: one session owns one task and one task one session."""
        mine = read_control(project, session)
        if mine is not None:
            if mine.get("task_id") != task_id:
                raise LoopstateError(
                    ErrorCode.CONFLICT,
                    "this host session already owns another private task; re-enable or recover that one first",
                    task_id=task_id,
                )
            raise LoopstateError(
                ErrorCode.CONFLICT,
                f"task {task_id} already has a private control for this session; use {op('intent.private_recover')}",
                task_id=task_id,
            )
        for control in list_controls(project):
            if control.get("task_id") == task_id:
                raise LoopstateError(
                    ErrorCode.CONFLICT, f"task {task_id} is already private under another host session", task_id=task_id,
                )

    def _start_private(self, project: Project, state: IntentState, memory: PrivateMemory, command: p.IntentTaskStart,
                       ctx: Context, extra: dict[str, Any]) -> IntentPrepared:
        if command.host_session_id is None:
            raise rules.refuse("host_session_id: a private task needs the host session that owns it", field="host_session_id")
        session = session_hash(command.host_session_id)
        replay = self._replay(memory, command, ctx, extra, project)
        if replay is not None:
            return replay
        extra[PRIVATE_DECISION] = True
        decision_ctx = msgspec.structs.replace(ctx, extra=extra)
        from loopstate.domains.intent.decide import decide

        events = decide(IntentState(), command, decision_ctx)  # validates every field first
        task_id = events[0]["task_id"]
        if task_id in state.tasks:
            raise LoopstateError(ErrorCode.CONFLICT, f"task {task_id} was already started; use a new task id", task_id=task_id)
        self._owner_checks(project, session, task_id)
        write_control(project, session, task_id, format_time(ctx.now))
        task = PrivateTask(task_id=task_id, session=session, state=IntentState())
        memory.tasks[task_id] = task
        applied = memory.apply(task, events)
        task.requests[ctx.request_id] = (self._fingerprint(command), applied)
        pending = _Pending(command, "memory", project, task_id=task_id, session=session, events=applied)
        extra[HANDLED_IN_MEMORY] = True
        return IntentPrepared(msgspec.structs.replace(ctx, extra=extra), pending)

    def _replay(self, memory: PrivateMemory, command: Command, ctx: Context, extra: dict[str, Any],
                project: Project) -> IntentPrepared | None:
        task = memory.find_request(ctx.request_id)
        if task is None:
            return None
        fp, events = task.requests[ctx.request_id]
        if fp != self._fingerprint(command):
            raise LoopstateError(
                ErrorCode.REQUEST_ID_REUSED,
                f"request id {ctx.request_id!r} was already used for a different request; use a new request id",
                request_id=ctx.request_id,
            )
        pending = _Pending(command, "memory", project, task_id=task.task_id, events=events, replayed=True)
        extra[HANDLED_IN_MEMORY] = True
        return IntentPrepared(msgspec.structs.replace(ctx, extra=extra), pending)

    def _in_memory(self, project: Project, memory: PrivateMemory, task: PrivateTask, command: Command, ctx: Context,
                   extra: dict[str, Any]) -> IntentPrepared:
        replay = self._replay(memory, command, ctx, extra, project)
        if replay is not None:
            return replay
        from loopstate.domains.intent.decide import decide

        events = decide(task.state, command, msgspec.structs.replace(ctx, extra={**extra, PRIVATE_DECISION: True}))
        applied = memory.apply(task, events)
        task.requests[ctx.request_id] = (self._fingerprint(command), applied)
        pending = _Pending(command, "memory", project, task_id=task.task_id, events=applied)
        extra[HANDLED_IN_MEMORY] = True
        return IntentPrepared(msgspec.structs.replace(ctx, extra=extra), pending)

    def _mode_set(self, project: Project, state: IntentState, memory: PrivateMemory, command: p.IntentModeSet,
                  ctx: Context, extra: dict[str, Any]) -> IntentPrepared:
        task_id = rules.check_uuid(command.task_id, "task_id")
        private = memory.tasks.get(task_id)
        if command.actor != "user":
            raise rules.rule("only the user changes a task's mode; send the command with actor user", field="actor")
        if command.mode == "private":
            if private is not None:
                raise LoopstateError(ErrorCode.CONFLICT, f"task {task_id} is already private", task_id=task_id)
            self._refuse_foreign_private(project, task_id)
            from loopstate.domains.intent.decide import find_task

            task = find_task(state, task_id, ctx)
            if task.mode == "private":
                raise LoopstateError(
                    ErrorCode.PRIVACY_VIOLATION,
                    f"task {task_id} is private but has no control; recover it with {op('intent.private_recover')}",
                    task_id=task_id,
                )
            if command.host_session_id is None:
                raise rules.refuse("host_session_id: switching to private needs the owning host session", field="host_session_id")
            session = session_hash(command.host_session_id)
            self._owner_checks(project, session, task_id)
            # Control first: a crash before the durable mode_set leaves the task treated as private.
            write_control(project, session, task_id, format_time(ctx.now))
            memory.tasks[task_id] = _empty_private(task_id, session, project.project_id, format_time(ctx.now))
            pending = _Pending(command, "to_private", project, task_id=task_id, session=session, memory=memory)
            extra[PRIVATE_DECISION] = True
            return IntentPrepared(msgspec.structs.replace(ctx, extra=extra), pending)
        if private is not None:
            if command.host_session_id is None or session_hash(command.host_session_id) != private.session:
                raise LoopstateError(
                    ErrorCode.CONFLICT,
                    f"task {task_id} is private under another host session; only that session can re-enable it",
                    task_id=task_id,
                )
            extra[REENABLE] = {"task_id": task_id, "durable": task_id in state.tasks}
            pending = _Pending(command, "reenable", project, task_id=task_id, session=private.session, memory=memory)
            return IntentPrepared(msgspec.structs.replace(ctx, extra=extra), pending)
        self._refuse_foreign_private(project, task_id)
        return IntentPrepared(msgspec.structs.replace(ctx, extra=extra))

    def _recover(self, project: Project, state: IntentState, memory: PrivateMemory, command: p.IntentPrivateRecover,
                 ctx: Context, extra: dict[str, Any]) -> IntentPrepared:
        if command.actor != "user":
            raise rules.rule("only the user recovers a private session; send the command with actor user", field="actor")
        session = session_hash(command.host_session_id)
        control = read_control(project, session)
        if control is None or control.get("project_id") != project.project_id:
            raise LoopstateError(
                ErrorCode.NOT_FOUND, "no private-session control for this host session in this project; pass the host session id that started the private task", field="host_session_id",
            )
        task_id = control["task_id"]
        if command.action == "resume":
            if task_id in memory.tasks:
                raise LoopstateError(ErrorCode.CONFLICT, f"private task {task_id} is already active in this process", task_id=task_id)
            memory.tasks[task_id] = _empty_private(task_id, session, project.project_id, format_time(ctx.now))
            write_control(project, session, task_id, format_time(ctx.now))
            pending = _Pending(command, "memory", project, task_id=task_id, session=session)
            extra[HANDLED_IN_MEMORY] = True
            return IntentPrepared(msgspec.structs.replace(ctx, extra=extra), pending)
        extra[REENABLE] = {"task_id": task_id, "durable": task_id in state.tasks}
        pending = _Pending(command, "reenable", project, task_id=task_id, session=session, memory=memory)
        return IntentPrepared(msgspec.structs.replace(ctx, extra=extra), pending)

    def _finish_reenables(self, project: Project, state: IntentState, memory: PrivateMemory) -> None:
        """A control whose task the ledger already shows as durable on/off is leftover cleanup."""
        for control in list_controls(project):
            task = state.tasks.get(control["task_id"])
            if task is not None and task.mode in ("on", "off"):
                remove_control(project, control["host_session_hash"])
                memory.tasks.pop(task.task_id, None)

    def _cleanup_after_replay(self, service: Service, project: Project) -> None:
        from loopstate.domains.intent import DOMAIN

        folded = service.folded(project, DOMAIN, STREAM)
        with folded.ledger.mutation():
            self._finish_reenables(project, folded.state, self.memory(service, project))

    def _fingerprint(self, command: Command) -> str:
        return fingerprint(command_tag(command), rules.fingerprint_params(command))

    # purge ---------------------------------------------------------------------------

    def _check_purge(self, project: Project, state: IntentState, memory: PrivateMemory, command: p.IntentPurge,
                     ctx: Context) -> _Pending:
        if command.actor != "user" or not command.confirm:
            raise rules.rule(
                "a purge physically deletes data: only the user can do it, with confirm=true", field="confirm",
            )
        target_id = rules.check_uuid(command.id, "id")
        if on_shared_store(project.root):
            raise _purge_refused_on_shared_store(project)
        if command.target == "task":
            known = target_id in state.tasks or target_id in memory.tasks
        else:
            known = state.find_claim(target_id) is not None or target_id in state.candidates or any(
                t.state.find_claim(target_id) is not None for t in memory.tasks.values()
            )
        state_of_purge = purge_state(project, ctx.request_id)
        if state_of_purge == "done" and known:
            # The record keeps no digest of what was purged; a target that still
            # exists proves this is not the request that purged it.
            raise LoopstateError(
                ErrorCode.REQUEST_ID_REUSED,
                f"request id {ctx.request_id!r} already named another purge; use a new request id",
                request_id=ctx.request_id,
            )
        if state_of_purge is not None and not known:
            if state_of_purge == "prepared":  # the stream was replaced, the done mark lost: add it
                _record_purge(project, {"state": "done", "request_digest": _request_digest(ctx.request_id)})
            return _Pending(command, "purge", project, replayed=True)
        # A prepared record whose target is still there: a crash came before the stream was
        # replaced, and this retry does the purge (a target the purge removed cannot be known).
        if not known:
            raise LoopstateError(
                ErrorCode.NOT_FOUND, f"no {command.target} {target_id} in this project (already purged?)", id=target_id,
            )
        return _Pending(command, "purge", project, task_id=target_id, request_id=ctx.request_id)

    def _purge(self, service: Service, project: Project, command: p.IntentPurge, outcome: Outcome,
               request_id: str) -> Outcome:
        from loopstate.domains.intent import DOMAIN
        from loopstate.domains.intent.purge import (  # a purge is rare: not on every read
            confirmation_family,
            purge_events,
        )

        target_id = rules.check_uuid(command.id, "id")
        folded = service.folded(project, DOMAIN, STREAM)
        ledger = folded.ledger
        if folded.local is None:
            raise _purge_refused_on_shared_store(project)
        with ledger.mutation():
            stream = folded.local
            old_sequence = ledger.head[0]
            data = safefs.read_file(stream.path, project.dir)
            events = [canonical.decode(line) for line in (data or b"").split(b"\n") if line]
            kept, counts = purge_events(events, command.target, target_id)
            memory = self.memory(service, project)
            in_memory = target_id in memory.tasks or any(t.state.find_claim(target_id) is not None for t in memory.tasks.values())
            if counts.kept_events == len(events) and not counts.rewritten_events and not in_memory:
                raise LoopstateError(
                    ErrorCode.NOT_FOUND, f"no {command.target} {target_id} in this project (purged meanwhile?)", id=target_id,
                )
            position = Position()
            lines = []
            for fields in rebatch(kept):  # dropped and split events leave batches to mark again
                event, line = seal(fields, stream.layout, position)
                position = Position(position.offset + len(line), event["sequence"], event["event_hash"])
                lines.append(line)
            # Counts and heads only: no id, text or hash of anything removed (the old
            # head's hash is one). Durable before the stream changes, so a purge a crash
            # cut short is known to its retry, which finishes it.
            digest = _request_digest(request_id)
            _record_purge(project, {
                "schema_version": SCHEMA_VERSION, "state": "prepared", "purged_at": format_time(service.clock()),
                "target": command.target, **counts.summary(), "old_head_sequence": old_sequence,
                "new_head_sequence": position.sequence, "new_head_hash": position.hash, "request_digest": digest,
            })
            checkpoint.drop(stream)  # before the replace: the new file may get the old one's inode number
            # The projection snapshot holds the folded state, purged claims and all: a mismatched
            # one is never used, but its bytes would still be on disk.
            safefs.unlink_durably(snapshot.path_for(stream), project.dir)
            if data is not None:
                safefs.atomic_write(stream.path, project.dir, b"".join(lines))
                tree_heads.rechained(project, STREAM, lines, stream.layout.hash_field,
                                     f"at {format_time(service.clock())}: {old_sequence} events re-chained as "
                                     f"{position.sequence} ({command.target} removed)")
            self._scrub_quarantine(project)
            for control in list_controls(project):
                if control.get("task_id") in counts.removed_ids:
                    remove_control(project, control["host_session_hash"])
            for task in list(memory.tasks.values()):
                if task.task_id in counts.removed_ids:
                    memory.tasks.pop(task.task_id)
                else:
                    removed = set(counts.removed_ids)
                    if command.target == "claim":
                        # In memory too, a claim goes with its re-issues by a user review.
                        remembered = [e for _, events in task.requests.values() for e in events]
                        removed |= confirmation_family(remembered, target_id)
                    _forget_private_claim(task, removed)
            _record_purge(project, {"state": "done", "request_digest": digest})
        # Outside the lock: fold the re-chained stream again and tell subscribers.
        service.refresh(project, DOMAIN, STREAM)
        folded.state.private = self.memory(service, project)
        return msgspec.structs.replace(outcome, head=folded.head())

    def _scrub_quarantine(self, project: Project) -> None:
        """Quarantine keeps only lengths and reasons once a purge ran: a hash could confirm purged text."""
        entries = quarantine.entries(project.dir, STREAM)
        if not entries:
            return
        scrubbed = [
            {k: v for k, v in entry.items() if k not in ("sha256", "offset")} | {"scrubbed_by_purge": True}
            for entry in entries
        ]
        data = b"".join(canonical.encode(entry) + b"\n" for entry in scrubbed)
        safefs.atomic_write(quarantine.path_for(project.dir, STREAM), project.dir, data)


def _purge_refused_on_shared_store(project: Project) -> LoopstateError:
    """Why a purge is not done on a store without a local file, and what to do instead.

    A purge promises that the purged text is nowhere at rest. On a shared server the
    deleted rows live on in its write-ahead log, backups and replicas, and in the fold of
    every other machine serving the project: nothing a client can erase or re-chain, so
    the promise cannot be kept there and the command is refused before anything changes."""
    return LoopstateError(
        ErrorCode.INVALID_PARAMS,
        f"intent purge is refused on the shared store {open_store(project).url}: a purge must leave the text "
        "nowhere at rest, and on a shared server the deleted rows would live on in its write-ahead log, backups "
        "and replicas and in every other machine's copy, which loopstate cannot erase. Instead: `loopstate "
        "intent invalidate` takes the claim out of every view (it stays in the audit); private mode (`loopstate "
        "intent mode TASK private`) keeps what is said next off the shared store; to erase the text, the "
        "database's administrator removes the project's rows and their WAL and backups (docs/storage.md, "
        "*What works on PostgreSQL, and what is refused*)",
        store=open_store(project).url,
    )


def _forget_private_claim(task: PrivateTask, removed: set[str]) -> None:
    """Drop a purged claim (or candidate) from a private task's memory, with the requests that named it."""
    task.state.forget(removed)
    marks = [claim_id.encode() for claim_id in removed]
    task.requests = {
        rid: (fp, events) for rid, (fp, events) in task.requests.items()
        if not any(mark in canonical.encode(events) for mark in marks)
    }


def _record_purge(project: Project, record: dict[str, Any]) -> None:
    recordlog.append(project.dir / PURGE_LOG, project.dir, record)


def _request_digest(request_id: str) -> str:
    """Lets an exact retry of a purge be recognised without keeping the caller's text."""
    return canonical.sha256_hex(("intent-purge-request-v1\0" + request_id).encode("utf-8"))


def _reenables(command: Any) -> bool:
    if isinstance(command, p.IntentModeSet):
        return command.mode != "private"
    return isinstance(command, p.IntentPrivateRecover) and command.action != "resume"


EFFECTS = IntentEffects()
