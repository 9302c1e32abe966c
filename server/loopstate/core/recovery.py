"""Whole-stream verification and recovery, for `loopstate verify` and `recover`.

Verification re-hashes every record from the first byte (checkpoints are
checked, never trusted). Recovery keeps the verified prefix as the stream and
moves the damaged suffix, byte for byte, into a 0600 file in the quarantine
folder so the user can inspect it; it never invents or rewrites an event.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

from loopstate_protocol.errors import ErrorCode

from loopstate.core import canonical, checkpoint, quarantine, safefs
from loopstate.core.chain import ChainError
from loopstate.core.clock import format_time, system_clock
from loopstate.core.errors import LoopstateError
from loopstate.core.project import Project
from loopstate.core.stream import ProgressFn, Stream


def verify_stream(stream: Stream, progress: ProgressFn | None = None) -> dict[str, Any]:
    """Verify one stream completely; never raises for corruption, reports it."""
    report: dict[str, Any] = {"stream": stream.name, "ok": True}
    first = stream.position.sequence
    try:
        # A big stream is verified by worker processes, span by span, as far as it
        # is clean; the sequential scan takes over from there and names the first bad record.
        stream.verify_ahead(progress)
        for _ in stream.read_new(progress=progress):
            pass
        saved = checkpoint.load(stream)
        if saved is not None:
            checkpoint.validate(stream, saved)
    except ChainError as exc:
        report.update(ok=False, error={"code": exc.code.value, "offset": exc.offset, "sequence": exc.sequence, "reason": exc.reason})
    except LoopstateError as exc:
        report.update(ok=False, error={
            "code": exc.code.value, "offset": stream.position.offset,
            "sequence": stream.position.sequence + 1, "reason": exc.message,
        })
    report.update(events=stream.position.sequence - first, sequence=stream.position.sequence, hash=stream.position.hash, bytes=stream.position.offset)
    if stream.torn is not None:
        report["torn_tail"] = {
            "offset": stream.torn.offset, "length": stream.torn.length, "sha256": stream.torn.sha256, "reason": stream.torn.reason,
        }
    return report


def plan_recovery(stream: Stream) -> dict[str, Any]:
    """What ``recover_stream`` would do to this stream, from a full verification; writes nothing.

    ``action`` is "none" (the chain holds), "cut_torn_tail" (a partial final
    line, ``suffix_bytes`` long at ``offset``) or "recovered" (keep the
    ``events`` verified before ``offset``, quarantine the ``suffix_bytes`` after
    it, for ``reason``). A stream of a newer schema is refused, not planned.
    """
    report = verify_stream(stream)
    plan: dict[str, Any] = {"stream": stream.name, "events": report["events"]}
    if report["ok"]:
        torn = stream.torn
        if torn is None:
            plan["action"] = "none"
        else:
            plan.update(action="cut_torn_tail", offset=torn.offset, suffix_bytes=torn.length)
        return plan
    if report["error"]["code"] == ErrorCode.FUTURE_SCHEMA.value:
        raise LoopstateError(
            ErrorCode.FUTURE_SCHEMA,
            f"stream {stream.name!r} holds records of a newer schema; upgrade loopstate instead of recovering",
            stream=stream.name,
        )
    offset = stream.position.offset
    size = os.stat(stream.path).st_size
    plan.update(action="recovered", offset=offset, suffix_bytes=size - offset, reason=report["error"]["reason"])
    return plan


def recover_stream(project: Project, stream: Stream, export_dir: str | None = None, *,
                   allow_empty: bool = True) -> dict[str, Any]:
    """Cut a damaged stream back to its verified prefix (exclusive lock held by the caller).

    With ``allow_empty`` false, a stream whose very first record is damaged
    (recovery would keep 0 events) is left untouched and reported with action
    "needs_confirmation", so that a person can be asked first.
    """
    plan = plan_recovery(stream)
    result: dict[str, Any] = {"stream": stream.name, "events": plan["events"]}
    if plan["action"] == "none":
        result["action"] = "none"
        return result
    if plan["action"] == "cut_torn_tail":
        torn = stream.torn
        assert torn is not None  # what the plan found
        quarantine.record(project.dir, stream.name, {
            "offset": torn.offset, "length": torn.length, "sha256": torn.sha256,
            "reason": torn.reason, "at": format_time(system_clock()),
        })
        stream.cut_torn_tail()
        result.update(action="cut_torn_tail", offset=torn.offset, suffix_bytes=torn.length, quarantined_to=None)
        return result
    if plan["events"] == 0 and not allow_empty:
        return {**plan, "action": "needs_confirmation"}
    offset = plan["offset"]
    data = safefs.read_file(stream.path, project.dir) or b""
    prefix, suffix = data[:offset], data[offset:]
    stamp = format_time(system_clock()).replace(":", "")
    suffix_path = quarantine.path_for(project.dir, stream.name).with_name(f"{stream.name}.{stamp}.suffix")
    safefs.ensure_dir(suffix_path.parent, project.dir)
    safefs.atomic_write(suffix_path, project.dir, suffix)
    quarantine.record(project.dir, stream.name, {
        "offset": offset, "length": len(suffix), "sha256": canonical.sha256_hex(suffix),
        "reason": plan["reason"], "at": format_time(system_clock()), "moved_to": suffix_path.name,
    })
    if export_dir:
        result["exported_to"] = os.fspath(_export(Path(os.path.abspath(export_dir)) / f"{stream.name}.verified.jsonl", prefix))
    checkpoint.drop(stream)  # before the replace: the new file may get the old one's inode number
    safefs.atomic_write(stream.path, project.dir, prefix)
    result.update(action="recovered", offset=offset, suffix_bytes=len(suffix), quarantined_to=os.fspath(suffix_path))
    return result


def _export(target: Path, data: bytes) -> Path:
    """Write a new file outside the store (never over an existing one), durably:
    the file, its folder, and every folder made for it."""
    safefs.make_dirs_durably(target.parent)
    fd = os.open(target, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW | os.O_CLOEXEC, safefs.FILE_MODE)
    try:
        safefs.write_all(fd, data)
        os.fsync(fd)
    finally:
        os.close(fd)
    safefs.fsync_dir(target.parent)
    return target


__all__ = ["plan_recovery", "recover_stream", "verify_stream"]
