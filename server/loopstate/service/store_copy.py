"""Copying a project's streams from one store to another: `loopstate store export` and `import`.

A team moving a project onto its shared store (or a machine taking a copy of
it) copies every stream through the storage contract (core/backend.py), so any
two stores work the same way, and the copy keeps every byte: the target holds
the source's very canonical lines, hence the same hashes, and ``loopstate
verify`` checks one chain on either side.

The rules, per stream:

- the source's chain is verified whole before anything is written;
- the target's history must be a prefix of the source's: its head's hash is
  the source's hash at that sequence (the chain makes the rest follow). Then
  only what comes after it is appended, at that expected head, so a second
  copy appends nothing (a copy is idempotent by sequence and hash) and a copy
  cut short goes on where it stopped;
- a target that holds another history (a different hash at a sequence both
  have) is refused before anything is written, for every stream: merging two
  histories is not a copy. A target ahead of the source on the same history is
  left as it is and said;
- after the copy the target's chain is read back and verified whole, and its
  head must be the source's.

Appends are cut only between batches (a batch is all or nothing for a reader),
so a copy cut short leaves whole batches only.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from typing import Any

import msgspec

from loopstate_protocol.errors import ErrorCode

from loopstate.core.backend import EMPTY, Head, Store, StoredEvent, verify_chain
from loopstate.core.chain import BATCH, ChainLayout, batch_part
from loopstate.core.errors import LoopstateError
from loopstate.service.front import stream_layout

CHUNK = 2000  # events per append (rounded up to the end of a batch)
CopyProgress = Callable[[str, int, int], None]
"""Told (stream, events copied, events to copy) as a copy goes on."""


class StreamCopy(msgspec.Struct, kw_only=True):
    """What a copy did to one stream."""

    stream: str
    source_head: int
    target_head_before: int
    target_head: int
    copied: int
    action: str  # "copied", "up_to_date" or "target_ahead"


class _Plan(msgspec.Struct):
    stream: str
    layout: ChainLayout
    source: Head
    target: Head


def where(store: Store) -> str:
    """A store as a person tells it apart: a local one by its data dir, any other by its URL (no password)."""
    return f"jsonl:{store.project.data_dir}" if store.url.split(":", 1)[0] in ("jsonl", "file") else store.url


def _marker_closes(line: bytes) -> bool:
    """Whether the event on ``line`` ends its batch (or stands alone)."""
    if b'"' + BATCH.encode() + b'"' not in line:
        return True
    part = batch_part(msgspec.json.decode(line).get(BATCH))
    return part is None or part[0] == part[1]


def _hash_at(store: Store, name: str, layout: ChainLayout, sequence: int) -> str | None:
    for event in store.read(name, layout, after=sequence - 1):
        return event.hash if event.sequence == sequence else None
    return None


def _verified_head(store: Store, name: str, layout: ChainLayout) -> Head:
    return verify_chain(store.read(name, layout), layout, name)


def plan(source: Store, target: Store) -> list[_Plan]:
    """Every stream's heads on both sides, each chain verified; refuses a diverging target before any write."""
    plans, diverged = [], []
    for name in source.stream_names():
        layout = stream_layout(name)
        head = _verified_head(source, name, layout)
        there = _verified_head(target, name, layout)
        if there.sequence <= head.sequence:
            agrees = there == EMPTY or _hash_at(source, name, layout, there.sequence) == there.hash
        else:
            agrees = _hash_at(target, name, layout, head.sequence) == head.hash
        if not agrees:
            diverged.append((name, min(there.sequence, head.sequence)))
        plans.append(_Plan(name, layout, head, there))
    if diverged:
        names = ", ".join(f"{name} (at or before sequence {seq})" for name, seq in diverged)
        raise LoopstateError(
            ErrorCode.CONFLICT,
            f"the target {where(target)} holds a different history of this project's {names}: a copy only adds what "
            f"comes after the target's head, it never merges two histories; nothing was copied. Copy into an "
            "empty store, or keep the target's history and drop the source's",
            target=where(target), streams=[name for name, _ in diverged])
    return plans


def _chunks(events: Iterator[StoredEvent]) -> Iterator[list[StoredEvent]]:
    chunk: list[StoredEvent] = []
    for event in events:
        chunk.append(event)
        if len(chunk) >= CHUNK and _marker_closes(event.line):
            yield chunk
            chunk = []
    if chunk:
        yield chunk


def copy_project(source: Store, target: Store, progress: CopyProgress | None = None) -> list[StreamCopy]:
    """Copy every stream of ``source`` into ``target`` by the rules above; what was done, stream by stream."""
    done = []
    for p in plan(source, target):
        if p.target.sequence >= p.source.sequence:
            action = "up_to_date" if p.target == p.source else "target_ahead"
            done.append(StreamCopy(stream=p.stream, source_head=p.source.sequence, target_head_before=p.target.sequence,
                                   target_head=p.target.sequence, copied=0, action=action))
            continue
        head, total = p.target, p.source.sequence - p.target.sequence
        for chunk in _chunks(source.read(p.stream, p.layout, after=p.target.sequence)):
            head = target.append(p.stream, p.layout, chunk, expected=head)
            if progress is not None:
                progress(p.stream, head.sequence - p.target.sequence, total)
        after = _verified_head(target, p.stream, p.layout)
        if after != p.source:
            raise LoopstateError(
                ErrorCode.CORRUPT_LEDGER,
                f"after the copy, stream {p.stream} in {where(target)} ends at sequence {after.sequence}, not at the "
                f"source's {p.source.sequence}; run `loopstate verify` on both stores", stream=p.stream)
        done.append(StreamCopy(stream=p.stream, source_head=p.source.sequence, target_head_before=p.target.sequence,
                               target_head=after.sequence, copied=after.sequence - p.target.sequence, action="copied"))
    return done


def summary(copies: list[StreamCopy]) -> dict[str, Any]:
    return {"streams": copies, "copied": sum(c.copied for c in copies)}
