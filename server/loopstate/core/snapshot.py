"""Projection snapshots: a domain's folded state saved beside the core checkpoint, bound to it.

A cold reader (a CLI command, a hook) would otherwise fold the whole stream on
every start. A snapshot holds the state folded through one head, and carries
the checkpoint record of that head (``checkpoint.Checkpoint``: the file's
device and inode, the hash of its first record, the head's offset, sequence
and hash, and the SHA-256 of every byte before it when the writer knew it). A
reader uses it only after ``checkpoint.vouch`` found the file still the one it
names, the head record there re-hashing to the binding's hash, and the bytes
before it vouched for: by the verified mark (``verified_mark``: nobody wrote
the file since a process that had verified it through at least that head; an
O(1) check) or else by the prefix digest. Then the bytes the state was folded
from are the bytes on disk, and the reader starts at the head and folds only
what follows. A snapshot that does not match in any way is ignored, never
trusted and never an error: the reader folds from byte 0 as it would without
one, and that read reports whatever is wrong with the stream.

The file is msgpack (msgspec): a small envelope with a format number, the
stream and domain names, the binding, the checksum of the state's msgpack
encoding, and that encoding itself, embedded as the envelope's last value
(``msgspec.Raw``: the reader checks and decodes it where it lies in the file's
bytes, without a copy). It is written atomically (a 0600 temp file renamed over
the old one) and not fsynced: a snapshot lost in a crash only costs a full fold.

The domain says what its state is on disk (``snapshot_type(stream)``, and
optionally ``snapshot_state(state)`` / ``restore_state(stream, obj)`` to leave
out what is not folded from the stream); this module owns the bytes. The
contract for the state type: anything msgspec encodes and decodes. Fields
typed ``msgspec.Raw`` are passed through untouched both ways: on the way in,
a Raw (say, a section the domain decoded lazily and never changed) is written
as the very bytes it holds, with no decode and re-encode; on the way out each
Raw field is a zero-copy slice of the snapshot file's bytes, which the domain
decodes when, and if, it needs that part (and which keeps the file's bytes
alive as long as it is held).

Writing is split for the writer's lock (``capture`` then ``Pending.write``):
under the stream's exclusive lock only what must be taken at that head is
taken, the binding and the state's encoding (the state is folded further in
place once the lock is released); the checksum, the envelope and the file
write come after the lock is released. That is safe because a snapshot checks
itself: whichever of two racing writers renames last, the file at the name is
whole and bound to the head it was taken at, and a reader checks that binding
against the stream before it uses anything.
"""

from __future__ import annotations

import gc
import zlib
from pathlib import Path
from typing import Any, Callable, Generic, TypeVar

import msgspec

from loopstate.core import safefs
from loopstate.core.checkpoint import Checkpoint
from loopstate.core.errors import LoopstateError
from loopstate.core.stream import Stream

# Bumped whenever the envelope or any domain's snapshot type changes shape: a file
# of another format is ignored (a full fold), and the next writer replaces it.
# 2: the state embedded as msgpack (read as msgspec.Raw), no longer a bin of it.
# 3: the state's checksum is its CRC-32, not its SHA-256.
FORMAT = 3

# A ledger with a codec takes a snapshot once the folded tail since the last one is at
# least MIN_TAIL bytes (~90 intent-sized events) and at least 1/TAIL_SHARE of the last
# snapshot's size: a cold reader folds at most that tail after decoding the snapshot, and
# a writer's cost per appended byte stays a constant whatever the state's size.
MIN_TAIL = 64 << 10
TAIL_SHARE = 8


def checksum(state: bytes | memoryview) -> int:
    """The state's CRC-32: what says a snapshot was not torn or damaged at rest.

    Every cold read checks it over the whole state, so it must cost little
    beside the decode (zlib's CRC-32: ~0.15 ms per MB here, SHA-256 ~0.5).
    The ledger's hash chain is the authority, and the snapshot is bound to it
    (``checkpoint.vouch``); a cryptographic digest of a cache nobody signs
    would stop no one who can write the file.
    """
    return zlib.crc32(state)


B = TypeVar("B")


class Envelope(msgspec.Struct, Generic[B], kw_only=True):
    """A snapshot file. ``binding`` says which head of which store the state was folded
    through, in the store's own terms: a JSONL file's ``Checkpoint`` here, a PostgreSQL
    stream's head in ``core/postgres/snapshots.py``."""

    format: int
    stream: str
    domain: str
    binding: B
    state_crc32: int
    state: msgspec.Raw  # last: the state's own msgpack, where it lies in the file


SnapshotFile = Envelope[Checkpoint]
"""The JSONL store's snapshot file."""


class Codec(msgspec.Struct, frozen=True):
    """What a ledger needs to save and restore its owner's folded state.

    ``capture()`` returns the state as an instance of ``state_type`` (nothing
    that is not folded from the stream); ``restore(obj)`` makes the owner's
    state the one ``obj`` describes.
    """

    domain: str
    state_type: Any
    capture: Callable[[], Any]
    restore: Callable[[Any], None]


