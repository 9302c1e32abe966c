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
- Snapshots: after a ``snapshot_compacted`` event, write the folded state and
  the chain position it covers next to the store, as a derived cache;
  ``load_state`` starts from it (after checking it against the stream,
  including the SHA-256 of every byte before it, as core checkpoints do) and
  replays only what follows. The stream itself is never rewritten.
"""

from __future__ import annotations

import dataclasses
import os
import subprocess
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import msgspec

from loopstate_protocol import goals as proto
from loopstate_protocol.errors import ErrorCode

from loopstate.core import canonical, safefs
from loopstate.core.chain import Position
from loopstate.core.errors import LoopstateError
from loopstate.core.live_integrity import prefix_sha256, verified_line
from loopstate.core.project import Project
from loopstate.core.stream import Stream
from loopstate.domains.goals import bridge, markdown, names
from loopstate.domains.goals.config import CONFIG_PATH, GoalsConfig, parse_config
from loopstate.domains.goals.decide import (
    RENDER_EXISTING, RENDER_TRACKED, RUNS_DOMAIN_RUN, STATE_PRIVACY, check_render_target,
)
from loopstate.domains.goals.domain import LAYOUT, PREFIX, rendered_text, stream_name, validated
from loopstate.domains.goals.state import GoalState, evolve, initial, state_bytes

SNAPSHOT_FORMAT = "goals_snapshot_v2"  # v2: bound to the SHA-256 of the stream bytes before it
GIT_TIMEOUT = 10.0


class SnapshotHeader(msgspec.Struct, kw_only=True):
    """The first line of a snapshot file; the canonical state bytes follow it."""

    format: str
    stream: str
    dev: int
    ino: int
    line_start: int
    offset: int
    sequence: int
    hash: str
    state_checksum: str
    prefix_sha256: str


@dataclass(frozen=True)
class Replay:
    """How a state was loaded: from a snapshot or from the start, and how many events were folded."""

    state: GoalState
    events_folded: int
    snapshot_sequence: int | None
    snapshot_note: str | None = None


# Render ----------------------------------------------------------------------------------------------------


def target_path(root: str, target: str) -> Path:
    """The rendered file's path: a Markdown file below the project root, reached through real folders."""
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
    """Would git carry this file? True when it is in the index or not ignored in a work tree.

    Outside a git work tree (or without git) the file is local state: False.
    """
    def git(*args: str) -> int:
        try:
            return subprocess.run(("git", "-C", root, *args), capture_output=True, timeout=GIT_TIMEOUT).returncode
        except (OSError, subprocess.TimeoutExpired):
            return 128

    if git("rev-parse", "--is-inside-work-tree") != 0:
        return False
    relative = os.path.relpath(path, root)
    if git("ls-files", "--error-unmatch", "--", relative) == 0:
        return True
    return git("check-ignore", "-q", "--", relative) != 0


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
    """The project's goals config (``.loopstate/goals.json``), or the seed's defaults."""
    data = safefs.read_file(Path(root) / CONFIG_PATH, Path(root))
    return GoalsConfig() if data is None else parse_config(data)


def markdown_status(service: Any, root: str, goal_id: str, target: str) -> proto.MarkdownStatus:
    """Is the rendered file at ``target`` the current projection of the goal?"""
    path = target_path(root, target)
    text = read_text(root, path)
    if text is None:
        raise LoopstateError(ErrorCode.NOT_FOUND, f"{target} does not exist; write it with `loopstate goals render`",
                             target=target)
    return service.query(root, proto.CheckMarkdown(goal_id=goal_id, markdown=text))


def runs_domain_has(project: Project, run_id: str) -> bool:
    """Does the runs domain of this project hold a run with this id (a non-empty ``runs.<id>`` stream)?

    Runs-domain ids are UUIDs; any other id cannot name one. (The runs domain is
    imported here, not at the top: a goals reader does not pay for it.)
    """
    from loopstate.domains.runs import run_stream

    try:
        stream = run_stream(run_id)
    except LoopstateError:
        return False
    try:
        return (project.dir / "streams" / f"{stream}.jsonl").stat().st_size > 0
    except OSError:
        return False


