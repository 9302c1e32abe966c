"""Each stream's Merkle tree kept as it grows, and signed checkpoints written when they are due.

Rebuilding a stream's tree costs a pass over the whole file. Instead the tree
is kept as its compact range (core/merkle.CompactRange: the roots of its perfect
subtrees, at most one per bit of the size) together with the byte offset it
covers, so the next checkpoint hashes only the lines appended since: O(new
events) and O(log n) hashing per event, whatever the stream's size.

The kept tree lives in ``transparency/<stream>.tree`` beside the newest signed
checkpoint. It is a cache, never trusted on its own: it records where its last
line starts and that line's chain hash, and a kept tree whose last line is not
that line any more (the stream was replaced by a purge or a recover, or the
file was edited) is dropped and the tree rebuilt from the first byte. The
stream's bytes themselves are verified by the ledger before they reach here.

A checkpoint is due when ``LOOPSTATE_CHECKPOINT_EVENTS`` events (default 256)
were appended since the last one, or ``LOOPSTATE_CHECKPOINT_SECONDS`` seconds
(default 300) passed since it and at least one event was appended; 0 turns that
trigger off, and both 0 turn automatic checkpoints off (``loopstate checkpoint``
still makes them). A stream never signed counts its seconds from when this
process first kept its tree: the time trigger is for long-lived processes (the
sidecar, the MCP server), the count works everywhere.
"""

from __future__ import annotations

import os
import time
from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING

import msgspec

from loopstate.core import canonical, merkle, safefs
from loopstate.core.project import Project

if TYPE_CHECKING:
    from loopstate.core.backend import Store
    from loopstate.core.chain import ChainLayout
    from loopstate.core.stream import Record, Stream

FOLDER = "transparency"
DEFAULT_EVERY_EVENTS = 256
DEFAULT_EVERY_SECONDS = 300.0


class KeptTree(msgspec.Struct, kw_only=True):
    """The tree over a stream's first ``size`` lines, which end at byte ``offset``."""

    size: int = 0
    offset: int = 0
    last_line_start: int = 0
    last_hash: str | None = None  # the chain hash of line ``size``, to tell this file from a replaced one
    peaks: list[bytes] = []
    signed_size: int = 0  # the size of the newest signed checkpoint
    signed_at: float = 0.0  # when it was signed; or when this process first kept a never-signed tree

    def compact(self) -> merkle.CompactRange:
        return merkle.CompactRange(self.size, self.peaks)


def tree_path(project: Project, stream_name: str) -> Path:
    return project.dir / FOLDER / f"{stream_name}.tree"


def _setting(name: str, default: float) -> float:
    raw = os.environ.get(name)
    try:
        value = float(raw) if raw else default
    except ValueError:
        value = default
    return max(value, 0.0)


def load(project: Project, stream: Stream) -> KeptTree:
    """The kept tree of this stream if it still describes the file's lines, else an empty one."""
    raw = safefs.read_file(tree_path(project, stream.name), project.dir)
    if raw is None:
        return KeptTree(signed_at=time.time())
    try:
        kept = msgspec.msgpack.decode(raw, type=KeptTree)
        kept.compact()  # the peaks fit the size
    except (msgspec.DecodeError, ValueError):
        return KeptTree(signed_at=time.time())
    if kept.size == 0:
        return kept
    try:
        line = stream.read_line_at(kept.last_line_start, kept.offset - 1)
        still = msgspec.json.decode(line).get(stream.layout.hash_field) == kept.last_hash
    except (OSError, msgspec.DecodeError, AttributeError, Exception):  # noqa: BLE001 (a stale cache is only rebuilt)
        still = False
    return kept if still else KeptTree(signed_at=time.time())


CHUNK = 1 << 22


def extend(stream: Stream, kept: KeptTree, until: int) -> KeptTree:
    """Hash the verified lines between the kept tree's end and byte ``until`` into it, 4 MiB at a time."""
    if until <= kept.offset:
        return kept
    compact = kept.compact()
    start = kept.offset
    last_start, last_line, rest = kept.last_line_start, None, b""
    at = kept.offset
    while at < until:
        chunk = stream.read_line_at(at, min(until, at + CHUNK))
        at += len(chunk)
        lines = (rest + chunk).split(b"\n")
        rest = lines.pop()
        for line in lines:
            compact.append(merkle.leaf_hash(line))
            last_start, last_line = start, line
            start += len(line) + 1
    if last_line is None:
        return kept
    last_hash = msgspec.json.decode(last_line).get(stream.layout.hash_field)
    return KeptTree(size=compact.size, offset=start, last_line_start=last_start, last_hash=last_hash,
                    peaks=compact.peaks, signed_size=kept.signed_size, signed_at=kept.signed_at)


