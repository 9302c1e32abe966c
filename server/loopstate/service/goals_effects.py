"""The goals domain's impure glue: Markdown files, git, snapshot checkpoint files.

- Render: before the decision, look at the target file (is git tracking it?
  is it our current projection, stale, hand-edited or foreign?) so the pure
  decision can apply the privacy and no-overwrite rules; after the
  ``projection_rendered`` event is durable, write the very text it
  checksummed. The file is always written after the event, never instead.
- Staleness: read a rendered file and ask the domain whether it is current.
- Goal names: before a goal's first event and before a read of a goal with
  none, hand the domain the project's goal ids, so it can refuse a near-miss
  name and say which goals there are.
- Snapshots: after a ``snapshot_compacted`` event, write the projection
  snapshot of the head now (the one mechanism every domain shares:
  core/snapshot.py); ``load_state`` starts from it when it still matches the
  stream and folds only what follows. The stream itself is never rewritten.

A read (``goals board``, a hook's gate check) imports this module to load a
goal's state: git (subprocess), the Markdown code, the bridge and the decision
rules are imported by the functions that render, check or decide, not here.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import TYPE_CHECKING, Any

import msgspec

from loopstate_protocol import goals as proto
from loopstate_protocol.errors import ErrorCode

from loopstate.core import safefs
from loopstate.core.errors import LoopstateError
from loopstate.core.project import Project
from loopstate.core.stream import Record
from loopstate.domains.base import Context
from loopstate.domains.goals import names
from loopstate.domains.goals.domain import PREFIX, rendered_text, stream_name, validated
from loopstate.domains.goals.state import GoalState, initial
from loopstate.service.lifecycle import Effects, Prepared
from loopstate.service.shared_stop import on_shared_store

if TYPE_CHECKING:
    from loopstate_protocol.base import Command

    from loopstate.domains.goals.config import GoalsConfig
    from loopstate.service.engine import Folded, Service

GIT_TIMEOUT = 10.0


class Replay(msgspec.Struct, frozen=True):
    """How a state was loaded: from a snapshot or from the start, and how many events were folded."""

    state: GoalState
    events_folded: int
    snapshot_sequence: int | None


# Render ----------------------------------------------------------------------------------------------------


def target_path(root: str, target: str) -> Path:
    """The rendered file's path: a Markdown file below the project root, reached through real folders."""
    from loopstate.domains.goals.decide import check_render_target

    path = Path(root) / check_render_target(target)
    try:
        safefs.check_inside(path, Path(root))
    except LoopstateError as exc:
        raise _unsafe_target(target, exc) from None
    return path


def _unsafe_target(target: str, exc: LoopstateError) -> LoopstateError:
    """safefs speaks of store paths; say what it means for a render target."""
    reason = exc.details.get("reason", exc.message)
    return LoopstateError(
        ErrorCode.UNSAFE_PATH,
        f"render target {target!r} cannot be used ({exc.details.get('path', target)}: {reason}); loopstate writes "
        "projections only as plain files through real folders: remove the link or choose another target",
        target=target, reason=reason,
    )


def git_tracked(root: str, path: Path) -> bool:
    """Does git carry this file: is it in the index (what `git status` calls tracked)?

    An untracked file (`??`), an ignored one, and any file outside a git work
    tree (or without git) are local state: False. Only `git add` makes a
    workbench something a commit would publish, and from then on a private
    render of it is refused.
    """
    import subprocess

    try:
        return subprocess.run(("git", "-C", root, "ls-files", "--error-unmatch", "--", os.path.relpath(path, root)),
                              capture_output=True, timeout=GIT_TIMEOUT).returncode == 0
    except (OSError, subprocess.TimeoutExpired):
        return False


def read_text(root: str, path: Path) -> str | None:
    try:
        data = safefs.read_file(path, Path(root))
    except LoopstateError as exc:
        if exc.code is not ErrorCode.UNSAFE_PATH:
            raise
        raise _unsafe_target(os.path.relpath(path, root), exc) from None
    if data is None:
        return None
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError:
        raise LoopstateError(ErrorCode.VALIDATION_FAILED, f"{path.name} is not UTF-8 text; save it as UTF-8 "
                             "or choose another file", path=path.name) from None


