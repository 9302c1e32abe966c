"""Queries for signed checkpoints and Merkle proofs of a project's streams.

Every stream's lines are the leaves of a Merkle tree (RFC 9162 hashing), and
loopstate signs the tree's head as a checkpoint (a C2SP-style signed note) as
the stream grows. These reads hand a client what it needs to hold the store to
its history without trusting it: the public key, the newest checkpoint, an
inclusion proof of one event, a consistency proof from a checkpoint it kept.
Proofs and notes are the exact texts ``loopstate prove`` and ``loopstate
checkpoint`` print, which ``loopstate check-proof`` (or any checker of those
formats, docs/verifying.md) checks with the public key alone. They only read:
a proof carries a freshly signed checkpoint, nothing is kept.
"""

from __future__ import annotations

from typing import Annotated, Literal

import msgspec

from loopstate_protocol.base import MAX_SAFE_INTEGER
from loopstate_protocol.project import ProjectQuery

StreamName = Annotated[str, msgspec.Meta(min_length=1, max_length=200)]


class ProjectPublicKey(ProjectQuery, tag="project.public_key", kw_only=True):
    """The verifier key of the project's checkpoints (``NAME+KEYID+KEY``); made on first use."""


class ProjectCheckpoint(ProjectQuery, tag="project.checkpoint", kw_only=True):
    """The newest signed checkpoint the store keeps for ``stream`` (null when none was signed yet)."""

    stream: StreamName


class ProjectProveInclusion(ProjectQuery, tag="project.prove_inclusion", kw_only=True):
    """An inclusion proof (tlog-proof text) of the event with this ``sequence`` against a fresh checkpoint."""

    stream: StreamName
    sequence: Annotated[int, msgspec.Meta(ge=1, le=MAX_SAFE_INTEGER)]


class ProjectProveConsistency(ProjectQuery, tag="project.prove_consistency", kw_only=True):
    """A consistency proof from ``checkpoint`` (a signed note this client kept) to a fresh one.

    Refused with CORRUPT_LEDGER when the stream no longer begins with what
    that checkpoint signed: history was rewritten or cut.
    """

    checkpoint: Annotated[str, msgspec.Meta(min_length=1, max_length=65536)]


class PublicKey(msgspec.Struct, kw_only=True):
    key: str


class CheckpointNote(msgspec.Struct, kw_only=True):
    stream: str
    note: str | None
    tree_size: int | None


class ProofText(msgspec.Struct, kw_only=True):
    kind: Literal["inclusion", "consistency"]
    stream: str
    tree_size: int  # the size of the fresh checkpoint the proof carries
    proof: str


QUERIES = (ProjectPublicKey, ProjectCheckpoint, ProjectProveInclusion, ProjectProveConsistency)
RESULTS = (PublicKey, CheckpointNote, ProofText)
