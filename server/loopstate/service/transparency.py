"""Signed checkpoints of a project's streams, and the proofs that hold loopstate to them.

A checkpoint is the Merkle root of a stream's verified lines at a size, signed
with this machine's key (core/signed_note.py, core/merkle.py). Whoever keeps one
can later ask for a consistency proof that today's stream still begins with
exactly those lines, or an inclusion proof that one event is in it, and check
either with the public key alone. The chain is verified before any tree is
built, so a damaged stream is CORRUPT_LEDGER here as everywhere, never a tree.

Files, beside the stream in the project's store folder:

- ``keys/checkpoint-ed25519.pem`` in the data dir: the private key, made on first
  use (mode 0600, created atomically so two processes end with one key);
- ``transparency/<stream>.checkpoint``: the newest signed checkpoint of the
  stream, replaced atomically each time one is made.
"""

from __future__ import annotations

import base64
import os
from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any, NamedTuple, overload

from loopstate_protocol.errors import ErrorCode
from loopstate_protocol.project import ProjectQuery

from loopstate.core import canonical, merkle, safefs
from loopstate.core.errors import LoopstateError
from loopstate.core.project import Project
from loopstate.core.proof_check import CONSISTENCY_HEADER, INCLUSION_HEADER
from loopstate.core.signed_note import Checkpoint, NoteError, Verifier, open_note, raw_public, sign, verifier_key
from loopstate.core.stream import Stream
from loopstate.service.front import stream_layout

if TYPE_CHECKING:
    from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey

    from loopstate.core.backend import Store

KEY_FILE = "checkpoint-ed25519.pem"


def key_name(project: Project) -> str:
    return f"loopstate/{project.project_id}"


def origin(project: Project, stream: str) -> str:
    return f"{key_name(project)}/{stream}"


def _key_path(project: Project) -> Path:
    return project.data_dir / "keys" / KEY_FILE


