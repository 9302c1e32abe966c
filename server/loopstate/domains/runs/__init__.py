"""The runs domain: the bounded-run control plane on the event core.

One audit stream per run (``runs.<run_id>``), one stream per authority grant
(``grants.<grant_id>``), both chained with the audit envelope
(``sequence``, ``previous_event_digest``, ``event_digest``, ``schema_version``).
Everything here is pure; files (kill switches, projections, the grant lock)
live in ``loopstate.service.runs_effects``, which the service registry binds
to this domain (the domain never imports the service). The package loads the
fold and the reads; the decide side (``decide``, ``grants`` and what they use)
is imported by the first command, so a read never pays for it.
"""

from __future__ import annotations

from typing import Any

import msgspec

from loopstate_protocol import runs as proto
from loopstate_protocol.base import Command, Query
from loopstate_protocol.errors import ErrorCode

from loopstate.core.chain import ChainLayout, SchemaVerdict
from loopstate.core.errors import LoopstateError
from loopstate.core.ids import derived_uuid4
from loopstate.domains.base import Context, Decision, Domain
from loopstate.domains.runs import projections, records
from loopstate.domains.runs.state import STATE_LAYOUT, GrantState, RunSnapshot, RunState, evolve_grant, evolve_run

RUN_PREFIX = "runs."
GRANT_PREFIX = "grants."


def classify_schema(value: Any) -> SchemaVerdict:
    """"1.0" and later minors of major 1 are readable; a higher major is from the future."""
    if not isinstance(value, str) or value.count(".") != 1:
        return "invalid"
    major, minor = value.split(".")
    if not (major.isdigit() and minor.isdigit()) or major != str(int(major)) or minor != str(int(minor)):
        return "invalid"
    if int(major) > 1:
        return "future"
    return "ok" if int(major) == 1 else "invalid"


LAYOUT = ChainLayout(
    sequence_field="sequence", prev_field="previous_event_digest", hash_field="event_digest",
    schema_field="schema_version", classify_schema=classify_schema,
)


def _uuid(value: Any, field: str) -> str:
    try:
        records.decode(field, records.UUID4, value)
    except LoopstateError as error:
        raise LoopstateError(ErrorCode.INVALID_PARAMS, error.message, **error.details) from None
    return value.lower()


def run_stream(run_id: str) -> str:
    return RUN_PREFIX + _uuid(run_id, "run_id")


def grant_stream(grant_id: str) -> str:
    return GRANT_PREFIX + _uuid(grant_id, "grant_id")


def run_id_for_request(request_id: str) -> str:
    """The run a create sent with this request id makes: its exact retry lands on the same stream."""
    return derived_uuid4("runs.run", request_id)


def grant_id_for_request(request_id: str) -> str:
    """The grant an authority grant sent with this request id records (so its retry replays)."""
    return derived_uuid4("runs.grant", request_id)


class RunsDomain(Domain):
    name = "runs"
    layout = LAYOUT
    commands = proto.COMMANDS
    queries = proto.QUERIES
    views = ("status",)
    stream_prefixes = ("runs", "grants")

    def stream_for(self, message: Command | Query) -> str:
        if isinstance(message, (proto.AuthorityGrant, proto.AuthorityRevoke, proto.GrantShow)):
            return grant_stream(message.grant_id)
        return run_stream(message.run_id)

    def stream_for_view(self, view: str, key: str | None) -> str:
        if key is None:
            raise LoopstateError(ErrorCode.INVALID_PARAMS, "the runs/status topic needs a run id: runs/status/<run_id>")
        return run_stream(key)

    def initial(self, stream: str) -> RunState | GrantState:
        if stream.startswith(GRANT_PREFIX):
            return GrantState(grant_id=stream[len(GRANT_PREFIX):])
        return RunState(run_id=stream[len(RUN_PREFIX):])

    def snapshot_type(self, stream: str) -> type:
        """Projection snapshots (core/snapshot.py) hold the state as it is (every field is folded);
        a run's is wrapped with its layout so a snapshot of another layout is never decoded as this one."""
        return GrantState if stream.startswith(GRANT_PREFIX) else RunSnapshot

    def snapshot_state(self, state: RunState | GrantState) -> RunSnapshot | GrantState:
        return state if isinstance(state, GrantState) else RunSnapshot(layout=STATE_LAYOUT, state=state)

    def restore_state(self, stream: str, snapshot: RunSnapshot | GrantState) -> RunState | GrantState:
        return snapshot if isinstance(snapshot, GrantState) else snapshot.state

    def evolve(self, state: RunState | GrantState, event: dict[str, Any]) -> RunState | GrantState:
        if isinstance(state, GrantState):
            return evolve_grant(state, event)
        return evolve_run(state, event)

    def check(self, command: Command, request_id: str) -> None:
        """What a command is refused for by its own fields (before the store is touched)."""
        if isinstance(command, proto.Create):
            from loopstate.domains.runs.config import default_config
            from loopstate.domains.runs.decide import check_create

            check_create(command, default_config()["budgets"])

    def decide(self, state: RunState | GrantState, command: Command, ctx: Context) -> list[dict[str, Any]]:
        from loopstate.domains.runs.decide import decide_run
        from loopstate.domains.runs.grants import decide_grant

        if isinstance(state, GrantState):
            return decide_grant(state, command, ctx)
        return decide_run(state, command, ctx)

    def decision(self, state: RunState | GrantState, command: Command, ctx: Context) -> Decision:
        """A refusal after a safety write is left in the decision's own ``extra`` (decide.REFUSAL)."""
        from loopstate.domains.runs.decide import REFUSAL

        extra = dict(ctx.extra)
        events = self.decide(state, command, msgspec.structs.replace(ctx, extra=extra))
        return Decision(events, refusal=extra.pop(REFUSAL, None))

    def replayed_refusal(self, command: Command, events: list[dict[str, Any]]) -> LoopstateError | None:
        from loopstate.domains.runs.decide import refusal_from_events

        return refusal_from_events(command, events)

    def query(self, state: RunState | GrantState, query: Query, ctx: Context) -> Any:
        if isinstance(query, proto.GrantShow):
            assert isinstance(state, GrantState)
            if state.grant is None:
                raise LoopstateError(ErrorCode.NOT_FOUND, f"grant {query.grant_id} does not exist; check the id (`loopstate run authority grant` prints it)", grant_id=query.grant_id)
            return projections.grant(state)
        assert isinstance(state, RunState)
        if not state.exists:
            raise LoopstateError(ErrorCode.NOT_FOUND, f"run {query.run_id} does not exist; check the id (`loopstate run create` prints it)", run_id=query.run_id)
        return projections.status(state, ctx)

    def view(self, state: RunState | GrantState, view: str, key: str | None, ctx: Context) -> Any:
        assert isinstance(state, RunState)
        return projections.status(state, ctx)


DOMAIN = RunsDomain()
