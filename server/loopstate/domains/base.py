"""The shape every domain has, so the service can serve it without knowing it.

A domain is a Decider: ``initial`` state, ``evolve(state, event) -> state`` and
``decide(state, command, ctx) -> events``, plus ``query`` and named views for
subscriptions. It never opens a file, reads the clock or makes an id: the
service passes the time and an id factory in ``Context``.
"""

from __future__ import annotations

import datetime as dt
from typing import Any, Callable, Protocol

import msgspec

from loopstate_protocol.base import Command, Query

from loopstate.core.chain import ChainLayout


class Context(msgspec.Struct, frozen=True):
    """Everything impure a decision may use, computed once per command."""

    now: dt.datetime
    new_id: Callable[[], str]
    project_id: str
    project_root: str
    request_id: str
    extra: dict[str, Any] = msgspec.field(default_factory=dict)


class Domain(Protocol):
    """What ``service`` needs from a domain package (its ``DOMAIN`` object)."""

    name: str
    layout: ChainLayout
    commands: tuple[type[Command], ...]
    queries: tuple[type[Query], ...]
    views: tuple[str, ...]

    def stream_for(self, message: Command | Query) -> str:
        """The stream a command writes or a query reads."""

    def stream_for_view(self, view: str, key: str | None) -> str:
        """The stream behind a subscription topic ``<domain>/<view>[/<key>]``."""

    def initial(self, stream: str) -> Any:
        ...

    def evolve(self, state: Any, event: dict[str, Any]) -> Any:
        ...

    def decide(self, state: Any, command: Command, ctx: Context) -> list[dict[str, Any]]:
        ...

    # Optional: ``check(command, request_id) -> None`` raises for what a command is refused
    # by its own fields (and its request id), whatever the streams hold. The service calls it
    # before it touches the store, so a refusal by validation alone leaves no file (no project
    # record, no lock file, not even a rewritten lock holder record).

    def query(self, state: Any, query: Query, ctx: Context) -> Any:
        ...

    def view(self, state: Any, view: str, key: str | None, ctx: Context) -> Any:
        """The projection a subscriber to ``<domain>/<view>[/<key>]`` sees."""