def extend_with(kept: KeptTree, records: Sequence[Record], hash_field: str) -> KeptTree:
    """Hash records this process just appended into the tree: each line is its event's canonical encoding.

    That is how the line was made (core/chain.seal) and what reading it back
    would give; a record whose encoding is not its line's length is a caller's
    mistake, refused rather than hashed wrongly.
    """
    compact = kept.compact()
    for record in records:
        line = canonical.encode(record.event)
        if len(line) + 1 != record.end - record.start:
            raise ValueError(f"record at byte {record.start} is not its event's canonical line")
        compact.append(merkle.leaf_hash(line))
    last = records[-1]
    return KeptTree(size=compact.size, offset=last.end, last_line_start=last.start, last_hash=last.event.get(hash_field),
                    peaks=compact.peaks, signed_size=kept.signed_size, signed_at=kept.signed_at)


def due(kept: KeptTree, now: float) -> bool:
    """Whether enough happened since the newest signed checkpoint to sign another."""
    new = kept.size - kept.signed_size
    if new <= 0:
        return False
    every_events = _setting("LOOPSTATE_CHECKPOINT_EVENTS", DEFAULT_EVERY_EVENTS)
    every_seconds = _setting("LOOPSTATE_CHECKPOINT_SECONDS", DEFAULT_EVERY_SECONDS)
    return bool((every_events and new >= every_events) or (every_seconds and now - kept.signed_at >= every_seconds))


def sign_and_keep(project: Project, stream_name: str, kept: KeptTree,
                  extensions: tuple[str, ...] = ()) -> tuple[KeptTree, str]:
    """Sign the kept tree's head, then keep the tree and the note (tree first: the note is what others read)."""
    from loopstate.service.transparency import sign_head

    note = sign_head(project, stream_name, kept.size, kept.compact().root(), extensions)
    kept = msgspec.structs.replace(kept, signed_size=kept.size, signed_at=time.time())
    folder = project.dir / FOLDER
    folder.mkdir(mode=0o700, exist_ok=True)
    safefs.atomic_write(tree_path(project, stream_name), project.dir, msgspec.msgpack.encode(kept), durable=False)
    safefs.atomic_write(folder / f"{stream_name}.checkpoint", project.dir, note.encode())
    return kept, note


_kept: dict[tuple[str, str], tuple[tuple[int, int] | None, KeptTree]] = {}


def grow_tree(project: Project, stream: Stream, records: Sequence[Record] = ()) -> None:
    """The engine's step after every durable append, under the stream's lock (service/engine.py).

    Keeping the tree is a side duty: should it fail (the key unreadable, the
    disk full), the command that appended stays acknowledged; the failure is
    logged and the next append or `loopstate checkpoint` tries again.
    """
    try:
        follow(project, stream, records)
    except Exception as exc:  # noqa: BLE001 (whatever happens here, the append is durable and answered)
        _warn("could not keep the Merkle tree of %s: %s", stream.name, exc)


def grow_tree_in_store(project: Project, store: Store, name: str, layout: ChainLayout,
                       records: Sequence[Record] = ()) -> None:
    """``grow_tree`` for a stream that is no local file (a shared store): the same tree, from the same
    canonical lines, kept and signed in this machine's data dir. Failures are logged, as there."""
    try:
        follow_store(project, store, name, layout, records)
    except Exception as exc:  # noqa: BLE001 (whatever happens here, the append is durable and answered)
        _warn("could not keep the Merkle tree of %s: %s", name, exc)


def follow_store(project: Project, store: Store, name: str, layout: ChainLayout,
                 records: Sequence[Record] = ()) -> str | None:
    """``follow`` through the storage contract: the lines others appended since the kept tree's end are
    read with ``Store.read`` after the tree's size (its lines are the stream's first ``size`` events),
    the ones just appended here are hashed from their records. Every store gives a line the same bytes
    and the same place (core/record.py), so the tree, its root and its checkpoints are the ones a local
    file of the same events would give."""
    project.ensure()  # the tree and checkpoints are kept in this machine's data dir, made on demand
    key = (str(project.dir), name)
    _, kept = _kept.get(key, (None, None))
    if kept is None or (records and kept.offset > records[0].start):
        kept = load_from_store(project, store, name, layout)  # first use, or the stream was replaced
    until = records[0].start if records else None
    kept = extend_from_store(store, name, layout, kept, until)
    if records and records[0].start == kept.offset:
        kept = extend_with(kept, records, layout.hash_field)
    note = None
    if due(kept, time.time()):
        kept, note = sign_and_keep(project, name, kept)
    _kept[key] = (None, kept)
    return note


