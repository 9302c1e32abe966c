"""Bases shared by every command, query and result on the wire.

Commands and queries are tagged msgspec Structs: the ``kind`` field names the
variant (``"intent.claim_add"``, ``"runs.acquire"``...), so one tagged union can
decode any of them and a wrong field fails with msgspec's precise message.
Unknown fields are refused rather than ignored, so a typo never silently drops
part of a request.
"""

from __future__ import annotations

from typing import Any

import msgspec

# The largest integer every client of the wire can hold exactly: JSON clients such as the
# VS Code extension read numbers as IEEE doubles. Every integer a command carries, typed
# or inside free-form data, lies within +-MAX_SAFE_INTEGER (the server refuses the rest
# with VALIDATION_FAILED), and the JSON Schema says so on every integer.
MAX_SAFE_INTEGER = 2**53 - 1


class Command(msgspec.Struct, tag_field="kind", forbid_unknown_fields=True, kw_only=True):
    """A mutation. Subclasses set ``tag="<domain>.<verb>"``."""


class Query(msgspec.Struct, tag_field="kind", forbid_unknown_fields=True, kw_only=True):
    """A read. Subclasses set ``tag="<domain>.<view>"``."""


class Head(msgspec.Struct, frozen=True, kw_only=True):
    """The verified end of one stream: its last sequence and event hash."""

    stream: str
    sequence: int
    hash: str | None


class ErrorData(msgspec.Struct, kw_only=True, omit_defaults=True):
    """``error.data`` of every loopstate JSON-RPC error."""

    code: str
    details: dict[str, Any] = {}