def codec_for(domain: Any, stream: str, get: Callable[[], Any], put: Callable[[Any], None]) -> Codec | None:
    """The codec of ``domain``'s state on ``stream``; None for a domain without snapshots."""
    snapshot_type = getattr(domain, "snapshot_type", None)
    if snapshot_type is None:
        return None
    to_snapshot = getattr(domain, "snapshot_state", None)
    from_snapshot = getattr(domain, "restore_state", None)
    return Codec(
        domain=domain.name,
        state_type=snapshot_type(stream),
        capture=get if to_snapshot is None else (lambda: to_snapshot(get())),
        restore=put if from_snapshot is None else (lambda obj: put(from_snapshot(stream, obj))),
    )


def path_for(stream: Stream) -> Path:
    return stream.base / "snapshots" / f"{stream.name}.msgpack"


class Pending(msgspec.Struct, frozen=True):
    """A snapshot taken under the lock, to be written after it is released."""

    stream_name: str
    domain: str
    binding: Any  # the store's binding (``Envelope``)
    state: bytes

    def encode(self) -> bytes:
        return msgspec.msgpack.encode(Envelope(
            format=FORMAT, stream=self.stream_name, domain=self.domain, binding=self.binding,
            state_crc32=checksum(self.state), state=msgspec.Raw(self.state),
        ))

    def size(self) -> int:
        """About what the file will be: the state's encoding dominates it."""
        return len(self.state)

    def write(self, stream: Stream) -> int:
        """Write it beside the stream's file (``write_at``)."""
        return self.write_at(path_for(stream), stream.base)

    def write_at(self, target: Path, base: Path) -> int:
        """Write it at ``target`` inside the folder ``base`` (atomically, not fsynced: a
        snapshot lost in a crash only costs a longer read); returns the file's size, 0 when
        it could not be written (another writer's first mutation swept the temp file away,
        a full disk): only a cache."""
        data = self.encode()
        try:
            safefs.ensure_dir(target.parent, base)
            safefs.atomic_write(target, base, data, durable=False)
        except (OSError, LoopstateError):
            return 0
        return len(data)


def capture(stream_name: str, binding: Checkpoint, codec: Codec) -> Pending | None:
    """What a snapshot of the state folded through ``binding`` needs from under the lock
    (the caller holds it and has folded exactly through that head): the state's encoding.
    None for a binding with no first record's hash: it names no file it could be checked
    against."""
    if binding.first_hash is None:
        return None
    return Pending(stream_name, codec.domain, binding, msgspec.msgpack.encode(codec.capture()))


def encode(stream_name: str, binding: Checkpoint, codec: Codec) -> bytes:
    return Pending(stream_name, codec.domain, binding, msgspec.msgpack.encode(codec.capture())).encode()


def decode(data: bytes, stream_name: str, codec: Codec, envelope_type: Any = SnapshotFile) -> tuple[Any, Any] | None:
    """The binding and the state object in ``data``, if it is a whole snapshot of this
    stream and domain in this format, its binding of ``envelope_type``'s kind; None
    otherwise (torn, edited, older, another's, another store's). The state is checked
    and decoded in place (``msgspec.Raw``: no copy of its bytes)."""
    try:
        envelope = msgspec.msgpack.decode(data, type=envelope_type)
    except msgspec.MsgspecError:
        return None
    if (envelope.format, envelope.stream, envelope.domain) != (FORMAT, stream_name, codec.domain):
        return None
    if checksum(envelope.state) != envelope.state_crc32:
        return None
    # A large state is hundreds of thousands of new objects, none of them garbage: the
    # collector would walk them again and again while they are made (about half the time).
    collecting = gc.isenabled()
    gc.disable()
    try:
        return envelope.binding, msgspec.msgpack.decode(envelope.state, type=codec.state_type)
    except msgspec.MsgspecError:
        return None
    finally:
        if collecting:
            gc.enable()


def save(stream: Stream, binding: Checkpoint, codec: Codec) -> int:
    """Write the snapshot of the state folded through ``binding`` now (caller holds the
    stream's exclusive lock and has folded exactly through that head); returns its size
    in bytes, 0 when nothing was written."""
    pending = capture(stream.name, binding, codec)
    return 0 if pending is None else pending.write(stream)


def load(stream: Stream, codec: Codec) -> tuple[Checkpoint, Any, int] | None:
    """The stream's snapshot (its binding, its state object and the file's size), decoded
    but not yet checked against the file."""
    return load_at(path_for(stream), stream.base, stream.name, codec, SnapshotFile)


def load_at(target: Path, base: Path, stream_name: str, codec: Codec, envelope_type: Any) -> tuple[Any, Any, int] | None:
    """The snapshot at ``target`` (its binding, its state object and the file's size),
    decoded but not yet checked against the store; None when there is none to use."""
    try:
        data = safefs.read_file(target, base)
    except (OSError, LoopstateError):  # unreadable, or not a safe regular file: not used
        return None
    if not data:
        return None
    decoded = decode(data, stream_name, codec, envelope_type)
    return None if decoded is None else (*decoded, len(data))
