"""Signed notes and tree-head checkpoints in the text formats transparency logs share.

A checkpoint says "this stream had N events and this Merkle root" and is signed,
so whoever holds it can later hold loopstate to it. Its text follows the C2SP
tlog-checkpoint format (compatibility reference: c2sp.org/tlog-checkpoint):

    <origin>                 loopstate/<project id>/<stream>
    <tree size>              decimal, no leading zeros
    <root hash>              standard base64 of the 32-byte root
    [extension lines]        loopstate writes one for a purge (see docs/verifying.md)

wrapped in a signed note (c2sp.org/signed-note): the text, a blank line, and one
line per signature, ``— <key name> <base64(key id || signature)>``. The key is
Ed25519; its id is the first four bytes of SHA-256(name || 0x0A || 0x01 ||
public key), and a verifier is told the key as ``<name>+<hex id>+<base64(0x01 ||
public key)>``. The signature covers the text bytes exactly, final newline
included. The cryptography package signs and verifies; nothing here is
hand-rolled beyond the text framing.
"""

from __future__ import annotations

import base64
import binascii
import hashlib
from dataclasses import dataclass

from cryptography.exceptions import InvalidSignature
from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey, Ed25519PublicKey
from cryptography.hazmat.primitives.serialization import Encoding, PublicFormat

ED25519 = b"\x01"
DASH = "\u2014"  # EM DASH: the signature line's first character
MAX_TREE_SIZE = 2**63 - 1


class NoteError(ValueError):
    """A note, checkpoint or key that is malformed, or whose signature does not verify."""


def check_name(name: str) -> str:
    """A key name or origin: non-empty, no white space, no '+' (the verifier key's separator)."""
    if not name or any(c.isspace() for c in name) or "+" in name:
        raise NoteError(f"{name!r} cannot name a key or a log: it must be non-empty, without spaces or '+'")
    return name


def raw_public(key: Ed25519PublicKey) -> bytes:
    return key.public_bytes(Encoding.Raw, PublicFormat.Raw)


def key_id(name: str, public: bytes) -> bytes:
    return hashlib.sha256(name.encode() + b"\n" + ED25519 + public).digest()[:4]


def verifier_key(name: str, public: bytes) -> str:
    """The one-line public key a verifier is given: name, key id and key."""
    check_name(name)
    return f"{name}+{key_id(name, public).hex()}+{base64.b64encode(ED25519 + public).decode()}"


@dataclass(frozen=True)
class Verifier:
    name: str
    id: bytes
    public: Ed25519PublicKey

    @classmethod
    def parse(cls, text: str) -> Verifier:
        parts = text.strip().split("+", 2)
        if len(parts) != 3:
            raise NoteError("a verifier key is NAME+KEYID+KEY (as `loopstate checkpoint --public-key` prints it)")
        name, hex_id, encoded = parts
        check_name(name)
        try:
            data = base64.b64decode(encoded, validate=True)
            wanted = bytes.fromhex(hex_id)
        except (binascii.Error, ValueError) as exc:
            raise NoteError(f"the verifier key's id or key is not hex / base64: {exc}") from None
        if len(data) != 33 or data[:1] != ED25519:
            raise NoteError("the verifier key is not an Ed25519 key (type byte 0x01 and 32 bytes)")
        if key_id(name, data[1:]) != wanted:
            raise NoteError("the verifier key's id does not match its name and key: it was altered")
        return cls(name, wanted, Ed25519PublicKey.from_public_bytes(data[1:]))


def sign(text: str, name: str, key: Ed25519PrivateKey) -> str:
    """The signed note of ``text`` (which must end with a newline) under key ``name``."""
    check_name(name)
    if not text.endswith("\n") or "\n\n" in text:
        raise NoteError("a note's text ends with a newline and has no blank line")
    signature = key.sign(text.encode())
    blob = base64.b64encode(key_id(name, raw_public(key.public_key())) + signature).decode()
    return f"{text}\n{DASH} {name} {blob}\n"


def open_note(note: str, verifier: Verifier) -> str:
    """The text of ``note`` if ``verifier`` signed it; NoteError otherwise."""
    text, sep, signatures = note.partition("\n\n")
    if not sep or not signatures.endswith("\n"):
        raise NoteError("not a signed note: the text, a blank line, then signature lines")
    text += "\n"
    for line in signatures[:-1].split("\n"):
        dash, _, rest = line.partition(" ")
        name, _, blob = rest.partition(" ")
        if dash != DASH or not name or not blob:
            raise NoteError(f"malformed signature line {line!r}")
        if name != verifier.name:
            continue
        try:
            raw = base64.b64decode(blob, validate=True)
        except binascii.Error:
            raise NoteError(f"signature line {line!r} is not base64") from None
        if raw[:4] != verifier.id:
            continue
        try:
            verifier.public.verify(raw[4:], text.encode())
        except InvalidSignature:
            raise NoteError(f"the signature of {name} does not verify: the note was altered") from None
        return text
    raise NoteError(f"the note carries no signature by {verifier.name} with key id {verifier.id.hex()}")


@dataclass(frozen=True)
class Checkpoint:
    origin: str
    size: int
    root: bytes
    extensions: tuple[str, ...] = ()

    def text(self) -> str:
        check_name(self.origin)
        lines = [self.origin, str(self.size), base64.b64encode(self.root).decode(), *self.extensions]
        if any(not line or "\n" in line for line in self.extensions):
            raise NoteError("a checkpoint's extension lines are non-empty single lines")
        return "\n".join(lines) + "\n"

    @classmethod
    def parse(cls, text: str) -> Checkpoint:
        lines = text.split("\n")
        if len(lines) < 4 or lines[-1] != "" or any(not line for line in lines[:-1]):
            raise NoteError("a checkpoint is origin, tree size and root hash, one per line, then optional extensions")
        origin, size_text, root_text, *extensions = lines[:-1]
        check_name(origin)
        if not size_text.isdigit() or (size_text != "0" and size_text.startswith("0")) or int(size_text) > MAX_TREE_SIZE:
            raise NoteError(f"tree size {size_text!r} is not a decimal without leading zeros")
        try:
            root = base64.b64decode(root_text, validate=True)
        except binascii.Error:
            raise NoteError(f"root hash {root_text!r} is not base64") from None
        if len(root) != 32:
            raise NoteError(f"the root hash is {len(root)} bytes, not 32")
        return cls(origin, int(size_text), root, tuple(extensions))