def signing_key(project: Project) -> Ed25519PrivateKey:
    """This data dir's checkpoint key, made on first use: 0600, published with link() so it is whole or absent.

    cryptography is imported here, on the signing path only: an append that signs nothing never loads it.
    """
    from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey
    from cryptography.hazmat.primitives.serialization import Encoding, NoEncryption, PrivateFormat, load_pem_private_key

    path = _key_path(project)
    if not path.exists():
        path.parent.mkdir(mode=0o700, parents=True, exist_ok=True)
        pem = Ed25519PrivateKey.generate().private_bytes(Encoding.PEM, PrivateFormat.PKCS8, NoEncryption())
        temp = path.with_name(f".{KEY_FILE}.{os.getpid()}.tmp")
        fd = os.open(temp, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
        try:
            os.write(fd, pem)
            os.fsync(fd)
        finally:
            os.close(fd)
        try:
            os.link(temp, path)  # fails if another process published its key first: that one wins
        except FileExistsError:
            pass
        finally:
            os.unlink(temp)
        safefs.fsync_dir(path.parent)
    if path.stat().st_mode & 0o077:
        raise LoopstateError(ErrorCode.VALIDATION_FAILED,
                             f"the checkpoint key {path} is readable by others; `chmod 600 {path}` and try again")
    key = load_pem_private_key(path.read_bytes(), password=None)
    if not isinstance(key, Ed25519PrivateKey):
        raise LoopstateError(ErrorCode.VALIDATION_FAILED, f"{path} is not an Ed25519 key; move it away to make a new one")
    return key


def public_key(project: Project) -> str:
    """The verifier key of this project's checkpoints, as an outside verifier is given it."""
    return verifier_key(key_name(project), raw_public(signing_key(project).public_key()))


CHUNK = 1 << 22


class Leaves(Sequence[bytes]):
    """A stream's leaf hashes packed in one buffer: 32 bytes a leaf, not a Python object each (1M leaves: 32 MB)."""

    def __init__(self, packed: bytes) -> None:
        self._packed = packed

    def __len__(self) -> int:
        return len(self._packed) // merkle.HASH_SIZE

    @overload
    def __getitem__(self, index: int) -> bytes: ...

    @overload
    def __getitem__(self, index: slice) -> Leaves: ...

    def __getitem__(self, index: int | slice) -> bytes | Leaves:
        if isinstance(index, slice):
            start, stop, step = index.indices(len(self))
            if step != 1:
                raise ValueError("leaf slices are contiguous")
            return Leaves(self._packed[start * merkle.HASH_SIZE:stop * merkle.HASH_SIZE])
        if index < 0:
            index += len(self)
        if not 0 <= index < len(self):
            raise IndexError(index)
        return self._packed[index * merkle.HASH_SIZE:(index + 1) * merkle.HASH_SIZE]


class Tree(NamedTuple):
    """A stream's verified lines as Merkle leaves, and the one line a proof carries (if asked for)."""

    stream: str
    leaves: Leaves
    root: bytes
    line: bytes | None = None  # the line asked for with ``keep``
    root_at: bytes | None = None  # the root at the size asked for with ``root_at``


def read_tree(project: Project, stream_name: str, keep: int | None = None, root_at: int | None = None) -> Tree:
    """Verify the stream from its first byte, then hash its lines as leaves, all under the shared lock.

    The file is read in chunks, so memory is the packed leaf hashes and one
    chunk, whatever the stream's size; ``keep`` names a line to hand back.
    """
    _known(project, stream_name)
    packed, kept, count, rest = bytearray(), None, 0, b""
    compact, earlier = merkle.CompactRange(), merkle.EMPTY_ROOT if root_at == 0 else None
    store = shared_store(project)
    if store is not None:  # the stored lines, verified as they are read: the same bytes as a file's
        for stored in store.read(stream_name, stream_layout(stream_name)):
            leaf = merkle.leaf_hash(stored.line)
            packed += leaf
            compact.append(leaf)
            if count == keep:
                kept = stored.line
            count += 1
            if count == root_at:
                earlier = compact.root()
        return Tree(stream_name, Leaves(bytes(packed)), compact.root(), kept, earlier)
    stream = Stream(project.dir, stream_name, stream_layout(stream_name))
    with project.lock(stream_name).shared():
        stream.verify_ahead()
        for _ in stream.read_new(parallel=True):
            pass
        left = stream.position.offset
        with open(stream.path, "rb") as f:
            while left:
                chunk = f.read(min(CHUNK, left))
                if not chunk:
                    raise LoopstateError(ErrorCode.CORRUPT_LEDGER,
                                         f"{stream_name} shrank while it was read; run `loopstate verify`")
                left -= len(chunk)
                lines = (rest + chunk).split(b"\n")
                rest = lines.pop()
                for line in lines:
                    leaf = merkle.leaf_hash(line)
                    packed += leaf
                    compact.append(leaf)
                    if count == keep:
                        kept = line
                    count += 1
                    if count == root_at:
                        earlier = compact.root()
    return Tree(stream_name, Leaves(bytes(packed)), compact.root(), kept, earlier)


def sign_head(project: Project, stream_name: str, size: int, root: bytes, extensions: tuple[str, ...] = ()) -> str:
    """The signed checkpoint note of one tree head of one stream."""
    text = Checkpoint(origin(project, stream_name), size, root, extensions).text()
    return sign(text, key_name(project), signing_key(project))


def make_checkpoint(project: Project, stream_name: str) -> str:
    """Verify the stream from its first byte, sign its tree head and keep it as the newest; return the note.

    The tree grows from the kept one (service/tree_heads.py): only lines after
    it are hashed. The chain is verified in full all the same.
    """
    from loopstate.service import tree_heads

    store = shared_store(project)
    if store is not None:
        _known(project, stream_name)
        layout = stream_layout(stream_name)
        for _ in store.read(stream_name, layout):  # the whole chain, verified as it is read
            pass
        kept = tree_heads.extend_from_store(store, stream_name, layout,
                                            tree_heads.load_from_store(project, store, stream_name, layout), None)
        project.ensure()  # the tree and its checkpoints are this machine's, kept in its data dir
        return tree_heads.sign_and_keep(project, stream_name, kept)[1]
    stream = _verified(project, stream_name)
    with project.lock(stream_name).shared():
        kept = tree_heads.extend(stream, tree_heads.load(project, stream), stream.position.offset)
        return tree_heads.sign_and_keep(project, stream_name, kept)[1]


def shared_store(project: Project) -> Store | None:
    """The project's store when its streams are not this machine's files (a team's PostgreSQL), else None:
    there the lines are read through the storage contract, and the tree is grown from them."""
    from loopstate.core.stores import open_store
    from loopstate.service.shared_stop import on_shared_store

    return open_store(project) if on_shared_store(project.root) else None


def stream_names(project: Project) -> list[str]:
    """The project's streams, from whichever store holds them."""
    store = shared_store(project)
    return store.stream_names() if store is not None else project.stream_names()


def _known(project: Project, stream_name: str) -> None:
    if stream_name not in stream_names(project):
        raise LoopstateError(ErrorCode.NOT_FOUND, f"no stream {stream_name!r} in this project; `loopstate log` lists them",
                             stream=stream_name)


def _verified(project: Project, stream_name: str) -> Stream:
    _known(project, stream_name)
    stream = Stream(project.dir, stream_name, stream_layout(stream_name))
    with project.lock(stream_name).shared():
        stream.verify_ahead()
        for _ in stream.read_new(parallel=True):
            pass
    return stream


def sign_tree(project: Project, tree: Tree) -> str:
    """A fresh signed checkpoint of a tree read whole, for the proof that carries it (a read: nothing is kept)."""
    return sign_head(project, tree.stream, len(tree.leaves), tree.root)


def read_checkpoint(project: Project, note: str) -> tuple[Checkpoint, str]:
    """An older checkpoint of this project, its signature checked; which stream it names."""
    try:
        cp = Checkpoint.parse(open_note(note, Verifier.parse(public_key(project))))
    except NoteError as exc:
        raise LoopstateError(ErrorCode.VALIDATION_FAILED, f"not a checkpoint of this project: {exc}") from None
    prefix = key_name(project) + "/"
    if not cp.origin.startswith(prefix):
        raise LoopstateError(ErrorCode.VALIDATION_FAILED,
                             f"the checkpoint is of {cp.origin}, not of a stream of this project ({prefix}...)")
    return cp, cp.origin[len(prefix):]


def prove_inclusion(project: Project, stream_name: str, index: int) -> str:
    """A tlog-proof of the event at 0-based ``index`` of the stream, against a fresh checkpoint.

    The proof's ``extra`` line carries the event's stored line, so the verifier
    recomputes the leaf itself.
    """
    tree = read_tree(project, stream_name, keep=index)
    if tree.line is None:
        raise LoopstateError(ErrorCode.NOT_FOUND,
                             f"{stream_name} has {len(tree.leaves)} events; there is no event number {index + 1}")
    note = sign_tree(project, tree)
    hashes = merkle.inclusion_proof(tree.leaves, index)
    body = [INCLUSION_HEADER, f"extra {base64.b64encode(tree.line).decode()}", f"index {index}",
            *(base64.b64encode(h).decode() for h in hashes)]
    return "\n".join(body) + "\n\n" + note


def check_against(project: Project, old: Checkpoint, stream_name: str, tree: Tree | None = None) -> dict[str, Any]:
    """The stream still begins with exactly the lines ``old`` signed; CORRUPT_LEDGER naming what changed if not."""
    tree = read_tree(project, stream_name, root_at=old.size) if tree is None else tree
    if old.size > len(tree.leaves):
        raise LoopstateError(ErrorCode.CORRUPT_LEDGER,
                             f"{stream_name} has {len(tree.leaves)} events, fewer than the {old.size} the checkpoint "
                             "signed: history was cut", stream=stream_name)
    if tree.root_at != old.root:
        raise LoopstateError(ErrorCode.CORRUPT_LEDGER,
                             f"{stream_name} no longer begins with the {old.size} events the checkpoint signed: "
                             "history was rewritten", stream=stream_name)
    return {"ok": True, "stream": stream_name, "events": len(tree.leaves), "checkpoint_size": old.size}


def prove_consistency(project: Project, old_note: str) -> str:
    """A proof that the stream an older checkpoint names still begins with exactly what it signed."""
    old, stream_name = read_checkpoint(project, old_note)
    tree = read_tree(project, stream_name, root_at=old.size)
    check_against(project, old, stream_name, tree)
    hashes = merkle.consistency_proof(tree.leaves, old.size)
    body = [CONSISTENCY_HEADER, f"old {old.size}", *(base64.b64encode(h).decode() for h in hashes)]
    return "\n".join(body) + "\n\n" + sign_tree(project, tree)


def locate(project: Project, event: str) -> tuple[str, int]:
    """The stream and 0-based index of an event named by its event_id, or as STREAM:SEQUENCE."""
    stream_name, sep, number = event.rpartition(":")
    if sep and number.isdigit():
        sequence = int(number)
        if sequence < 1:
            raise LoopstateError(ErrorCode.INVALID_PARAMS, f"{event!r}: sequences start at 1")
        return stream_name, sequence - 1
    store = shared_store(project)
    if store is not None:
        for name in store.stream_names():
            for index, stored in enumerate(store.read(name, stream_layout(name))):
                if stored.line.find(event.encode()) >= 0 and canonical.decode(stored.line).get("event_id") == event:
                    return name, index
    for name in project.stream_names() if store is None else ():
        stream = Stream(project.dir, name, stream_layout(name))
        with project.lock(name).shared():
            for index, record in enumerate(stream.read_new()):
                if record.event.get("event_id") == event:
                    return name, index
    raise LoopstateError(ErrorCode.NOT_FOUND,
                         f"no event {event!r} in this project; name it by its event_id or as STREAM:SEQUENCE "
                         "(`loopstate log` shows both)")


def answer(project: Project, query: ProjectQuery) -> Any:
    """The result of one proof query of the protocol (loopstate_protocol.proofs); reads only."""
    from loopstate_protocol import proofs

    from loopstate.core.signed_note import NoteError
    from loopstate.service.tree_heads import FOLDER

    if isinstance(query, proofs.ProjectPublicKey):
        return proofs.PublicKey(key=public_key(project))
    if isinstance(query, proofs.ProjectCheckpoint):
        try:
            note = (project.dir / FOLDER / f"{query.stream}.checkpoint").read_text(encoding="utf-8")
        except FileNotFoundError:
            return proofs.CheckpointNote(stream=query.stream, note=None, tree_size=None)
        try:
            size = Checkpoint.parse(open_note(note, Verifier.parse(public_key(project)))).size
        except NoteError as exc:
            raise LoopstateError(ErrorCode.CORRUPT_LEDGER,
                                 f"the kept checkpoint of {query.stream} does not verify: {exc}") from None
        return proofs.CheckpointNote(stream=query.stream, note=note, tree_size=size)
    if isinstance(query, proofs.ProjectProveInclusion):
        proof = prove_inclusion(project, query.stream, query.sequence - 1)
        return proofs.ProofText(kind="inclusion", stream=query.stream, tree_size=_size_of(proof), proof=proof)
    if isinstance(query, proofs.ProjectProveConsistency):
        proof = prove_consistency(project, query.checkpoint)
        _, stream = read_checkpoint(project, query.checkpoint)
        return proofs.ProofText(kind="consistency", stream=stream, tree_size=_size_of(proof), proof=proof)
    raise LoopstateError(ErrorCode.INVALID_PARAMS, f"no proof query {type(query).__name__}")


def _size_of(proof: str) -> int:
    """The tree size of the checkpoint a proof carries (its note's second line)."""
    return int(proof.split("\n\n", 1)[1].split("\n")[1])
