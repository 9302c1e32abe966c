"""The ``project.*`` commands: the kill switch set with a halt of every run, and cleared.

Neither has a stream of its own. ``project.stop`` acts through the runs
domain's own command (``runs.stop`` for each run, under an id derived from the
request id, so an exact retry replays every halt instead of writing new ones);
``project.resume`` only removes switch files, which are the switch: nothing is
appended, and the runs a stop halted stay halted until each is resumed with
``runs.resume`` (a halt is a run's recorded terminal fact, not a flag the
switch holds).

On a team's shared store (service/shared_stop.py) ``project.stop`` also records
the stop in the store, before the runs are halted, so every machine's next tool
call is denied, and ``project.resume`` lifts it there; ``state`` names it among
the standing switches.

Which files ``project.resume`` may remove: the standing switches inside the
project's own ``.loopstate`` folder (``.loopstate/STOP``, or a configured path
there), which loopstate creates. A switch elsewhere
(``.the-loop/STOP``, a configured path outside ``.loopstate``) belongs to
whoever put it there, and an enclosing project's ``.loopstate/STOP`` to that
project: those are reported in ``kept`` with the reason, never deleted.
"""

from __future__ import annotations

import logging
import os
from pathlib import Path
from typing import TYPE_CHECKING, Any

import msgspec

from loopstate_protocol import project as proto
from loopstate_protocol.base import Head
from loopstate_protocol.errors import ErrorCode

from loopstate.core.errors import LoopstateError
from loopstate.core.idempotency import check_request_id
from loopstate.service import shared_stop

if TYPE_CHECKING:
    from loopstate.service.engine import Service

log = logging.getLogger("loopstate.service")

HALTED = "halted_kill_switch"
RESUME_NOTE = ("halted runs stay halted: resume each one with runs.resume (`loopstate run resume RUN`); "
               "a run that was not halted goes on at its next command")


class ProjectDone(msgspec.Struct, kw_only=True):
    """What a project command did, in the shape of the engine's Outcome (no events, no single head)."""

    events: list[dict[str, Any]]
    head: Head | None
    replayed: bool
    project: proto.StopOutcome | proto.ResumeOutcome


def execute(service: "Service", root: str, command: proto.ProjectCommand, request_id: str) -> ProjectDone:
    check_request_id(request_id)
    if isinstance(command, proto.ProjectStop):
        return stop(service, root, command, request_id)
    if isinstance(command, proto.ProjectResume):
        return resume(service, root, command)
    raise LoopstateError(ErrorCode.INVALID_PARAMS, f"no project command {type(command).__name__}")


def stop(service: "Service", root: str, command: proto.ProjectStop, request_id: str) -> ProjectDone:
    from loopstate.domains.runs import records
    from loopstate.service.runs_project import halt_project, kill_switch

    records.decode("project.stop", records.Actor, command.actor, "$.actor")  # refused before the switch is set
    root = service.project(root).root
    try:
        shared_stop.set_stop(root, command.reason)
    except LoopstateError as error:  # the store is down: the local switch still goes up and denies here
        try:
            halt_project(service, root, command.actor, request_id=request_id, reason=command.reason)
        except LoopstateError:
            from loopstate.service.runs_effects import create_project_kill_switch

            create_project_kill_switch(root, "created by `loopstate run stop`\n")  # the runs' halts need the store
        raise LoopstateError(error.code, f"the kill switch is set in this work tree and denies on this machine, but "
                             f"the shared store could not record the stop, so other machines do not see it: "
                             f"{error.message}; run `loopstate run stop` again when the store answers",
                             **error.details) from None
    done = halt_project(service, root, command.actor, request_id=request_id, reason=command.reason)
    reached = done["projects"]
    replayed = all(set(p["replayed"]) == {*p["halted"]} and not p["failed"] for p in reached) and any(
        p["replayed"] for p in reached)
    outcome = proto.StopOutcome(
        root=done["root"], kill_switch=done["kill_switch"], halted=done["halted"],
        failed=[proto.RunFailure(**f) for f in done["failed"]],
        projects=[proto.ProjectHalt(root=p["root"], kill_switch=p["kill_switch"], halted=p["halted"],
                                    failed=[proto.RunFailure(**f) for f in p["failed"]]) for p in reached],
        state=kill_switch(done["root"]),  # the shared store's stop among them, as it reads back
    )
    return ProjectDone(events=[], head=None, replayed=replayed, project=outcome)


def resume(service: "Service", root: str, command: proto.ProjectResume) -> ProjectDone:
    from loopstate.core.killswitch import enclosing_switches, switch_path
    from loopstate.service.runs_effects import standing_switch_files
    from loopstate.service.runs_project import kill_switch, run_ids, run_state

    root = service.project(root).root
    own = os.path.join(os.path.realpath(root), ".loopstate")
    enclosing = set(enclosing_switches(root))
    removed: list[str] = []
    kept: list[proto.KeptSwitch] = []
    for configured in standing_switch_files(root)[0]:  # the files; the shared store's stop is lifted below
        path = switch_path(root, configured)
        if configured in enclosing:
            outer = os.path.dirname(os.path.dirname(configured))
            kept.append(proto.KeptSwitch(path=configured, reason=(
                f"the kill switch of the enclosing project {outer}: it halts this project too; clear it there "
                f"(`loopstate --root {outer} run unstop`)")))
            continue
        if os.path.realpath(path.parent) != own:
            kept.append(proto.KeptSwitch(path=str(path), reason=(
                "outside this project's .loopstate folder: loopstate does not delete a switch it did not create "
                "there; remove it yourself")))
            continue
        try:
            os.unlink(path)
        except FileNotFoundError:
            continue  # gone meanwhile
        except OSError as exc:
            kept.append(proto.KeptSwitch(path=str(path), reason=f"cannot remove it: {exc.strerror or exc}"))
            continue
        _fsync_dir(path.parent)
        removed.append(str(path))
    lifted = shared_stop.clear_stop(root)
    if lifted is not None:
        removed.append(lifted)
    if command.actor is not None:
        from loopstate.domains.runs import records

        records.decode("project.resume", records.Actor, command.actor, "$.actor")
    actor = command.actor or {}
    if removed:
        log.info("kill switch cleared by %s: %s", actor.get("actor", "?"), ", ".join(removed))
    halted = []
    for run_id in run_ids(service, root):
        try:
            run = run_state(service, root, run_id).run
        except LoopstateError:
            continue
        if run is not None and run["status"] == HALTED:
            halted.append(run_id)
    outcome = proto.ResumeOutcome(removed=removed, kept=kept, state=kill_switch(root), halted_runs=halted,
                                  note=RESUME_NOTE)
    return ProjectDone(events=[], head=None, replayed=False, project=outcome)


def _fsync_dir(folder: Path) -> None:
    """The removal lasts: a switch that comes back after a crash would only halt again, but say what was done."""
    from loopstate.core import safefs

    try:
        safefs.fsync_dir(folder)
    except OSError as exc:
        log.warning("could not fsync %s after removing its kill switch: %s", folder, exc)