def _evidence_run_target(command: Any) -> str | None:
    """The run an evidence command attaches to, if it does (typed or in the seed's raw shape)."""
    if isinstance(command, proto.AttachEvidence):
        return command.target_id if command.target_kind == "run" else None
    if isinstance(command, proto.AppendEvent) and command.event_type == "evidence_attached":
        payload = command.payload
        if payload.get("target_kind") == "run" and isinstance(payload.get("target_id"), str):
            return payload["target_id"]
    return None


def goal_ids(project: Project) -> list[str]:
    """The goals of this project: those whose stream holds at least one byte."""
    ids = []
    for name in project.stream_names():
        if name.startswith(PREFIX):
            try:
                if (project.dir / "streams" / f"{name}.jsonl").stat().st_size > 0:
                    ids.append(name[len(PREFIX):])
            except OSError:
                continue
    return ids


def _with_known_goals(project: Project, state: GoalState, ctx: Any) -> Any:
    """The context, with the project's goal ids when this goal has no event yet."""
    if state.store.event_count:
        return ctx
    return dataclasses.replace(ctx, extra={**ctx.extra, names.KNOWN_GOALS: goal_ids(project)})


class GoalsEffects:
    def before_query(self, service: Any, project: Project, state: GoalState, ctx: Any) -> Any:
        return _with_known_goals(project, state, ctx)

    def before_decide(self, service: Any, project: Project, state: GoalState, command: Any, ctx: Any) -> Any:
        ctx = _with_known_goals(project, state, ctx)
        run_target = _evidence_run_target(command)
        if run_target is not None:
            known = runs_domain_has(project, run_target)
            return dataclasses.replace(ctx, extra={**ctx.extra, RUNS_DOMAIN_RUN: known})
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
        return dataclasses.replace(ctx, extra=extra)

    def after_append(self, service: Any, project: Project, folded: Any, records: list) -> None:
        for record in records:
            event = record.event
            if event["event_type"] == "projection_rendered" and event["payload"]["projection_kind"] == "markdown":
                write_rendered(project, folded.state, event)
            elif event["event_type"] == "snapshot_compacted":
                write_snapshot(project, folded, record)


EFFECTS = GoalsEffects()


def write_rendered(project: Project, state: GoalState, event: dict[str, Any]) -> None:
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


def snapshot_path(project: Project, stream: str) -> Path:
    return project.dir / "snapshots" / f"{stream}.json"


def write_snapshot(project: Project, folded: Any, record: Any) -> None:
    """Write the state folded through ``record``, bound to the digest of every byte up to it.

    The digest is the one the ledger kept while it verified and wrote those
    bytes; a ledger that does not know it (opened from a checkpoint that had
    none) writes no snapshot: one that vouched for bytes nobody hashed would
    let a reader skip a changed record.
    """
    stream = folded.ledger.stream
    prefix = stream.prefix_digest()
    if stream.identity is None or prefix is None or stream.position.offset != record.end:
        return
    body = state_bytes(folded.state)
    header = SnapshotHeader(
        format=SNAPSHOT_FORMAT, stream=stream.name, dev=stream.identity[0], ino=stream.identity[1],
        line_start=record.start, offset=record.end, sequence=record.event["append_sequence"],
        hash=record.event["event_hash"], state_checksum="sha256:" + canonical.sha256_hex(body),
        prefix_sha256=prefix,
    )
    path = snapshot_path(project, stream.name)
    safefs.ensure_dir(path.parent, project.dir)
    # A cache: losing it in a crash only costs a full replay, so no fsync.
    safefs.atomic_write(path, project.dir, canonical.encode(header) + b"\n" + body, durable=False)


