"""Someone watching: each new signed checkpoint is checked against the history this witness already saw.

A witness (the hooks on every event, the sidecar on every change) keeps its own
copy of each stream's Merkle tree as a compact range, grown from the stream's
lines as they appear, and the last signed checkpoint it checked. When the store
publishes a newer checkpoint, the witness grows its own tree to that size and
compares roots. If the store's history before that point was edited, dropped,
reordered, or cut and re-appended, even re-sealed so its hash chain holds again,
the witness's root differs and it raises an alarm: "history was rewritten". It
needs no proof from the store and costs O(new events) per check; a check whose
checkpoint did not change since the last one reads two small files and stops.

The first checkpoint a witness sees it takes on trust (it hashes the stream up
to it once); the key that signed it is pinned, and a checkpoint signed by
another key is an alarm too. A stream that the store itself re-chained (a
purge, a ``loopstate recover``) is not tampering: the purge leaves a signed
purge checkpoint (``purged`` extension line), and the witness then starts
again from it, reporting "purged at ..." once instead of an alarm.

The witness's state lives apart from the project's store, in
``LOOPSTATE_WITNESS_DIR`` or else ``<data dir>/witness/``, one folder per
watcher (``hooks``, ``sidecar``: each raises its own alarm, so the user sees it
in the editor even when a hook saw it first) and project: it is exactly as safe
as that folder. Protection against someone who can rewrite
both is a checkpoint kept elsewhere (``loopstate checkpoint --publish``).
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Literal, NamedTuple

import msgspec

from loopstate.core import merkle, safefs
from loopstate.core.project import Project
from loopstate.service.tree_heads import FOLDER

PURGED = "purged"


class Seen(msgspec.Struct, kw_only=True):
    """What a witness knows of one stream: its own tree, and the last checkpoint it checked."""

    size: int = 0
    offset: int = 0
    peaks: list[bytes] = []
    note: str | None = None
    key: str | None = None  # the verifier key pinned at first sight
    alarm: str | None = None  # the alarm raised for ``note``, so it is raised once


class Verdict(NamedTuple):
    """What one check found (a NamedTuple: a hook defines no dataclass at its start)."""

    stream: str
    ok: bool  # False: an alarm
    message: str
    size: int
    purged: bool = False  # the stream was purged (ok, but news: what the user knew of it was re-chained)


Watcher = Literal["hooks", "sidecar"]


def witness_dir(project: Project, who: Watcher) -> Path:
    base = os.environ.get("LOOPSTATE_WITNESS_DIR")
    return (Path(base) if base else project.data_dir / "witness") / who / project.project_id


def _load(project: Project, who: Watcher, stream: str) -> Seen:
    path = witness_dir(project, who) / f"{stream}.seen"
    try:
        return msgspec.msgpack.decode(path.read_bytes(), type=Seen)
    except (OSError, msgspec.DecodeError):
        return Seen()


def _save(project: Project, who: Watcher, stream: str, seen: Seen) -> None:
    folder = witness_dir(project, who)
    safefs.make_dirs_durably(folder)
    safefs.replace_with(folder / f"{stream}.seen", msgspec.msgpack.encode(seen), durable=False)


def _grow(project: Project, stream: str, seen: Seen, size: int) -> Seen | None:
    """The witness's tree grown to ``size`` leaves from the stream file; None if the file has fewer lines there."""
    from loopstate.service.shared_stop import on_shared_store

    if on_shared_store(project.root):
        return _grow_from_store(project, stream, seen, size)
    compact = merkle.CompactRange(seen.size, seen.peaks)
    offset = seen.offset
    path = project.dir / "streams" / f"{stream}.jsonl"
    try:
        with open(path, "rb") as f:
            f.seek(offset)
            while compact.size < size:
                line = f.readline()
                if not line.endswith(b"\n"):
                    return None
                compact.append(merkle.leaf_hash(line[:-1]))
                offset += len(line)
    except OSError:
        return None
    return msgspec.structs.replace(seen, size=compact.size, offset=offset, peaks=compact.peaks)


