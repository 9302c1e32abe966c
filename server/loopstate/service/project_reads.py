"""The answers to the ``project.*`` queries: the project as a whole, read through the service.

A domain query reads one stream; these read many (every run, every goal, every
stream's chain) or none (the root, the kill switch files), so they live beside
the engine rather than in a domain. Every front door asks them through
``Service.query``: the sidecar for an editor's panels, the CLI for ``run list``,
``goals list``, ``verify``, ``log`` and ``root``, the MCP server for its
listings. They only read (shared locks) and create no file.
"""

from __future__ import annotations

import os
from typing import TYPE_CHECKING, Any, Callable, Sequence

import msgspec

from loopstate_protocol import project as proto
from loopstate_protocol.errors import ErrorCode
from loopstate_protocol.runs import KillSwitchState

from loopstate.core.errors import LoopstateError
from loopstate.service.shared_stop import on_shared_store

if TYPE_CHECKING:
    from loopstate.core.project import Project
    from loopstate.service.engine import Service

ProgressFn = Callable[[int, int], None]


def answer(service: "Service", root: str, query: proto.ProjectQuery, *, progress: Callable[[str], Any] | None = None) -> Any:
    """The result of one project query (``progress``: a per-stream progress callback factory, for verify)."""
    if isinstance(query, proto.ProjectRoot):
        return root_info(service, query.path) if query.path is not None else describe_root(service, root)
    if isinstance(query, proto.ProjectRuns):
        return runs(service, root, query.status)
    if isinstance(query, proto.ProjectGoals):
        return goals(service, root)
    if isinstance(query, proto.ProjectKillSwitch):
        return kill_switch(root)
    if isinstance(query, proto.ProjectVerify):
        return verify(service, root, progress=progress)
    if isinstance(query, proto.ProjectLog):
        return log_page(service, root, query)
    from loopstate_protocol import proofs

    if isinstance(query, proofs.QUERIES):
        from loopstate.service import transparency

        return transparency.answer(service.project(root), query)
    raise LoopstateError(ErrorCode.INVALID_PARAMS, f"no project query {type(query).__name__}")


def root_info(service: "Service", start: str) -> proto.RootInfo:
    """Which project the folder ``start`` belongs to, found as every front door finds it."""
    from loopstate.service.front import resolve_root

    start = os.path.abspath(start)
    if not os.path.isdir(start):
        what = "does not exist" if not os.path.lexists(start) else "is not a directory"
        raise LoopstateError(ErrorCode.INVALID_ROOT, f"{start} {what}; give a directory (or none for the current one)",
                             root=start)
    return _info(service, resolve_root(None, cwd=start, data_dir=service.data_dir))


def describe_root(service: "Service", root: str) -> proto.RootInfo:
    """The request's own root, taken as given (``loopstate --root ROOT root``)."""
    from loopstate.service.front import ProjectRoot

    return _info(service, ProjectRoot(root, "explicit"))


def _info(service: "Service", choice: Any) -> proto.RootInfo:
    from loopstate.core.project import Project

    project = Project(choice.root, data_dir=service.data_dir)  # absolute, no '..', not holding the data dir
    return proto.RootInfo(root=project.root, how=choice.how, reason=choice.reason,
                          project_id=project.project_id, exists=project.exists(), store=str(project.dir))


def runs(service: "Service", root: str, status: Sequence[str] | None = None) -> proto.RunList:
    """Every run of the project, oldest first (those in ``status`` when given), and the kill switch."""
    from loopstate.domains.runs.projections import summary
    from loopstate.service.runs_project import run_ids, run_state

    ctx = service.context(service.project(root))
    rows = []
    for run_id in run_ids(service, root):
        state = run_state(service, root, run_id)
        row = summary(state, ctx)
        if row is not None:
            rows.append(proto.RunSummary(**row, lease_expires_at=None if state.lease is None else state.lease["expires_at"]))
    rows.sort(key=lambda row: (row.created_at, row.run_id))
    shown = rows if not status else [row for row in rows if row.status in status]
    return proto.RunList(runs=shown, kill_switch=kill_switch(root), total=len(rows))


def kill_switch(root: str) -> KillSwitchState:
    from loopstate.service.runs_project import kill_switch as probe

    return probe(root)