def _usable_snapshot(project: Project, stream: Stream) -> tuple[tuple[SnapshotHeader, GoalState] | None, str | None]:
    """The snapshot, if it still describes this stream file; else why not."""
    try:
        raw = safefs.read_file(snapshot_path(project, stream.name), project.dir)
    except (OSError, LoopstateError) as exc:
        return None, f"snapshot unreadable ({exc})"
    if raw is None:
        return None, None
    first, _, body = raw.partition(b"\n")
    try:
        snap = msgspec.json.decode(first, type=SnapshotHeader)
    except msgspec.MsgspecError as exc:
        return None, f"snapshot header undecodable ({exc})"
    if snap.format != SNAPSHOT_FORMAT or snap.stream != stream.name:
        return None, "snapshot of another format or stream"
    fd = safefs.open_read(stream.path, stream.base)
    if fd is None:
        return None, "stream file missing"
    with ThreadPoolExecutor(1, thread_name_prefix="loopstate-snapshot-prefix") as pool:
        try:
            info = os.fstat(fd)
            if (info.st_dev, info.st_ino) != (snap.dev, snap.ino) or info.st_size < snap.offset:
                return None, "stream file replaced or shorter than the snapshot"
            line = os.pread(fd, snap.offset - snap.line_start, snap.line_start)
            if not line.endswith(b"\n"):
                return None, "snapshot position is not a record boundary"
            if not verified_line(line[:-1], snap.line_start, LAYOUT, stream.name, snap.sequence, snap.hash):
                return None, "the record at the snapshot position changed"
            # The state stands for every event before it: those bytes must be the ones folded
            # into it. Hashed in a thread (hashlib lets go of the GIL) while the state decodes.
            prefix = pool.submit(_prefix_sha256_closing, os.dup(fd), snap.offset)
        finally:
            os.close(fd)
        if "sha256:" + canonical.sha256_hex(body) != snap.state_checksum:
            return None, "snapshot state does not match its checksum"
        try:
            state = msgspec.json.decode(body, type=GoalState)
        except msgspec.MsgspecError as exc:
            return None, f"snapshot state undecodable ({exc})"
        if prefix.result() != snap.prefix_sha256:
            return None, "the stream bytes before the snapshot changed since it was written"
    return (snap, state), None


def _prefix_sha256_closing(fd: int, end: int) -> str:
    try:
        return prefix_sha256(fd, end)
    finally:
        os.close(fd)


def load_existing(project: Project, goal_id: str, *, use_snapshot: bool = True) -> Replay:
    """``load_state`` for a read that names a goal: one without events is NOT_FOUND, naming the goals there are."""
    loaded = load_state(project, goal_id, use_snapshot=use_snapshot)
    if loaded.state.store.event_count == 0:
        raise names.missing_goal(goal_id, goal_ids(project))
    return loaded


def load_state(project: Project, goal_id: str, *, use_snapshot: bool = True) -> Replay:
    """Fold a goal's stream, starting from a valid snapshot when there is one.

    Used by short-lived readers (CLI board, render check). Events after the
    snapshot are verified and folded as usual; a snapshot that no longer matches
    its stream is ignored (a full replay), never trusted.
    """
    name = stream_name(goal_id)
    stream = Stream(project.dir, name, LAYOUT)
    state, since, note = initial(goal_id), None, None
    if not project.exists():
        return Replay(state, 0, None)
    with project.lock(name).shared():
        if use_snapshot:
            usable, note = _usable_snapshot(project, stream)
            if usable is not None:
                snap, state = usable
                since = snap.sequence
                stream.position = Position(snap.offset, snap.sequence, snap.hash)
                stream.identity = (snap.dev, snap.ino)
        folded = 0
        for record in stream.read_new():
            state = evolve(state, record.event)
            folded += 1
    return Replay(state, folded, since, note)
