"""Projection snapshots of a PostgreSQL stream: this machine's cache of a fold, bound to a head.

A cold reader of a long stream would otherwise fetch and verify every row on every start.
The snapshot (``core/snapshot.py``'s envelope and codec) is kept on this machine, in the
project's folder of its data dir (``snapshots/postgresql/<stream>.msgpack``), not in the
database: it is a cache of what this machine folded, costs the server nothing, needs no
change to the shared schema, and another machine's bug cannot hand it a wrong state.

The binding is the head the state was folded through: its sequence, its event's hash and
the byte offset after it, and the store it was read from (the URL without its password).
A reader uses it only when the database still holds that very event at that sequence:
its read starts at that row (``PostgresLedger``: the read that every catch-up makes
anyway, one row more) and compares the stored hash. The hash chain makes that one
comparison enough: the head's hash covers every line before it, so equal hashes mean the
same history as the one this machine verified row by row when it folded it. A stream cut
back or re-chained since (a ``recover`` or an ``import`` elsewhere) has another event, or
none, at that sequence, and the reader folds from the first event as if there were no
snapshot. What a snapshot reader does not do is re-read the rows before the head: a row
altered in place in the database under an intact later chain is found by ``loopstate
verify``, which reads every row, not by a reader that starts from a snapshot (a reader on
a JSONL file re-hashes the prefix, or trusts the verified mark, for the same case).
"""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, Any

import msgspec

from loopstate.core import safefs, snapshot
from loopstate.core.errors import LoopstateError

if TYPE_CHECKING:
    from loopstate.core.project import Project


class Binding(msgspec.Struct, frozen=True):
    """The head a PostgreSQL snapshot's state was folded through."""

    store: str  # the store URL without its password: a snapshot of another database is not used
    sequence: int
    hash: str
    offset: int  # the byte offset after the head's event (core/record.py's offsets)


SnapshotFile = snapshot.Envelope[Binding]


def path_for(project: Project, stream: str) -> Path:
    return project.dir / "snapshots" / "postgresql" / f"{stream}.msgpack"


def load(project: Project, stream: str, codec: snapshot.Codec) -> tuple[Binding, Any, int] | None:
    """The stream's snapshot on this machine (binding, state object, file size), decoded
    and checksummed but not yet checked against the database; None when there is none."""
    return snapshot.load_at(path_for(project, stream), project.data_dir, stream, codec, SnapshotFile)


def sweep(project: Project, stream: str) -> None:
    """Remove the temp files a process killed mid-write left beside the stream's snapshot. Safe at
    any time: a writer whose temp file is removed before its rename only writes no snapshot."""
    target = path_for(project, stream)
    try:
        safefs.remove_orphan_temps(target.parent, target.name)
    except OSError:
        pass  # only disk is at stake


def write(project: Project, pending: snapshot.Pending) -> int:
    """Write a snapshot taken at a committed head (``snapshot.Pending`` with a ``Binding``);
    its size, 0 when it could not be written (a cache: nothing fails for it)."""
    try:
        project.ensure()
    except (OSError, LoopstateError):  # an unwritable data dir only costs the cache
        return 0
    return pending.write_at(path_for(project, pending.stream_name), project.data_dir)
