"""Signed notes and checkpoints (core/signed_note.py): the framing, the key id, and every way to break them."""

from __future__ import annotations

import base64

import pytest
from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey

from loopstate.core.signed_note import (
    DASH, Checkpoint, NoteError, Verifier, key_id, open_note, raw_public, sign, verifier_key,
)

NAME = "loopstate/abc"
TEXT = Checkpoint("loopstate/abc/intent", 3, bytes(range(32))).text()


@pytest.fixture
def key() -> Ed25519PrivateKey:
    return Ed25519PrivateKey.generate()


def verifier(key: Ed25519PrivateKey, name: str = NAME) -> Verifier:
    return Verifier.parse(verifier_key(name, raw_public(key.public_key())))


def test_a_checkpoint_is_three_lines_and_parses_back() -> None:
    assert TEXT == f"loopstate/abc/intent\n3\n{base64.b64encode(bytes(range(32))).decode()}\n"
    assert Checkpoint.parse(TEXT) == Checkpoint("loopstate/abc/intent", 3, bytes(range(32)))
    with_ext = Checkpoint("o", 0, bytes(32), ("purged 4..9",))
    assert Checkpoint.parse(with_ext.text()) == with_ext


def test_a_signed_note_opens_with_its_key_and_carries_the_key_id(key: Ed25519PrivateKey) -> None:
    note = sign(TEXT, NAME, key)
    assert note.startswith(TEXT + "\n" + DASH + " " + NAME + " ")
    blob = base64.b64decode(note.rsplit(" ", 1)[1])
    assert blob[:4] == key_id(NAME, raw_public(key.public_key())) and len(blob) == 68
    assert open_note(note, verifier(key)) == TEXT


@pytest.mark.parametrize("edit", [
    lambda n: n.replace("\n3\n", "\n4\n", 1),           # the size
    lambda n: n.replace("loopstate/abc/intent", "loopstate/abc/runs", 1),  # the origin
    lambda n: n[:-10] + ("A" if n[-10] != "A" else "B") + n[-9:],  # the signature
])
def test_any_changed_byte_fails_to_open(key: Ed25519PrivateKey, edit) -> None:
    with pytest.raises(NoteError):
        open_note(edit(sign(TEXT, NAME, key)), verifier(key))


def test_another_key_or_name_does_not_open_the_note(key: Ed25519PrivateKey) -> None:
    note = sign(TEXT, NAME, key)
    with pytest.raises(NoteError, match="no signature by"):
        open_note(note, verifier(Ed25519PrivateKey.generate()))
    with pytest.raises(NoteError, match="no signature by"):
        open_note(note, verifier(key, "loopstate/other"))


def test_a_verifier_key_round_trips_and_an_altered_one_is_refused(key: Ed25519PrivateKey) -> None:
    text = verifier_key(NAME, raw_public(key.public_key()))
    name, hex_id, blob = text.split("+", 2)
    assert name == NAME and len(hex_id) == 8 and base64.b64decode(blob)[0] == 1
    assert Verifier.parse(text).id.hex() == hex_id
    wrong_id = f"{name}+{'0' * 8}+{blob}"
    with pytest.raises(NoteError, match="altered"):
        Verifier.parse(wrong_id)
    for bad in ("", "just-a-name", f"{name}+zz+{blob}", f"{name}+{hex_id}+AAAA"):
        with pytest.raises(NoteError):
            Verifier.parse(bad)


@pytest.mark.parametrize("text", [
    "o\n3\n", "o\n03\n" + base64.b64encode(bytes(32)).decode() + "\n", "o\n-1\nAAAA\n",
    "o\n3\n" + base64.b64encode(bytes(31)).decode() + "\n", "o\n3\n!!!\n",
    "o\n3\n" + base64.b64encode(bytes(32)).decode(),  # no final newline
    "has space\n3\n" + base64.b64encode(bytes(32)).decode() + "\n",
])
def test_malformed_checkpoints_are_refused_with_a_reason(text: str) -> None:
    with pytest.raises(NoteError):
        Checkpoint.parse(text)


def test_names_with_spaces_or_plus_and_texts_with_blank_lines_cannot_be_signed(key: Ed25519PrivateKey) -> None:
    for name in ("", "a b", "a+b"):
        with pytest.raises(NoteError):
            sign(TEXT, name, key)
    for text in ("no newline", "a\n\nb\n"):
        with pytest.raises(NoteError):
            sign(text, NAME, key)