def _grow_from_store(project: Project, stream: str, seen: Seen, size: int) -> Seen | None:
    """``_grow`` on a store without a local file (a team's PostgreSQL): the lines after the witness's
    tree are the store's events after that many, the same bytes a file would hold; None if it has
    fewer events than ``size`` there, or what it holds does not read back as a chain."""
    from loopstate.core.errors import LoopstateError
    from loopstate.core.stores import open_store
    from loopstate.service.front import stream_layout

    compact = merkle.CompactRange(seen.size, seen.peaks)
    offset = seen.offset
    try:
        for stored in open_store(project).read(stream, stream_layout(stream), after=compact.size):
            if compact.size >= size:
                break
            compact.append(merkle.leaf_hash(stored.line))
            offset = stored.end
    except LoopstateError:
        return None
    if compact.size < size:
        return None
    return msgspec.structs.replace(seen, size=compact.size, offset=offset, peaks=compact.peaks)


def check(project: Project, stream: str, who: Watcher = "hooks") -> Verdict | None:
    """Check the stream's newest signed checkpoint against what this witness saw; None when there is nothing new.

    An alarm (``ok`` false) is returned once per offending checkpoint; the same
    checkpoint found again later is not news.
    """
    note_path = project.dir / FOLDER / f"{stream}.checkpoint"
    try:
        note = note_path.read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError):
        return None
    seen = _load(project, who, stream)
    if note == seen.note:
        return None
    from loopstate.core.signed_note import Checkpoint, NoteError, Verifier, open_note
    from loopstate.service.transparency import public_key

    key = seen.key or public_key(project)
    try:
        checkpoint = Checkpoint.parse(open_note(note, Verifier.parse(key)))
    except NoteError as exc:
        return _alarm(project, who, stream, seen, note, f"its newest checkpoint does not verify with the key first seen: {exc}")
    purge = next((line for line in checkpoint.extensions if line.startswith(PURGED + " ")), None)
    if purge is not None and seen.note is not None:
        fresh = _grow(project, stream, Seen(key=key), checkpoint.size)
        if fresh is not None and merkle.CompactRange(fresh.size, fresh.peaks).root() == checkpoint.root:
            _save(project, who, stream, msgspec.structs.replace(fresh, note=note))
            return Verdict(stream, True, f"{stream} was {purge}; watching from there", checkpoint.size, purged=True)
    if checkpoint.size < seen.size:
        return _alarm(project, who, stream, seen, note, f"its newest checkpoint has {checkpoint.size} events, fewer than the "
                      f"{seen.size} already seen: history was cut")
    grown = _grow(project, stream, seen, checkpoint.size)
    if grown is None:
        return _alarm(project, who, stream, seen, note, f"the stream no longer holds the {checkpoint.size} events its "
                      "checkpoint signed: history was cut")
    if merkle.CompactRange(grown.size, grown.peaks).root() != checkpoint.root:
        first = seen.note is None
        return _alarm(project, who, stream, seen, note, "its newest checkpoint does not match the stream's own lines" if first
                      else f"its checkpoint of {checkpoint.size} events does not extend the {seen.size} seen before: "
                      "history was rewritten")
    _save(project, who, stream, msgspec.structs.replace(grown, note=note, key=key, alarm=None))
    return Verdict(stream, True, f"{stream}: checkpoint of {checkpoint.size} events consistent with what was seen",
                   checkpoint.size)


def _alarm(project: Project, who: Watcher, stream: str, seen: Seen, note: str, message: str) -> Verdict | None:
    """Raise the alarm once for this checkpoint: the witness keeps its own tree, and remembers it said so."""
    if seen.alarm == note:
        return None
    _save(project, who, stream, msgspec.structs.replace(seen, alarm=note))
    return Verdict(stream, False, f"loopstate: {stream}: {message}", seen.size)


def check_all(project: Project, who: Watcher = "hooks") -> list[Verdict]:
    """Every stream of the project that has a signed checkpoint; what changed since this witness last looked."""
    folder = project.dir / FOLDER
    try:
        names = sorted(p.name[:-len(".checkpoint")] for p in folder.iterdir() if p.name.endswith(".checkpoint"))
    except OSError:
        return []
    return [v for v in (check(project, name, who) for name in names) if v is not None]