def load_config(root: str) -> GoalsConfig:
    """The project's goals config (``.loopstate/goals.json``), or the defaults."""
    from loopstate.domains.goals.config import CONFIG_PATH, GoalsConfig, parse_config

    data = safefs.read_file(Path(root) / CONFIG_PATH, Path(root))
    return GoalsConfig() if data is None else parse_config(data)


def markdown_status(service: Service, root: str, goal_id: str, target: str) -> proto.MarkdownStatus:
    """Is the rendered file at ``target`` the current projection of the goal?"""
    path = target_path(root, target)
    text = read_text(root, path)
    if text is None:
        raise LoopstateError(ErrorCode.NOT_FOUND, f"{target} does not exist; write it with `loopstate goals render`",
                             target=target)
    status: proto.MarkdownStatus = service.query(root, proto.CheckMarkdown(goal_id=goal_id, markdown=text))
    return status


def runs_domain_has(project: Project, run_id: str) -> bool:
    """Does the runs domain of this project hold a run with this id (a non-empty ``runs.<id>`` stream)?

    Runs-domain ids are UUIDs; any other id cannot name one. (The runs domain is
    imported here, not at the top: a goals reader does not pay for it.) On a shared store
    the run's stream is asked of the store, which lists a stream from its first event: a
    run created on another machine is this project's too.
    """
    from loopstate.domains.runs import run_stream
    from loopstate.service.shared_stop import on_shared_store

    try:
        stream = run_stream(run_id)
    except LoopstateError:
        return False
    if on_shared_store(project.root):
        from loopstate.core.stores import open_store

        return stream in open_store(project).stream_names()
    try:
        return (project.dir / "streams" / f"{stream}.jsonl").stat().st_size > 0
    except OSError:
        return False


def _evidence_run_target(command: Command) -> str | None:
    """The run an evidence command attaches to, if it does (typed or as a raw goal event)."""
    if isinstance(command, proto.AttachEvidence):
        return command.target_id if command.target_kind == "run" else None
    if isinstance(command, proto.AppendEvent) and command.event_type == "evidence_attached":
        payload = command.payload
        if payload.get("target_kind") == "run" and isinstance(payload.get("target_id"), str):
            target: str = payload["target_id"]
            return target
    return None


def goal_ids(project: Project) -> list[str]:
    """The goals of this project: those whose stream holds at least one byte (on a shared store, whose
    streams exist from their first event, every goal stream it lists)."""
    from loopstate.service.shared_stop import on_shared_store

    if on_shared_store(project.root):
        from loopstate.core.stores import open_store

        return [name[len(PREFIX):] for name in open_store(project).stream_names() if name.startswith(PREFIX)]
    ids = []
    for name in project.stream_names():
        if name.startswith(PREFIX):
            try:
                if (project.dir / "streams" / f"{name}.jsonl").stat().st_size > 0:
                    ids.append(name[len(PREFIX):])
            except OSError:
                continue
    return ids


def _with_known_goals(project: Project, state: GoalState, ctx: Context) -> Context:
    """The context, with the project's goal ids when this goal has no event yet."""
    if state.store.event_count:
        return ctx
    return msgspec.structs.replace(ctx, extra={**ctx.extra, names.KNOWN_GOALS: goal_ids(project)})


