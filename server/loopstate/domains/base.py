"""The shape every domain has, so the service can serve it without knowing it.

A domain is a Decider: ``initial`` state, ``evolve(state, event) -> state`` and
``decide(state, command, ctx) -> events``, plus ``query`` and named views for
subscriptions. It never opens a file, reads the clock or makes an id: the
service passes the time and an id factory in ``Context``.

Each domain class subclasses ``Domain`` and so inherits a no-op default for
every optional step (``check``, ``fingerprint_params``, ``evolve_record``,
``decision``, ``replayed_refusal``); the service calls every step on every
domain, never looking a method up by name. docs/architecture.md walks a command
through these steps in order.
"""

from __future__ import annotations

import datetime as dt
from typing import TYPE_CHECKING, Any, Callable, Protocol

import msgspec

from loopstate_protocol.base import Command, Query

from loopstate.core.chain import ChainLayout
from loopstate.core.errors import LoopstateError

if TYPE_CHECKING:
    from loopstate.core.stream import Record


class Context(msgspec.Struct, frozen=True):
    """Everything impure a decision may use, computed once per command.

    ``extra`` holds what a domain's service-side effects gathered for its
    decision (runs: the config, the standing kill switch, the bound grant;
    goals: the render target's status; intent: how a private task is handled).
    Each domain documents its keys beside the decide that reads them.
    """

    now: dt.datetime
    new_id: Callable[[], str]
    project_id: str
    project_root: str
    request_id: str
    extra: dict[str, Any] = msgspec.field(default_factory=dict)


class Decision(msgspec.Struct, frozen=True):
    """What a command's decision hands the service: the events to append, and a refusal
    to raise once they are durable (a run's safety write recorded instead of the
    requested work: the halt is kept *and* the caller is told no)."""

    events: list[dict[str, Any]]
    refusal: LoopstateError | None = None


class Domain(Protocol):
    """What ``service`` needs from a domain package (its ``DOMAIN`` object).

    The attributes and the methods without a body here are what every domain
    writes; the methods with one are optional steps with their no-op default.
    """

    name: str
    layout: ChainLayout
    commands: tuple[type[Command], ...]
    queries: tuple[type[Query], ...]
    views: tuple[str, ...]
    # The stream name prefixes (before the first ".") this domain owns: ``compact`` and
    # ``verify`` find a stream's domain by them.
    stream_prefixes: tuple[str, ...]

    def stream_for(self, message: Command | Query) -> str:
        """The stream a command writes or a query reads."""
        ...

    def stream_for_view(self, view: str, key: str | None) -> str:
        """The stream behind a subscription topic ``<domain>/<view>[/<key>]``."""
        ...

    def initial(self, stream: str) -> Any:
        ...

    def evolve(self, state: Any, event: dict[str, Any]) -> Any:
        ...

    def decide(self, state: Any, command: Command, ctx: Context) -> list[dict[str, Any]]:
        ...

    def query(self, state: Any, query: Query, ctx: Context) -> Any:
        ...

    def view(self, state: Any, view: str, key: str | None, ctx: Context) -> Any:
        """The projection a subscriber to ``<domain>/<view>[/<key>]`` sees."""
        ...

    # optional steps -------------------------------------------------------------------

    def check(self, command: Command, request_id: str) -> None:
        """Raise for what a command is refused by its own fields (and its request id), whatever
        the streams hold. The service calls it before it touches the store, so a refusal by
        validation alone leaves no file (no project record, no lock file, not even a rewritten
        lock holder record)."""
        return None

    def fingerprint_params(self, command: Command) -> Any:
        """The normalized parameters a request fingerprint covers (a domain may redact
        credentials, so that not even a digest of a secret is stored)."""
        return msgspec.to_builtins(command)

    def evolve_record(self, state: Any, record: Record) -> Any:
        """Fold one verified record; a domain that keeps where a record sits in its file
        (intent's retired claims) reads ``record.start`` as well as the event."""
        return self.evolve(state, record.event)

    def decision(self, state: Any, command: Command, ctx: Context) -> Decision:
        """``decide`` as the service applies it: the events, and a refusal to raise after them."""
        return Decision(self.decide(state, command, ctx))

    def replayed_refusal(self, command: Command, events: list[dict[str, Any]]) -> LoopstateError | None:
        """The refusal an exact retry reports, read from the first attempt's events."""
        return None
