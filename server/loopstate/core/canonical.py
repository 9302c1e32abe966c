"""Canonical JSON: the exact bytes that are hashed and written.

msgspec with sorted keys and no whitespace gives one encoding per value, so a
hash computed by any loopstate process (or recomputed by ``verify``) matches.
"""

from __future__ import annotations

import hashlib
from typing import Any

import msgspec

_encoder = msgspec.json.Encoder(order="sorted")
_decoder = msgspec.json.Decoder()


def encode(value: Any) -> bytes:
    """Canonical UTF-8 JSON bytes of ``value`` (sorted keys, compact)."""
    return _encoder.encode(value)


def decode(data: bytes | str) -> Any:
    return _decoder.decode(data)


def sha256_hex(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


def digest(value: Any) -> str:
    """SHA-256 of the canonical encoding of ``value``."""
    return sha256_hex(encode(value))
