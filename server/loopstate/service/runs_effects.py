"""The impure glue of the runs domain: config, kill switches, the grant lock, projections.

The domain decides from plain values; this module gathers them at every
command boundary and writes the projections kept beside the log. (The
domain's decide side is imported where a command needs it: a status read,
which a tool-call hook of a bound session makes, loads only the fold.)

* config: ``<project>/.loopstate/config.json`` when present (validated; an
  invalid file refuses run mutations, fail closed), else the defaults.
* kill switches: each configured path (default ``<project>/.loopstate/STOP``)
  is probed with lstat at every run command. Present in any form, or
  unreadable (permission, a file where a folder should be), means halt; a
  switch never authorizes anything. ``runs.stop`` creates the first one.
* the per-grant cooperative lock: the lock file of the grant's stream
  (``grants.<grant_id>``). Revocation takes it exclusively (the engine's
  mutation lock on that stream) through the grant update; every run command
  holds it shared from its final grant read through its durable append, so a
  revocation and an intent are linearized at that lock and land on exactly
  one side. Lock order is always run stream, then grant: no cycle.
* the default local authority: a create that names no grant gets the
  narrow default grant (``grants.default_grant``). It is its own
  command, recorded before the create and never inside it: under the run
  stream's lock the create is first decided against the grant it would get
  (pure; a refused create leaves no grant), then the lock is given back and
  the grant is asked for as the create's prerequisite (service/lifecycle.py).
  The engine records it as a command of its own (the grant stream's lock, a
  request id derived from the grant id), then applies the create again. A
  crash between the two leaves the grant durable and no run; the create's
  exact retry finds the grant (same run id, same grant id) and binds to it.
* readers: a run's status carries the kill switch state (``before_query``).
* projections: ``runs/<run_id>/run.json``, ``lease.json``, ``issues.json`` and
  ``evidence/<evidence_id>.json``, and ``grants/<grant_id>.json``, under the
  project's store folder, written atomically from the folded log after every
  append and rewritten before a mutation when missing or stale (evidence
  records never change, so only a missing one is rewritten). They are never
  read back as truth, so they are replaced atomically without fsync: after a
  crash the log is durable and the boundary rewrites whatever projection
  the crash left behind.
"""

from __future__ import annotations

import errno
import os
from pathlib import Path
from typing import TYPE_CHECKING, Any

import msgspec

from loopstate_protocol import runs as proto
from loopstate_protocol.errors import ErrorCode

from loopstate.core import safefs
from loopstate.core.clock import format_time
from loopstate.core.errors import LoopstateError
from loopstate.core.ids import derived_uuid, random_uuid
from loopstate.core.killswitch import enclosing_switches, probe_kill_switches, switch_path
from loopstate.core.lock import StoreLock
from loopstate.core.project import Project
from loopstate.core.stores import open_store
from loopstate.core.stream import Record
from loopstate.domains.base import Context
from loopstate.domains.runs import records
from loopstate.domains.runs.config import CONFIG_PATH, default_config
from loopstate.domains.runs.state import GrantState, RunState
from loopstate.service import shared_stop
from loopstate.service.lifecycle import Effects, Prepared, Prerequisite
from loopstate.service.run_projections import PROJECTIONS

if TYPE_CHECKING:
    from loopstate_protocol.base import Command

    from loopstate.service.engine import Folded, Outcome, Service


def load_config(root: str) -> dict[str, Any]:
    """The project's runs config, validated, or the defaults when there is none."""
    path = Path(root) / CONFIG_PATH
    try:
        fd = os.open(path, os.O_RDONLY | os.O_NOFOLLOW | os.O_CLOEXEC)
    except (FileNotFoundError, NotADirectoryError):
        return default_config()
    except OSError as exc:
        raise LoopstateError(ErrorCode.VALIDATION_FAILED, f"cannot read {path}: {exc.strerror}; fix or remove it",
                             path=str(path)) from None
    with os.fdopen(fd, "rb") as handle:
        data = handle.read()
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError:
        raise LoopstateError(ErrorCode.VALIDATION_FAILED, f"{path} is not UTF-8 text; save it as UTF-8 JSON or remove it",
                             path=str(path), field="$", rule="json") from None
    try:
        config = records.to_dict(records.validate("config", records.parse_json(text, str(path))))
        _state_root_inside(root, config["state_root"])
    except LoopstateError as error:
        raise LoopstateError(error.code, f"{error.message} (in {path}; fix it or remove it to use the defaults)",
                             **{**error.details, "path": str(path)}) from None
    return config


def _state_root_inside(root: str, state_root: str) -> None:
    """The spelling is checked by the record; this checks where it leads: a link out of the project is refused."""
    project = os.path.realpath(root)
    target = os.path.realpath(os.path.join(project, state_root))
    if os.path.commonpath([project, target]) != project:
        raise records.refuse("config", "$.state_root", "path_inside_project",
                             f"{state_root!r} leads to {target}, outside the project (through a link); point it inside")


