"""Canonical JSON: the exact bytes that are hashed and written.

msgspec with sorted keys and no whitespace gives one encoding per value, so a
hash computed by any loopstate process (or recomputed by ``verify``) matches.
"""

from __future__ import annotations

import hashlib
from typing import Any, Callable

import msgspec

_encoder = msgspec.json.Encoder(order="sorted")
_decoder = msgspec.json.Decoder()


# Bound methods, not wrappers: the verify loop calls them for every event.
encode: Callable[[Any], bytes] = _encoder.encode
"""Canonical UTF-8 JSON bytes of a value (sorted keys, compact)."""

decode: Callable[[bytes | str], Any] = _decoder.decode

encode_into: Callable[[Any, bytearray], None] = _encoder.encode_into
"""The canonical encoding written into a bytearray, which is resized to it (no new bytes object)."""


def sha256_hex(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


def digest(value: Any) -> str:
    """SHA-256 of the canonical encoding of ``value``."""
    return sha256_hex(encode(value))
