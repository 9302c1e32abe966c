"""Params, results and notifications of every loopstate JSON-RPC method.

Requests are decoded with ``forbid_unknown_fields``, so a misspelt field fails
with msgspec's message (which names the field and its path) instead of being
dropped. Commands and queries are tagged unions over every domain's Structs:
the ``kind`` field picks the variant.

Events travel as the JSON objects that are stored in the streams, including
the chain fields of their domain and two fields loopstate adds to every event:
``request_id`` (the id the command was executed with) and
``request_fingerprint`` (SHA-256 of the operation and its normalized
parameters, used to tell an exact retry from a reused id).
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, Literal, Union

import msgspec

from loopstate_protocol.base import Command, ErrorData, Head, Query
from loopstate_protocol.commands import COMMANDS, QUERIES
from loopstate_protocol.project import ProjectOutcome


def _union(variants: tuple[type, ...], fallback: type) -> Any:
    """The tagged union of ``variants``; the bare base while no domain defines any."""
    return Union[variants] if variants else fallback


if TYPE_CHECKING:
    # The variants are gathered when the domains' modules are imported (commands.py), which a
    # type checker cannot follow; to it a command is a Command and a query a Query, the base
    # every variant derives from.
    AnyCommand = Command
    AnyQuery = Query
else:
    AnyCommand = _union(COMMANDS, Command)
    AnyQuery = _union(QUERIES, Query)

Event = dict[str, Any]


class Params(msgspec.Struct, forbid_unknown_fields=True, kw_only=True):
    """Base of every request's params: unknown fields are refused."""


class ExecuteParams(Params):
    """Apply ``command`` to the project at ``root``.

    ``request_id`` makes the call idempotent: an exact retry returns the first
    result with ``replayed: true``; the same id with a different command fails
    with REQUEST_ID_REUSED.
    """

    root: str
    request_id: str
    command: AnyCommand


class ExecuteResult(msgspec.Struct, kw_only=True, omit_defaults=True):
    """What the command appended, and the stream's head after it.

    A project command (``project.stop``, ``project.resume``) acts on many streams
    or on none: its ``events`` are empty, ``head`` is null, and ``project`` says
    what it did (tagged by ``kind``, the command's own kind). ``replayed`` is
    true when an exact retry found everything done and wrote nothing.
    """

    events: list[Event]
    head: Head | None
    replayed: bool
    project: ProjectOutcome | None = None


class QueryParams(Params):
    """Run ``query`` against the project at ``root``; the result is the query's own shape."""

    root: str
    query: AnyQuery


Deliver = Literal["snapshot", "events"]


class SubscribeParams(Params):
    """Follow ``topic`` (``<domain>/<view>[/<key>]``) of the project at ``root``.

    ``deliver`` picks what each ``loopstate/changed`` carries: the new
    projection (``snapshot``, what a status bar wants) or the events since the
    previous notification (``events``, what a harness wants). ``since`` asks for
    every event after that sequence in the result, so a reconnecting client
    misses nothing (up to 10,000 events; past that, take the snapshot).
    """

    root: str
    topic: str
    since: int | None = None
    deliver: Deliver = "snapshot"


class SubscribeResult(msgspec.Struct, kw_only=True):
    """The subscription's id, the current head and projection, and the events after ``since``."""

    subscription_id: str
    topic: str
    head: Head
    snapshot: Any
    events: list[Event] | None = None


class UnsubscribeParams(Params):
    """Stop following a subscription made on this connection; no notification for it follows the result."""

    subscription_id: str


class UnsubscribeResult(msgspec.Struct, kw_only=True):
    """The subscription that was closed."""

    subscription_id: str


class ChangedNotification(msgspec.Struct, kw_only=True):
    """A subscribed topic moved from ``previous_sequence`` to ``head``.

    With ``deliver: "events"`` it carries ``events``: exactly the events after
    ``previous_sequence`` up to ``head``. When the client reads too slowly the
    server keeps one pending notification per subscription: a snapshot
    subscription just gets the latest projection; an events subscription whose
    backlog outgrew the bound gets ``snapshot`` instead of ``events`` (and can
    fetch the skipped events by subscribing again with ``since``).

    ``rewritten`` says the stream was re-chained (a purge, ``loopstate
    recover``): what the client knew is void, ``previous_sequence`` is 0 and
    ``snapshot`` is the projection of the rewritten stream.
    """

    subscription_id: str
    topic: str
    head: Head
    previous_sequence: int
    snapshot: Any = None
    events: list[Event] | None = None
    rewritten: bool = False


class StreamErrorNotification(msgspec.Struct, kw_only=True):
    """A subscribed stream could not be read (for instance, another process corrupted it)."""

    subscription_id: str
    topic: str
    error: ErrorData
    message: str


class HistoryAlarmNotification(msgspec.Struct, kw_only=True):
    """A followed stream's history changed in a way appending never does.

    The server keeps its own Merkle tree of every stream it follows and checks
    each new signed checkpoint against it. ``rewritten`` true: the checkpoint
    does not extend what was seen (history was rewritten or cut, or signed by
    another key): an alarm for the user. ``rewritten`` false: the stream was
    purged (the one rewrite loopstate makes on purpose); what the client knew
    of it was re-chained. Sent once per checkpoint, to every client of the server.
    """

    root: str
    stream: str
    rewritten: bool
    message: str


class LoopstateCapability(msgspec.Struct, kw_only=True, rename="camel"):
    """``capabilities.experimental.loopstate`` in the ``initialize`` result."""

    protocol_version: str
    domains: list[str]
    topics: list[str]
    methods: list[str]


class WireError(msgspec.Struct, kw_only=True):
    """The ``error`` member of every JSON-RPC error response loopstate sends."""

    code: int
    message: str
    data: ErrorData


STRUCTS: tuple[type[msgspec.Struct], ...] = (
    ExecuteParams, ExecuteResult, QueryParams, SubscribeParams, SubscribeResult,
    UnsubscribeParams, UnsubscribeResult, ChangedNotification, StreamErrorNotification, HistoryAlarmNotification,
    LoopstateCapability, WireError, Head, ErrorData,
)
