"""The runs of one project as a whole: listed, found by an id prefix, halted together.

Every front door (the CLI, hooks, an MCP adapter) takes ids as people copy
them from a listing, by a unique prefix as git does, and needs the list of
runs and the project-wide kill switch; this module gives them that over the
same Service, so no front door holds these rules. Listing and resolving only
read (shared locks): they create no file.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, Literal, cast

from loopstate_protocol import runs as proto

from loopstate.core.errors import LoopstateError
from loopstate.core.ids import derived_uuid, random_uuid
from loopstate.core.prefix import resolve_prefix
from loopstate.core.stores import open_store
from loopstate.domains.runs import DOMAIN, GRANT_PREFIX, RUN_PREFIX
from loopstate.domains.runs.projections import summary
from loopstate.domains.runs.state import RunState
from loopstate.service import runs_effects

if TYPE_CHECKING:
    from loopstate.service.engine import Service

InRun = Literal["issue", "evidence", "operation", "lease"]


def _ids(service: Service, root: str, prefix: str) -> list[str]:
    names = open_store(service.project(root)).stream_names()  # the store's: on a shared one, every machine's runs
    return [name[len(prefix):] for name in names if name.startswith(prefix)]


def run_ids(service: Service, root: str) -> list[str]:
    """The project's runs (those with a stream), in stream-name order."""
    return _ids(service, root, RUN_PREFIX)


def run_state(service: Service, root: str, run_id: str) -> RunState:
    from loopstate.domains.runs import run_stream

    # A run stream folds into a RunState (RunsDomain.initial and evolve); Folded holds any domain's state.
    return cast(RunState, service.refresh(service.project(root), DOMAIN, run_stream(run_id)).state)


def resolve_run(service: Service, root: str, given: str) -> str:
    """The run id ``given`` abbreviates (any unique prefix of a run of this project)."""
    return resolve_prefix("run", given, _ids(service, root, RUN_PREFIX), hint="`loopstate run list` shows the runs")


def has_run(service: Service, root: str, run_id: str) -> bool:
    """Whether this project holds a run with this id (``resolve_run`` passes a whole id through unchecked)."""
    return run_id in _ids(service, root, RUN_PREFIX)


def resolve_grant(service: Service, root: str, given: str) -> str:
    """The grant id ``given`` abbreviates (any unique prefix of a grant recorded in this project)."""
    return resolve_prefix("grant", given, _ids(service, root, GRANT_PREFIX),
                          hint="`loopstate run status RUN` shows a run's grant")


def resolve_in_run(service: Service, root: str, run_id: str, kind: InRun, given: str) -> str:
    """An issue, evidence, operation or lease id of one run, by a unique prefix."""
    state = run_state(service, root, run_id)
    if kind == "issue":
        known: Any = state.issues
    elif kind == "evidence":
        known = state.evidence
    elif kind == "operation":
        known = [state.pending["operation_id"]] if state.pending else []
    else:
        known = [state.lease["lease_id"]] if state.lease else []
    return resolve_prefix(kind, given, known, hint=f"`loopstate run status {run_id[:8]}` shows the run's {kind} ids")


def own_lease(service: Service, root: str, run_id: str, actor: str) -> dict[str, Any]:
    """The run's current lease when ``actor`` holds it: what a person at a terminal works under by default.

    The store already remembers the lease this owner acquired (the run's state
    holds the current lease and its owner), so ``loopstate run heartbeat RUN``
    needs no ``--lease``/``--generation``: they come from there when the current
    lease's owner is ``actor``. Anyone else's lease, or none, is refused saying
    whose it is and what to do; a lease that expired is refused by the command
    itself (LEASE_EXPIRED), as with explicit flags.
    """
    from loopstate_protocol.errors import ErrorCode

    lease = run_state(service, root, run_id).lease
    if lease is None:
        raise LoopstateError(ErrorCode.LEASE_MISMATCH, f"run {run_id[:8]} has no lease; take it with "
                             f"`loopstate run acquire {run_id[:8]}` (or recover it with `loopstate run resume`)",
                             run_id=run_id)
    owner = lease["owner"]
    if owner.get("actor") != actor:
        raise LoopstateError(
            ErrorCode.LEASE_MISMATCH,
            f"run {run_id[:8]}'s lease {lease['lease_id'][:8]} (generation {lease['generation']}) is held by "
            f"{owner.get('actor')} ({owner.get('harness')}, session {owner.get('session_id')}), not by {actor}; "
            "to act under it, name it: --lease LEASE --generation N", run_id=run_id, holder=owner)
    return {"lease_id": lease["lease_id"], "generation": lease["generation"]}


def list_runs(service: Service, root: str) -> list[dict[str, Any]]:
    """One summary per run of the project (status, stage, owner, lease, budget use), oldest first."""
    ctx = service.context(service.project(root))
    rows = [summary(run_state(service, root, run_id), ctx) for run_id in _ids(service, root, RUN_PREFIX)]
    return sorted((row for row in rows if row is not None), key=lambda row: (row["created_at"], row["run_id"]))


def kill_switch(root: str) -> proto.KillSwitchState:
    """Whether a kill switch of the project stands now (every configured path probed)."""
    return runs_effects.kill_switch_state(root)


def halt_project(service: Service, root: str, actor: dict[str, Any], *, request_id: str | None = None,
                 reason: str | None = None) -> dict[str, Any]:
    """The kill switch: create the project's STOP file, then halt every run of the project, and the same for
    every loopstate project enclosing it.

    The switch is project-wide: once it stands every run halts at its
    next command whatever this call reaches; the halts written here record it on
    each run now. A stop errs on the side of stopping: a project nested in
    another (say ``src/sub`` made a project by one ``--root .``) must not keep
    the enclosing project's runs going, so each enclosing project gets its own
    switch and halts too, and the result names every project reached
    (``projects``, this one first; the top-level fields are this project's). A
    run that cannot record its halt (a broken log, say) is listed with the reason.

    With ``request_id`` each run's halt is executed under an id derived from it
    and the run (an exact retry of the stop replays them: ``replayed`` lists
    those); without, under fresh ids.
    """
    from loopstate.core.discovery import enclosing_projects

    reached = [_halt_one(service, root, actor, request_id, reason)]
    for outer in enclosing_projects(root, service.project(root).data_dir):
        reached.append(_halt_one(service, outer, actor, request_id, reason))
    return {**reached[0], "projects": reached}


def _halt_one(service: Service, root: str, actor: dict[str, Any], request_id: str | None, reason: str | None) -> dict[str, Any]:
    path = runs_effects.create_project_kill_switch(root, "created by `loopstate run stop`\n")
    halted: list[str] = []
    failed: list[dict[str, str]] = []
    replayed: list[str] = []
    for run_id in _ids(service, root, RUN_PREFIX):
        stop = proto.Stop(run_id=run_id, actor=actor) if reason is None else proto.Stop(run_id=run_id, actor=actor,
                                                                                          reason=reason)
        run_request = random_uuid() if request_id is None else derived_uuid("project.stop", f"{request_id}\0{run_id}")
        try:
            outcome = service.execute(root, stop, run_request)
        except LoopstateError as error:
            failed.append({"run_id": run_id, "code": error.code.value, "message": error.message})
            continue
        if outcome.replayed:
            replayed.append(run_id)
        if outcome.events:
            halted.append(run_id)
    done = {"root": root, "kill_switch": str(path), "halted": halted, "failed": failed}
    return done if request_id is None else {**done, "replayed": replayed}
