"""Schema migration of one stream, as seed 000 prescribes for any future version.

Under the stream's exclusive lock: verify the entire source chain from byte 0,
carry every event to the target version (one step function per version hop,
whatever the domain's version values are: 1, "1.0", "loopx_state_event_v0"),
re-seal the chain, write the new stream to a 0600 sibling temp file,
fsync it, atomically replace the stream, fsync the folder, and keep a
migration manifest in ``<project>/migrations/``. The manifest names both
files by length, SHA-256, event count and head, so anyone can check what was
migrated into what. v1 -> v1 is the identity: the same bytes come out.

A stream with a partial final line is not migrated (the next mutation or
``loopstate recover`` accounts for it first); a corrupt or future-schema
stream is refused with the reader's own error.
"""

from __future__ import annotations

from typing import Any, Callable, Mapping

from loopstate_protocol.errors import ErrorCode

from loopstate.core import canonical, checkpoint, safefs
from loopstate.core.chain import ChainLayout, Position, seal
from loopstate.core.clock import ClockFn, format_time, system_clock
from loopstate.core.errors import LoopstateError
from loopstate.core.project import Project
from loopstate.core.stream import Stream

# steps[v] = (w, fn): fn turns an event body of schema version v into one of version w.
Step = Callable[[dict[str, Any]], dict[str, Any]]


def migrate_stream(
    project: Project,
    name: str,
    layout: ChainLayout,
    *,
    target_version: Any,
    steps: Mapping[Any, tuple[Any, Step]] | None = None,
    clock: ClockFn = system_clock,
) -> dict[str, Any]:
    """Migrate stream ``name`` to ``target_version``; returns the manifest that was written."""
    steps = steps or {}
    if layout.classify_schema(target_version) != "ok":
        raise LoopstateError(
            ErrorCode.FUTURE_SCHEMA,
            f"this loopstate cannot write {layout.schema_field}={target_version!r}; upgrade loopstate",
            schema=target_version,
        )
    project.ensure()
    with project.lock(name).exclusive():
        stream = Stream(project.dir, name, layout)
        lines: list[bytes] = []
        versions: set[Any] = set()
        at = Position()
        chain_fields = (layout.sequence_field, layout.prev_field, layout.hash_field)
        for record in stream.read_new():  # full verify: every hash recomputed
            body = {k: v for k, v in record.event.items() if k not in chain_fields}
            version = body.get(layout.schema_field)
            versions.add(version)
            body = _carry(body, version, target_version, steps, layout, name, record.start)
            event, line = seal(body, layout, at)
            at = Position(at.offset + len(line), event[layout.sequence_field], event[layout.hash_field])
            lines.append(line)
        if stream.torn is not None:
            raise LoopstateError(
                ErrorCode.CONFLICT,
                f"stream {name!r} ends in a partial line at byte {stream.torn.offset}; run any mutation or "
                "`loopstate recover` first so it is quarantined, then migrate",
                stream=name,
                offset=stream.torn.offset,
            )
        old = safefs.read_file(stream.path, project.dir) or b""
        if len(old) != stream.position.offset:
            raise LoopstateError(ErrorCode.CONFLICT, f"stream {name!r} changed while it was being migrated", stream=name)
        new = b"".join(lines)
        if old:
            # The checkpoint names the old file; it goes first, durably: the new file may
            # get the old one's inode number, and a stale checkpoint would then block it.
            checkpoint.drop(stream)
            safefs.atomic_write(stream.path, project.dir, new)
        manifest = {
            "stream": name,
            "from_versions": sorted(versions, key=repr),
            "to_version": target_version,
            "identical": new == old,
            "migrated_at": format_time(clock()),
            "source": _describe(old, stream.position),
            "target": _describe(new, at),
        }
        folder = project.dir / "migrations"
        safefs.ensure_dir(folder, project.dir)
        stamp = manifest["migrated_at"].replace(":", "")
        safefs.atomic_write(folder / f"{name}.to-v{target_version}.{stamp}.json", project.dir, canonical.encode(manifest))
        return manifest


def _carry(body: dict[str, Any], version: Any, target: Any, steps: Mapping[Any, tuple[Any, Step]],
           layout: ChainLayout, name: str, offset: int) -> dict[str, Any]:
    """Apply the step chain from ``version`` to ``target`` (none when they are equal)."""
    for _ in range(len(steps) + 1):
        if version == target and type(version) is type(target):
            return body
        hop = steps.get(version)
        if hop is None:
            break
        version, step = hop
        body = step(dict(body))
        body[layout.schema_field] = version
    raise LoopstateError(
        ErrorCode.INVALID_PARAMS,
        f"stream {name!r} holds {layout.schema_field}={version!r} at byte {offset} and there is no migration path "
        f"from it to {target!r}",
        stream=name,
        offset=offset,
    )


def _describe(data: bytes, head: Position) -> dict[str, Any]:
    return {"bytes": len(data), "sha256": canonical.sha256_hex(data), "events": head.sequence, "head_hash": head.hash}