class GoalsEffects(Effects[GoalState]):
    """The steps the service calls around a goals command (service/lifecycle.py)."""

    def before_query(self, service: Service, project: Project, state: GoalState, ctx: Context) -> Context:
        return _with_known_goals(project, state, ctx)

    def before_decide(
        self, service: Service, project: Project, state: GoalState, command: Command, ctx: Context,
    ) -> Prepared:
        return Prepared(self._decision_context(project, state, command, ctx))

    def _decision_context(self, project: Project, state: GoalState, command: Command, ctx: Context) -> Context:
        from loopstate.domains.goals import bridge
        from loopstate.domains.goals.decide import RENDER_EXISTING, RENDER_TRACKED, RUNS_DOMAIN_RUN, STATE_PRIVACY

        ctx = _with_known_goals(project, state, ctx)
        run_target = _evidence_run_target(command)
        if run_target is not None:
            known = runs_domain_has(project, run_target)
            return msgspec.structs.replace(ctx, extra={**ctx.extra, RUNS_DOMAIN_RUN: known})
        if not isinstance(command, proto.RenderMarkdown):
            return ctx
        validated(command)
        path = target_path(project.root, command.target)
        try:
            text = read_text(project.root, path)
        except LoopstateError as exc:
            if exc.code is not ErrorCode.VALIDATION_FAILED:
                raise
            existing = "foreign"  # not UTF-8: certainly not our projection
        else:
            existing = "absent" if text is None else bridge.check(state, text).status
        extra = {**ctx.extra, RENDER_TRACKED: git_tracked(project.root, path), RENDER_EXISTING: existing,
                 STATE_PRIVACY: load_config(project.root).state_privacy}
        return msgspec.structs.replace(ctx, extra=extra)

    def after_append(self, service: Service, project: Project, folded: Folded, records: list[Record],
                     prepared: Prepared) -> None:
        for record in records:
            event = record.event
            if event["event_type"] == "projection_rendered" and event["payload"]["projection_kind"] == "markdown":
                write_rendered(project, folded.state, event)
            elif event["event_type"] == "snapshot_compacted":
                write_snapshot(folded)


EFFECTS = GoalsEffects()


def write_rendered(project: Project, state: GoalState, event: dict[str, Any]) -> None:
    from loopstate.domains.goals import markdown

    text = rendered_text(state, event)
    if markdown.text_checksum(text) != event["payload"]["checksum"]:
        raise LoopstateError(
            ErrorCode.INTERNAL_ERROR,
            f"the Markdown rebuilt after event {event['event_id']} does not match its checksum; nothing was written",
            event_id=event["event_id"],
        )
    target = event["payload"]["target"]
    try:
        path = target_path(project.root, target)
        if path.parent != Path(project.root):
            safefs.ensure_dir(path.parent, Path(project.root))
        safefs.atomic_write(path, Path(project.root), text.encode("utf-8"))
    except (OSError, LoopstateError) as exc:
        code = exc.code if isinstance(exc, LoopstateError) else ErrorCode.STORE_IO_ERROR
        reason = exc.message if isinstance(exc, LoopstateError) else str(exc)
        raise LoopstateError(
            code, f"projection_rendered was recorded at append_sequence {event['append_sequence']}, but writing "
            f"{target} failed: {reason}; fix that and run `loopstate goals render` again",
            target=target, append_sequence=event["append_sequence"],
        ) from None


# Snapshots ------------------------------------------------------------------------------------------------


def write_snapshot(folded: Folded) -> None:
    """``goals compact``: the projection snapshot of the state folded through the head
    (the general mechanism, core/snapshot.py), written under the mutation's lock now
    rather than at the next checkpoint."""
    folded.ledger.save_snapshot()


def load_existing(project: Project, goal_id: str, *, use_snapshot: bool = True) -> Replay:
    """``load_state`` for a read that names a goal: one without events is NOT_FOUND, naming the goals there are."""
    loaded = load_state(project, goal_id, use_snapshot=use_snapshot)
    if loaded.state.store.event_count == 0:
        raise names.missing_goal(goal_id, goal_ids(project))
    return loaded


def load_state(project: Project, goal_id: str, *, use_snapshot: bool = True) -> Replay:
    """Fold a goal's stream for a short-lived reader (CLI board, render check, a hook),
    starting from its projection snapshot when that still matches the file
    (core/snapshot.py); events after it are verified and folded as usual, and a
    snapshot that does not match is ignored (a full fold), never trusted."""
    name = stream_name(goal_id)
    if not project.exists() and not on_shared_store(project.root):  # a shared store needs no folder here
        return Replay(initial(goal_id), 0, None)
    from loopstate.domains.goals import DOMAIN
    from loopstate.service.engine import Folded

    folded = Folded(None, project, DOMAIN, name, snapshots=use_snapshot)
    counted = folded.ledger.on_record
    assert counted is not None  # Folded always folds through on_record
    count = 0

    def on_record(record: Record) -> None:
        nonlocal count
        count += 1
        counted(record)

    folded.ledger.on_record = on_record
    folded.ledger.refresh(collect=False)
    folded.ledger.close()
    return Replay(folded.state, count, folded.ledger.started_from)