def standing_switch_files(root: str) -> tuple[list[str], str | None]:
    """Every configured switch file that stands (present or unreadable), the enclosing projects' among them,
    and the config's fault (an invalid config: the default switches are probed)."""
    try:
        switches, fault = load_config(root)["kill_switches"], None
    except LoopstateError as error:
        switches, fault = default_config()["kill_switches"], error.message
    standing = []
    for configured in [*switches, *enclosing_switches(root)]:
        found = probe_kill_switches(root, [configured])
        if found is not None:
            standing.append(found["path"])
    return standing, fault


def kill_switch_state(root: str) -> proto.KillSwitchState:
    """Every configured switch that stands (present or unreadable), and a shared store's stop, for readers.

    An invalid config refuses mutations; a reader is still told about the
    default switches and about the config's fault.
    """
    standing, fault = standing_switch_files(root)
    try:
        shared = shared_stop.as_switch(root)  # the stop a team's shared store holds (set from any machine)
    except LoopstateError as error:
        shared, fault = None, fault or error.message
    if shared is not None:
        standing.append(shared["path"])
    return proto.KillSwitchState(set=bool(standing), paths=standing, config_error=fault,
                                 shared=None if shared is None else shared["store"])


def create_project_kill_switch(root: str, note: str) -> Path:
    """The project-wide switch `run stop` sets: the config's first kill switch path.

    An invalid config never keeps the switch from being set: the default path is
    used (every run mutation is refused under an invalid config anyway).
    """
    try:
        switches = load_config(root)["kill_switches"]
    except LoopstateError:
        switches = default_config()["kill_switches"]
    return create_kill_switch(root, switches[0], note)


def create_kill_switch(root: str, configured: str, note: str) -> Path:
    """Create the STOP file (owner-only); an existing switch of any kind is left as it is.

    Durable before ``run stop`` says the switch is set: the file is fsynced, then
    its folder, and every folder this creates has its parent fsynced too.
    """
    path = switch_path(root, configured)
    safefs.make_dirs_durably(path.parent)
    try:
        fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW | os.O_CLOEXEC, 0o600)
    except FileExistsError:
        safefs.fsync_dir(path.parent)  # present is all a switch needs to be; its name must last
        return path
    except OSError as exc:
        if exc.errno == errno.ELOOP:
            safefs.fsync_dir(path.parent)
            return path  # a symlink is present: it already means stop
        raise
    try:
        safefs.write_all(fd, note.encode())
        os.fsync(fd)
    finally:
        os.close(fd)
    safefs.fsync_dir(path.parent)
    return path


def write_projections(project: Project, state: RunState) -> list[str]:
    """Make run.json, lease.json, issues.json and the evidence files equal the log's latest state; returns
    what was written (only what changed: see service/run_projections.py). On a shared store the project's
    folder in this machine's data dir holds only such local views, so it is made here when missing."""
    if state.run is None:
        return []  # nothing to show: a refused or not-found command leaves no folder behind
    project.ensure()
    return PROJECTIONS.write(project, state)


def write_grant_projection(project: Project, state: GrantState) -> bool:
    """grants/<grant_id>.json, the grant record, from the grant's stream (only when it differs: see
    ``RunProjections.write_grant``).

    A view for readers on this machine, never the authority: a command reads its grant from the grant's
    stream (in the store, shared with every machine on a team store), so the folder is made on demand."""
    if state.grant is None:
        return False
    return PROJECTIONS.write_grant(project, state.grant_id, state.grant)


class RunsPrepared(Prepared):
    """A run command's context, and the grant locks it holds shared through its append."""

    def __init__(self, ctx: Context, locks: list[StoreLock], *, prerequisite: Prerequisite | None = None) -> None:
        super().__init__(ctx, prerequisite=prerequisite)
        self.locks = locks