def goals(service: "Service", root: str) -> proto.GoalList:
    """Every goal with at least one event: its counts and the gates waiting for the user.

    A goal whose stream cannot be read is listed with its ``error`` (the others still are).
    """
    from loopstate.core.clock import format_time
    from loopstate.domains.goals import DOMAIN
    from loopstate.domains.goals.domain import stream_name
    from loopstate.domains.goals.projection import build_board
    from loopstate.service.goals_effects import goal_ids

    project = service.project(root)
    now = format_time(service.clock())
    out = []
    for goal_id in goal_ids(project):
        try:
            state = service.refresh(project, DOMAIN, stream_name(goal_id)).state
            board = build_board(state, generated_at=now, public=False, limit=1)
        except LoopstateError as error:
            out.append(proto.GoalSummary(goal_id=goal_id, events=0, store_sequence=0, status_counts={}, active_total=0,
                                         completed_total=0, user_gates=[], controller_gates=0,
                                         error={"code": error.code.value, "message": error.message}))
            continue
        page = board.page
        out.append(proto.GoalSummary(
            goal_id=goal_id, events=board.meta.source_event_count, store_sequence=board.meta.store_sequence,
            status_counts=page.status_counts, active_total=page.active_total, completed_total=page.completed_total,
            user_gates=board.user_inbox, controller_gates=len(board.controller_inbox),
        ))
    return proto.GoalList(goals=out)


def verify(service: "Service", root: str, *, progress: Callable[[str], Any] | None = None) -> proto.VerifyReport:
    """Every stream's chain from its first byte, each under its shared lock; corruption is reported, not raised."""
    from loopstate.core.recovery import verify_stream
    from loopstate.core.stream import Stream
    from loopstate.service.front import stream_layout

    project = service.project(root)
    if on_shared_store(project.root):
        return _verify_in_store(project, progress)
    reports = []
    for name in project.stream_names():
        stream = Stream(project.dir, name, stream_layout(name))
        with project.lock(name).shared():
            report = verify_stream(stream, progress=None if progress is None else progress(f"verify {name}"))
        reports.append(msgspec.convert(report, proto.StreamReport))
    return proto.VerifyReport(ok=all(r.ok for r in reports), project_id=project.project_id, root=project.root,
                              streams=reports)


def _verify_in_store(project: Project, progress: Callable[[str], Any] | None) -> proto.VerifyReport:
    """``verify`` on a shared store: every stream's chain re-checked from its first event as the store
    reads it back (``Recovers.verify_stream``: the same rules as a file's, on the stored canonical lines)."""
    from loopstate.core.backend import Recovers
    from loopstate.core.stores import open_store
    from loopstate.service.front import stream_layout

    store = open_store(project)
    if not isinstance(store, Recovers):
        raise LoopstateError(ErrorCode.INVALID_PARAMS, f"the store {store.url} cannot verify its streams; "
                             "copy them to a local store (`loopstate store export`) and verify there")
    reports = []
    for name in store.stream_names():
        report = store.verify_stream(name, stream_layout(name), None if progress is None else progress(f"verify {name}"))
        reports.append(msgspec.convert(report, proto.StreamReport))
    return proto.VerifyReport(ok=all(r.ok for r in reports), project_id=project.project_id, root=project.root,
                              streams=reports)


def _log_in_store(project: Project, query: proto.ProjectLog) -> proto.LogPage:
    """``log_page`` on a shared store: the page's own events, linked from the one before it (``log_pages.in_store``)."""
    from loopstate.core.stores import open_store
    from loopstate.service import log_pages
    from loopstate.service.front import stream_layout

    store = open_store(project)
    name = query.stream
    if name not in store.stream_names():
        raise LoopstateError(ErrorCode.NOT_FOUND, f"no stream {name!r} in this project; `loopstate log` lists them",
                             stream=name)
    return log_pages.in_store(store, name, stream_layout(name), query)


def log_page(service: "Service", root: str, query: proto.ProjectLog) -> proto.LogPage:
    """A page of stream ``query.stream``'s events, under the stream's shared lock.

    When the stream's verified mark describes the file exactly as it is (its
    identity, size and times: nobody wrote it since a writer that verified every
    byte through the mark's head, see ``core/verified_mark.py``), the page is
    found by a binary search over line starts and only its own lines (and the one
    before them, for the first link) are read, each re-hashed and linked: a page
    from a cursor costs O(log n + page), not a verify from the first byte.
    Otherwise (no mark, a stale one, a torn tail, an edit since) the stream is
    read and verified from its first byte, which reports a broken middle as
    CORRUPT_LEDGER whatever page was asked for (a read never trusts a tail).
    """
    from loopstate.core.stream import Stream
    from loopstate.service import log_pages
    from loopstate.service.front import stream_layout

    project = service.project(root)
    if on_shared_store(project.root):
        return _log_in_store(project, query)
    name = query.stream
    if name not in project.stream_names():
        raise LoopstateError(ErrorCode.NOT_FOUND, f"no stream {name!r} in this project; `loopstate log` lists them",
                             stream=name)
    stream = Stream(project.dir, name, stream_layout(name))
    with project.lock(name).shared():
        page = log_pages.from_mark(stream, query)
        if page is None:
            page = log_pages.verified_from_start(stream, query)
    return page
