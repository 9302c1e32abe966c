"""Queries, commands and results about a project as a whole (not one domain's stream).

Every front door needs the same few project-wide things: which project a path
belongs to, the list of its runs and goals, the kill switch (read, set with a
stop of every run, cleared), a full verification of its streams and a page of
one stream's audit log. They are messages here, like every domain's, so an
editor asks the sidecar instead of spawning the CLI and parsing its output,
and the CLI asks the same service. The ``kind`` tags start with ``project.``;
the sidecar also serves three ``project/...`` topics (runs, goals, kill_switch)
whose snapshots are the results of ``project.runs``, ``project.goals`` and
``project.kill_switch``.
"""

from __future__ import annotations

from typing import Annotated, Any, Literal, Union

import msgspec

from loopstate_protocol.base import Command, Query
from loopstate_protocol.goals import GateView
from loopstate_protocol.runs import Actor, KillSwitchState, RunStatusName

LOG_LIMIT = 200  # events of one log page unless the caller asks for another number
MAX_LOG_LIMIT = 5000


class ProjectQuery(Query, kw_only=True):
    """A read of the project as a whole: no stream of its own."""


class ProjectCommand(Command, kw_only=True):
    """A project-wide mutation: it acts through the domains' own commands and files."""


# Queries ----------------------------------------------------------------------------------------


class ProjectRoot(ProjectQuery, tag="project.root", kw_only=True):
    """Which project ``path`` belongs to (default: the request's ``root``), as ``loopstate root --json`` answers.

    The nearest ancestor that is already a loopstate project, else the top of
    the git work tree, else the folder itself. Nothing is written.
    """

    path: str | None = None


class ProjectRuns(ProjectQuery, tag="project.runs", kw_only=True):
    """The project's runs, oldest first, with the kill switch (``loopstate run list --json``).

    ``status`` keeps only runs in one of these statuses (``total`` still counts every run).
    """

    status: list[RunStatusName] | None = None


class ProjectGoals(ProjectQuery, tag="project.goals", kw_only=True):
    """The project's goals (those with at least one event) with their counts and the gates waiting for the user."""


class ProjectKillSwitch(ProjectQuery, tag="project.kill_switch", kw_only=True):
    """Whether a kill switch of the project (or of a project around it) stands now."""


class ProjectVerify(ProjectQuery, tag="project.verify", kw_only=True):
    """Check every stream's hash chain from the first byte (``loopstate verify --json``); writes nothing."""


class ProjectLog(ProjectQuery, tag="project.log", kw_only=True):
    """One page of one stream's audit log: at most ``limit`` of the events with ``after < sequence < before``
    (``before`` null: through the head), the first ones, or with ``tail`` the last ones.

    Forward, page on with ``after = next_after`` until it is null; backward (``tail``),
    with ``before = next_before`` until it is null.
    """

    stream: Annotated[str, msgspec.Meta(min_length=1)]
    after: Annotated[int, msgspec.Meta(ge=0)] = 0
    before: Annotated[int, msgspec.Meta(ge=1)] | None = None
    limit: Annotated[int, msgspec.Meta(ge=1, le=MAX_LOG_LIMIT)] = LOG_LIMIT
    tail: bool = False


# Commands ---------------------------------------------------------------------------------------


class ProjectStop(ProjectCommand, tag="project.stop", kw_only=True):
    """Set the kill switch and halt every run of the project and of every loopstate project around it.

    As ``loopstate run stop``: the switch file is created first (durably), then
    each run records its halt (``runs.stop``). The switch stays until
    ``project.resume`` (or the user) removes it.
    """

    actor: Actor
    reason: str = "stopped by the user"


class ProjectResume(ProjectCommand, tag="project.resume", kw_only=True):
    """Clear the project's kill switch: remove the switch files inside its ``.loopstate`` folder.

    A configured switch elsewhere (and an enclosing project's) is reported,
    never deleted. Halted runs stay halted: resume each with ``runs.resume``.
    ``actor`` (who clears it) goes to the server's log; nothing is appended.
    """

    actor: Actor | None = None


# Results ----------------------------------------------------------------------------------------


class RootInfo(msgspec.Struct, kw_only=True):
    """The result of ``project.root``; the fields of ``loopstate root --json``."""

    root: str
    how: Literal["explicit", "project", "git", "cwd"]
    reason: str
    project_id: str
    exists: bool  # whether the project has a store yet
    store: str  # the project's store folder (it may not exist yet)


