"""A frame's body as a message, with a bound on how deep it may nest.

msgspec's decoder, like every recursive one, raises RecursionError on JSON
nested about a thousand levels deep, and what runs after it (pygls's converter,
msgspec's convert, the domains) recurses too. A message may nest at most
MAX_DEPTH levels. One that nests deeper is refused before anything else sees
it (``TooDeep``), and answered with its id when the id can still be read: from
the decoded object, or, when the decoder gave up, from a scan of the message's
first HEAD_SCAN bytes, which reads the top-level members without recursion.
Any other exception a decoder raises is the caller's to answer as PARSE_ERROR.
"""

from __future__ import annotations

import re
from typing import Any

import msgspec

from loopstate.core.nesting import deeper_than

MAX_DEPTH = 512  # levels of lists and objects in one message
HEAD_SCAN = 64 << 10  # bytes scanned for the envelope of a message too deep to decode

_decode = msgspec.json.Decoder().decode
# A string, a run of openers, a run of closers, ':' or ',', a scalar, white space, or
# the quote of a string cut off by the end of the scan.
_TOKEN = re.compile(rb'"(?:[^"\\]|\\.)*"|[\[{]+|[\]}]+|[:,]|[^\[\]{}:,"\s]+|\s+|"')


class Nested:
    """Stands for a top-level member that nests too deep to be read."""

    def __repr__(self) -> str:
        return "<nested too deep>"


NESTED = Nested()
UNREADABLE = object()  # a top-level scalar that is not valid JSON


class TooDeep(Exception):
    """A message nested past MAX_DEPTH.

    ``members``: its top-level members as far as they could be read (a member
    too deep is NESTED), or None when it is not a JSON object; ``complete``:
    whether every member was read (else one not read may be the id).
    """

    def __init__(self, members: dict[str, Any] | None, complete: bool) -> None:
        self.members = members
        self.complete = complete
        deep = [name for name, value in (members or {}).items() if value is NESTED]
        where = f" (in `{deep[0]}`)" if deep else ""
        super().__init__(
            f"the message nests deeper than {MAX_DEPTH} levels of arrays and objects{where}, "
            f"the most this server reads; it was not processed: send it nested less deeply"
        )


def decode(body: bytes) -> Any:
    """The decoded message; raises TooDeep past MAX_DEPTH, or whatever the decoder raises."""
    try:
        message = _decode(body)
    except RecursionError:
        raise TooDeep(*_scan_head(body[:HEAD_SCAN])) from None
    if body.count(b"[") + body.count(b"{") > MAX_DEPTH and deeper_than(message, MAX_DEPTH):
        if not isinstance(message, dict):
            raise TooDeep(None, True)
        raise TooDeep({k: NESTED if deeper_than(v, MAX_DEPTH - 1) else v for k, v in message.items()}, True)
    return message


def _scan_head(head: bytes) -> tuple[dict[str, Any] | None, bool]:
    """The top-level members readable in ``head`` and whether the object ended in it.

    Scalar members are decoded; a member that is an array or object becomes
    NESTED (only the envelope's scalars, ``jsonrpc``, ``id`` and ``method``,
    are wanted here).
    """
    members: dict[str, Any] = {}
    depth = 0
    key: str | None = None
    value_next = False
    for match in _TOKEN.finditer(head):
        token = match.group()
        first = token[:1]
        if token == b'"':
            break  # a string the scan cut off
        if first in b"[{":
            if depth == 0 and token[:1] != b"{":
                return None, True
            if depth == 1 and value_next and key is not None:
                members[key] = NESTED
                value_next = False
            depth += len(token)
        elif first in b"]}":
            depth -= len(token)
            if depth <= 0:
                return members, True
        elif depth != 1 or first.isspace():
            continue
        elif token == b":":
            value_next = key is not None
        elif token == b",":
            key, value_next = None, False
        elif value_next and key is not None:  # (a value is next only after a key and its colon)
            try:
                members[key] = _decode(token)
            except msgspec.DecodeError:
                members[key] = UNREADABLE
            value_next = False
        elif first == b'"':
            try:
                key = _decode(token)
            except msgspec.DecodeError:
                key = None
    return (members if depth > 0 or members else None), False