def load_from_store(project: Project, store: Store, name: str, layout: ChainLayout) -> KeptTree:
    """The kept tree of stream ``name`` if its last line is still the store's event at that place, else an empty one."""
    raw = safefs.read_file(tree_path(project, name), project.dir)
    fresh = KeptTree(signed_at=time.time())
    if raw is None:
        return fresh
    try:
        kept = msgspec.msgpack.decode(raw, type=KeptTree)
        kept.compact()
    except (msgspec.DecodeError, ValueError):
        return fresh
    if kept.size == 0:
        return kept
    last = next(iter(store.read(name, layout, after=kept.size - 1)), None)
    still = last is not None and last.hash == kept.last_hash and last.start == kept.last_line_start and last.end == kept.offset
    return kept if still else fresh


def extend_from_store(store: Store, name: str, layout: ChainLayout, kept: KeptTree, until: int | None) -> KeptTree:
    """Hash the store's lines after the kept tree's last one into it, up to byte ``until`` (None: all)."""
    if until is not None and until <= kept.offset:
        return kept
    compact = kept.compact()
    last = None
    for stored in store.read(name, layout, after=kept.size):
        if until is not None and stored.start >= until:
            break
        if stored.start != (kept.offset if last is None else last.end):
            raise ValueError(f"stream {name} line {stored.sequence} is not where the kept tree ends")
        compact.append(merkle.leaf_hash(stored.line))
        last = stored
    if last is None:
        return kept
    return KeptTree(size=compact.size, offset=last.end, last_line_start=last.start, last_hash=last.hash,
                    peaks=compact.peaks, signed_size=kept.signed_size, signed_at=kept.signed_at)


def follow(project: Project, stream: Stream, records: Sequence[Record] = ()) -> str | None:
    """After a command made the stream durable up to its verified head: grow the tree, sign if due.

    A long-lived process keeps the tree in memory (O(log n) per event); a
    short-lived one starts from the kept file and hashes what came after the
    last signed checkpoint. Returns the note when one was signed.
    """
    key = (str(project.dir), stream.name)
    identity, kept = _kept.get(key, (None, None))
    if kept is None or identity != stream.identity or kept.offset > stream.position.offset:
        kept = load(project, stream)  # first use, or the file was replaced: only a tree that still fits it
    if records and records[0].start == kept.offset and records[-1].end == stream.position.offset:
        kept = extend_with(kept, records, stream.layout.hash_field)  # just appended here: no read
    else:
        kept = extend(stream, kept, stream.position.offset)
    note = None
    if due(kept, time.time()):
        kept, note = sign_and_keep(project, stream.name, kept)
    _kept[key] = (stream.identity, kept)
    return note


def rechained(project: Project, stream_name: str, lines: list[bytes], hash_field: str, why: str) -> None:
    """After a purge re-chained the stream (under its lock): sign the new history, saying so.

    The note carries the extension line ``purged <why>``: a witness that saw
    the old history reads it as the one legitimate rewrite, not as tampering.
    A stream never signed gets no purge note (nobody can hold it to an older
    history, and a purge makes no key). A failure is logged, never raised: the
    purge is done and durable.
    """
    _kept.pop((str(project.dir), stream_name), None)
    if not (project.dir / FOLDER / f"{stream_name}.checkpoint").exists():
        return
    try:
        compact, offset, last_start, last_line = merkle.CompactRange(), 0, 0, None
        for line in lines:
            compact.append(merkle.leaf_hash(line[:-1]))
            last_start, last_line = offset, line
            offset += len(line)
        last_hash = None if last_line is None else msgspec.json.decode(last_line).get(hash_field)
        kept = KeptTree(size=compact.size, offset=offset, last_line_start=last_start, last_hash=last_hash,
                        peaks=compact.peaks)
        sign_and_keep(project, stream_name, kept, (f"purged {why}",))
    except Exception as exc:  # noqa: BLE001 (the purge is durable whatever happens here)
        _warn("could not sign the purge checkpoint of %s: %s", stream_name, exc)


def _warn(message: str, *args: object) -> None:
    """Log a failure of this side duty; logging is imported only then (a hook's start never pays for it)."""
    import logging

    logging.getLogger("loopstate.transparency").warning(message, *args)
