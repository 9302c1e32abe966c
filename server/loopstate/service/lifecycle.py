"""The steps a domain's impure glue takes part in, around each command and read.

Each ``service/<domain>_effects.py`` subclasses ``Effects`` and overrides the
steps it needs; the others are no-ops, so the engine calls every step on every
domain. A step returns what the next one needs: ``before_decide`` returns a
``Prepared`` (the decision's context, plus whatever that domain must give back
or finish later), and the engine hands that same object to ``after_append``,
``release`` and ``after_commit``. Nothing is carried in a thread-local or in
the context's ``extra`` between steps (``extra`` is only the decision's input).

One command, step by step (service/engine.py, docs/architecture.md):

1. ``Domain.check``: stateless field checks, before the store is opened.
2. the stream's exclusive lock; catch up; an exact retry returns its first result.
3. ``before_decide``: gather what the pure decision needs (files, other streams
   read under their locks). It may instead ask for a ``Prerequisite``: another
   command that must be durable first. The engine then gives the lock back, runs
   that command as a command of its own (its own lock, its own idempotency, its
   own listeners), and applies this command again from step 2. No command is
   ever executed while another stream's lock is held.
4. ``Domain.decision``: events, and a refusal to raise once they are durable.
5. one durable append; ``after_append`` under the same lock (projections).
6. ``release``, always, whatever happened since step 3.
7. the lock is released; listeners hear the new events.
8. ``after_commit``, outside the lock: it may change the outcome (intent's
   in-memory private events) or write to other streams; then the decision's
   refusal, if any, is raised.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, Generic, TypeVar

import msgspec

from loopstate_protocol.base import Command

from loopstate.core.project import Project
from loopstate.core.stream import Record
from loopstate.domains.base import Context

if TYPE_CHECKING:
    import datetime as dt

    from loopstate.service.engine import Folded, Outcome, Service

StateT = TypeVar("StateT")


class Prerequisite(msgspec.Struct, frozen=True):
    """A command that must be durable before the one that asked for it is decided again.

    ``now`` is the asking command's time: applied again, it is decided at the
    time it was first decided at (the prerequisite was built for that time).
    """

    command: Command
    request_id: str
    now: dt.datetime


class Prepared:
    """What ``before_decide`` arranged for the rest of one command.

    ``ctx`` is the decision's context. A domain's effects subclass this to carry
    what its later steps need (locks to give back, a private task's events).
    """

    def __init__(self, ctx: Context, *, prerequisite: Prerequisite | None = None) -> None:
        self.ctx = ctx
        self.prerequisite = prerequisite


class Effects(Generic[StateT]):
    """The optional service-side steps of one domain, each a no-op by default."""

    def before_query(self, service: Service, project: Project, state: StateT, ctx: Context) -> Context:
        """A read's context: what readers see beside the log (a kill switch, the goal ids)."""
        return ctx

    def after_refresh(self, service: Service, project: Project, folded: Folded) -> None:
        """After a catch-up: give the state what lives beside the ledger (intent's private memory)."""
        return None

    def before_decide(
        self, service: Service, project: Project, state: StateT, command: Command, ctx: Context,
    ) -> Prepared:
        """Under the stream's exclusive lock, before the pure decision."""
        return Prepared(ctx)

    def after_append(self, service: Service, project: Project, folded: Folded, records: list[Record],
                     prepared: Prepared) -> None:
        """Under the same lock, once the events are durable and folded (they may be none)."""
        return None

    def release(self, prepared: Prepared) -> None:
        """Give back what ``before_decide`` took; called whatever happened after it."""
        return None

    def after_commit(self, service: Service, project: Project, command: Command, outcome: Outcome,
                     prepared: Prepared | None) -> Outcome:
        """Outside the lock, once listeners heard; ``prepared`` is None for an exact retry."""
        return outcome


NO_EFFECTS: Effects[Any] = Effects()


def command_tag(command: Command) -> str:
    """A command's wire name (``runs.create``): what its request fingerprint names as the operation."""
    tag = type(command).__struct_config__.tag
    assert isinstance(tag, str), f"{type(command).__name__} has no string tag"
    return tag