class RunSummary(msgspec.Struct, kw_only=True):
    """One run of ``project.runs``. ``budgets`` maps each budget to ``[used, limit]``."""

    run_id: str
    status: str
    stage: str | None
    mode: str
    objective: str
    asset: str
    owner: str | None
    lease_live: bool | None
    pending_operation: str | None
    open_blocking_issues: int
    budgets: dict[str, list[Any]]
    created_at: str
    updated_at: str
    terminal_reason: dict[str, Any] | None
    lease_expires_at: str | None = None


class RunList(msgspec.Struct, kw_only=True):
    """The result of ``project.runs`` and the snapshot of the ``project/runs`` topic."""

    runs: list[RunSummary]
    kill_switch: KillSwitchState
    total: int  # runs of the project before the status filter


class GoalSummary(msgspec.Struct, kw_only=True):
    """One goal of ``project.goals``: its counts and the gates waiting for the user."""

    goal_id: str
    events: int  # lifecycle events (the board's source_event_count)
    store_sequence: int
    status_counts: dict[str, int]  # every todo, by status
    active_total: int
    completed_total: int
    user_gates: list[GateView]  # open gates waiting for the user (the board's user inbox)
    controller_gates: int  # open gates waiting for the controller
    error: dict[str, Any] | None = None  # the goal's stream cannot be read: {code, message}


class GoalList(msgspec.Struct, kw_only=True):
    """The result of ``project.goals`` and the snapshot of the ``project/goals`` topic."""

    goals: list[GoalSummary]


class ChainFault(msgspec.Struct, kw_only=True):
    code: str
    offset: int
    sequence: int
    reason: str


class TornTail(msgspec.Struct, kw_only=True):
    offset: int
    length: int
    sha256: str
    reason: str


class StreamReport(msgspec.Struct, kw_only=True, omit_defaults=True):
    """One stream's verification: ``events`` verified, up to ``sequence``/``hash`` at byte ``bytes``."""

    stream: str
    ok: bool
    error: ChainFault | None = None
    events: int = 0
    sequence: int = 0
    hash: str | None = None
    bytes: int = 0
    torn_tail: TornTail | None = None


class VerifyReport(msgspec.Struct, kw_only=True):
    """The result of ``project.verify``; the fields of ``loopstate verify --json``."""

    ok: bool
    project_id: str
    root: str
    streams: list[StreamReport]


class LogHead(msgspec.Struct, kw_only=True):
    sequence: int
    hash: str | None


class LogPage(msgspec.Struct, kw_only=True):
    """The result of ``project.log``: one page of a stream's events, oldest first."""

    stream: str
    head: LogHead  # the stream's verified head when the page was read
    event_count: int  # events in the stream
    events: list[dict[str, Any]]
    next_after: int | None  # pass as ``after`` for the next page; null: nothing is left after this page
    next_before: int | None = None  # with ``tail``: pass as ``before`` for the page before; null: nothing is left


class RunFailure(msgspec.Struct, kw_only=True):
    """A run whose halt could not be recorded (it still halts at its next command)."""

    run_id: str
    code: str
    message: str


class ProjectHalt(msgspec.Struct, kw_only=True):
    """What a stop did in one project: its switch file and the runs it halted."""

    root: str
    kill_switch: str
    halted: list[str]
    failed: list[RunFailure]


class StopOutcome(msgspec.Struct, tag="project.stop", tag_field="kind", kw_only=True):
    """What ``project.stop`` did: this project's halt first in ``projects``, then each enclosing project's."""

    root: str
    kill_switch: str
    halted: list[str]
    failed: list[RunFailure]
    projects: list[ProjectHalt]
    state: KillSwitchState  # the switch as probed after the stop


class KeptSwitch(msgspec.Struct, kw_only=True):
    """A standing switch that ``project.resume`` did not remove, and why."""

    path: str
    reason: str


class ResumeOutcome(msgspec.Struct, tag="project.resume", tag_field="kind", kw_only=True):
    """What ``project.resume`` did: the switch files removed, those left standing, and the runs still halted."""

    removed: list[str]
    kept: list[KeptSwitch]
    state: KillSwitchState  # the switch as probed after the removals
    halted_runs: list[str]  # runs in halted_kill_switch: each needs its own runs.resume
    note: str


ProjectOutcome = Union[StopOutcome, ResumeOutcome]

QUERIES = (ProjectRoot, ProjectRuns, ProjectGoals, ProjectKillSwitch, ProjectVerify, ProjectLog)
COMMANDS = (ProjectStop, ProjectResume)
RESULTS = (RootInfo, RunList, GoalList, VerifyReport, LogPage)

# The project topics (``project/<view>``) and the query whose result each one's snapshot is.
TOPICS: dict[str, type[ProjectQuery]] = {"runs": ProjectRuns, "goals": ProjectGoals, "kill_switch": ProjectKillSwitch}
