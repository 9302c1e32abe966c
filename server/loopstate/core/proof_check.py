"""Checking a loopstate proof with nothing but the proof, a checkpoint and the public key.

This is what an outside party runs (``loopstate check-proof``): it never opens a
store. Two proof texts, both a header, some lines, a blank line and the signed
checkpoint they are proven against:

- inclusion, the C2SP tlog-proof format (compatibility reference:
  c2sp.org/tlog-proof): ``c2sp.org/tlog-proof@v1``, ``extra <base64 of the
  event's line>``, ``index <0-based position>``, then the audit path, one base64
  hash per line, lowest level first;
- consistency, loopstate's own format in the same style:
  ``loopstate/consistency-proof@v1``, ``old <size of the older checkpoint>``,
  then the RFC 9162 consistency proof, one base64 hash per line. The verifier
  holds the older checkpoint itself; the proof carries the newer.
"""

from __future__ import annotations

import base64
import binascii
from dataclasses import dataclass

from loopstate.core import merkle
from loopstate.core.signed_note import Checkpoint, NoteError, Verifier, open_note

INCLUSION_HEADER = "c2sp.org/tlog-proof@v1"
CONSISTENCY_HEADER = "loopstate/consistency-proof@v1"


@dataclass(frozen=True)
class Inclusion:
    checkpoint: Checkpoint
    index: int
    line: bytes


def _split(proof: str, header: str) -> tuple[list[str], str]:
    body, sep, note = proof.partition("\n\n")
    lines = body.split("\n")
    if not sep or lines[0] != header:
        raise NoteError(f"not a {header} proof: it starts with {lines[0]!r}")
    return lines[1:], note


def _hashes(lines: list[str]) -> list[bytes]:
    try:
        hashes = [base64.b64decode(line, validate=True) for line in lines]
    except binascii.Error:
        raise NoteError("a proof hash is not base64") from None
    if any(len(h) != merkle.HASH_SIZE for h in hashes):
        raise NoteError("a proof hash is not 32 bytes")
    return hashes


def _number(line: str, word: str) -> int:
    key, _, value = line.partition(" ")
    if key != word or not value.isdigit():
        raise NoteError(f"expected '{word} <number>', found {line!r}")
    return int(value)


def check_inclusion(proof: str, verifier: Verifier) -> Inclusion:
    """The checkpoint, index and line an inclusion proof proves; NoteError if it proves nothing."""
    lines, note = _split(proof, INCLUSION_HEADER)
    if not lines or not lines[0].startswith("extra "):
        raise NoteError("a loopstate inclusion proof carries the event's line as its 'extra' line")
    try:
        line = base64.b64decode(lines[0][len("extra "):], validate=True)
    except binascii.Error:
        raise NoteError("the 'extra' line is not base64") from None
    index = _number(lines[1] if len(lines) > 1 else "", "index")
    checkpoint = Checkpoint.parse(open_note(note, verifier))
    if not merkle.verify_inclusion(merkle.leaf_hash(line), index, checkpoint.size, _hashes(lines[2:]), checkpoint.root):
        raise NoteError(f"the proof does not place this event at index {index} of the signed tree of "
                        f"{checkpoint.size} events: proof or event altered")
    return Inclusion(checkpoint, index, line)


def check_consistency(old_note: str, proof: str, verifier: Verifier) -> tuple[Checkpoint, Checkpoint]:
    """The older and newer checkpoints, once the proof shows the newer extends the older."""
    old = Checkpoint.parse(open_note(old_note, verifier))
    lines, note = _split(proof, CONSISTENCY_HEADER)
    size = _number(lines[0] if lines else "", "old")
    new = Checkpoint.parse(open_note(note, verifier))
    if new.origin != old.origin:
        raise NoteError(f"the proof is about {new.origin}, the checkpoint about {old.origin}")
    if size != old.size:
        raise NoteError(f"the proof starts from {size} events, the checkpoint has {old.size}")
    if not merkle.verify_consistency(old.size, new.size, _hashes(lines[1:]), old.root, new.root):
        raise NoteError(f"the log of {new.size} events does not extend the checkpoint of {old.size}: "
                        "history was rewritten")
    return old, new