class RunsEffects(Effects[RunState | GrantState]):
    """The steps the service calls around a runs command (service/lifecycle.py)."""

    # before ----------------------------------------------------------------------------

    def before_decide(
        self, service: Service, project: Project, state: RunState | GrantState, command: Command, ctx: Context,
    ) -> Prepared:
        if isinstance(state, GrantState):
            write_grant_projection(project, state)
            return Prepared(ctx)  # the engine's exclusive lock on grants.<id> is the grant lock's exclusive side
        prepared = RunsPrepared(ctx, [])
        try:
            self._gather(service, project, state, command, prepared)
        except BaseException:
            self.release(prepared)
            raise
        return prepared

    def _gather(self, service: Service, project: Project, state: RunState, command: Command,
                prepared: RunsPrepared) -> None:
        ctx = prepared.ctx
        if isinstance(command, proto.Stop) and not command.cancel and state.run is not None:
            records.decode("actor", records.Actor, command.actor)  # a refused command leaves no switch behind
            # Before the config is read: an invalid config refuses the halt's record, never the switch.
            create_project_kill_switch(project.root, f"created by `loopstate run stop` for run {command.run_id} at "
                                                     f"{format_time(ctx.now)}\n")
        config = load_config(project.root)
        extra: dict[str, Any] = {
            "config": config,
            "kill_switch": (probe_kill_switches(project.root, [*config["kill_switches"], *enclosing_switches(project.root)])
                            or shared_stop.as_switch(project.root)),
        }
        grant_id = state.run["authority_grant_id"] if state.run is not None else getattr(command, "authority_grant_id", None)
        if isinstance(command, proto.Create) and command.authority_grant_id is None and state.run is None:
            grant_id, prepared.prerequisite = self._default_grant(service, project, state, command, ctx, extra)
            if prepared.prerequisite is not None:
                prepared.ctx = msgspec.structs.replace(ctx, extra=extra)
                return  # no grant to read yet: the engine records it, then applies the create again
        if grant_id is not None:
            extra["grant"] = self._read_grant_locked(service, project, grant_id, prepared.locks)
        if isinstance(command, proto.Resume) and command.authority_grant_id is not None:
            extra["new_grant"] = self._read_grant_locked(service, project, command.authority_grant_id, prepared.locks)
        prepared.ctx = msgspec.structs.replace(ctx, extra=extra)
        write_projections(project, state)

    def _default_grant(
        self, service: Service, project: Project, state: RunState, command: proto.Create, ctx: Context,
        extra: dict[str, Any],
    ) -> tuple[str, Prerequisite | None]:
        """The default local authority of a create that names no grant, and, when it is not
        recorded yet and the create is sure to pass against it, the prerequisite that records it.

        The create is decided first against the grant it would get (pure, under the
        run stream's lock), so a refused create (a standing kill switch, a config
        that refuses it) leaves no grant behind. The grant's id and request id come
        from the run id: a retry after a crash between the two commands finds it.
        """
        from loopstate.domains.runs import DOMAIN, grant_stream
        from loopstate.domains.runs.decide import create
        from loopstate.domains.runs.grants import decide_grant, default_grant

        offered = default_grant(command, state.run_id, ctx.now)
        if service.refresh(project, DOMAIN, grant_stream(offered.grant_id)).state.grant is not None:
            return offered.grant_id, None
        trial = msgspec.structs.replace(ctx, new_id=random_uuid)  # its events are dropped: spend none of the real ids
        would_be = decide_grant(GrantState(grant_id=offered.grant_id), offered, trial)[0]["grant"]
        create(state, command, msgspec.structs.replace(trial, extra={**extra, "grant": would_be}))
        return offered.grant_id, Prerequisite(offered, derived_uuid("runs.default-grant", offered.grant_id), ctx.now)

    def _read_grant_locked(self, service: Service, project: Project, grant_id: str,
                           locks: list[StoreLock]) -> dict[str, Any] | None:
        from loopstate.domains.runs import DOMAIN, grant_stream

        stream = grant_stream(grant_id)
        lock = project.lock(stream).shared()  # no lock file: the grant was never recorded
        locks.append(lock)
        state = service.refresh(project, DOMAIN, stream).state
        write_grant_projection(project, state)  # identical bytes from any holder of the lock
        grant: dict[str, Any] | None = state.grant
        return grant

    def release(self, prepared: Prepared) -> None:
        if isinstance(prepared, RunsPrepared):
            while prepared.locks:
                prepared.locks.pop().release()

    def before_query(self, service: Service, project: Project, state: RunState | GrantState, ctx: Context) -> Context:
        """A run's status carries whether a kill switch stands (a file, not an event)."""
        return msgspec.structs.replace(ctx, extra={**ctx.extra, "kill_switch_state": kill_switch_state(project.root)})

    # after ------------------------------------------------------------------------------

    def after_append(self, service: Service, project: Project, folded: Folded, records: list[Record],
                     prepared: Prepared) -> None:
        if isinstance(folded.state, RunState):
            write_projections(project, folded.state)
        else:
            write_grant_projection(project, folded.state)

    def after_commit(self, service: Service, project: Project, command: Command, outcome: Outcome,
                     prepared: Prepared | None) -> Outcome:
        if isinstance(command, proto.AuthorityRevoke):
            self.mark_revoked_runs(service, project, command.grant_id)
        return outcome

    def mark_revoked_runs(self, service: Service, project: Project, grant_id: str) -> list[str]:
        """Append (or find) the authority_revoked marker on every live run bound to the grant."""
        from loopstate.domains.runs import DOMAIN, RUN_PREFIX

        marked: list[str] = []
        grant = service.refresh(project, DOMAIN, f"grants.{grant_id.lower()}").state.grant
        if grant is None or grant["revoked_at"] is None:
            return marked
        for stream in open_store(project).stream_names():  # every machine's runs on a shared store
            if not stream.startswith(RUN_PREFIX):
                continue
            run_state = service.refresh(project, DOMAIN, stream).state
            run = run_state.run
            if run is None or run["authority_grant_id"] != grant["grant_id"] or grant["grant_id"] in run_state.revoked_markers:
                continue
            request_id = derived_uuid("runs.revocation-marker", f"{grant['grant_id']}/{run_state.run_id}/{grant['revoked_at']}")
            try:
                service.execute(project.root, proto.Sync(run_id=run_state.run_id), request_id)
            except LoopstateError:
                continue  # e.g. a pending intent: its run repairs the marker at its next command
            marked.append(run_state.run_id)
        return marked


EFFECTS = RunsEffects()
