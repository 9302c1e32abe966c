"""The goals domain as the service sees it: streams, decide, evolve, queries and views.

One stream per goal, ``goals.<goal_id>``. Views for subscriptions are keyed by
goal id: ``goals/board/<goal_id>`` (the local board) and
``goals/public_board/<goal_id>`` (the redacted one).

The impure glue (Markdown files, git checks, snapshot files) is
``loopstate.service.goals_effects``; the service registry binds it to this
domain, so nothing here imports the service.

A short-lived reader (``goals board``, a hook) imports this module for the fold
and the board: the decision rules, the Markdown renderer and parser, backfill
and the bridge are imported by the methods that use them, not here.
"""

from __future__ import annotations

import re
from typing import Any

import msgspec

from loopstate_protocol import goals as proto
from loopstate_protocol.errors import ErrorCode

from loopstate.core.chain import ChainLayout
from loopstate.core.clock import format_time
from loopstate.core.errors import LoopstateError
from loopstate.domains.base import Context, Domain
from loopstate.domains.goals import envelope, names
from loopstate.domains.goals.projection import build_board
from loopstate.domains.goals.state import STATE_LAYOUT, GoalSnapshot, GoalState, evolve, initial

GOAL_ID = re.compile(r"^[A-Za-z0-9][A-Za-z0-9_-]{0,79}$")
PREFIX = "goals."

LAYOUT = ChainLayout(
    sequence_field="append_sequence", prev_field="prev_hash", hash_field="event_hash",
    schema_field="schema_version", classify_schema=envelope.classify_schema,
)


def check_goal_id(goal_id: Any) -> str:
    if not isinstance(goal_id, str) or not GOAL_ID.match(goal_id):
        raise LoopstateError(
            ErrorCode.INVALID_PARAMS,
            f"goal id {goal_id!r} is not valid: use 1-80 letters, digits, '_' and '-', starting with a letter or digit",
            field="goal_id",
        )
    return goal_id


def validated(message: Any) -> Any:
    """Hold a message built in Python (CLI, tests) to the constraints the wire decoder applies,
    and refuse text that is not valid Unicode (a lone surrogate, as a non-UTF-8 argv yields)."""
    tag = type(message).__struct_config__.tag
    try:
        msgspec.json.encode(message)
        return msgspec.convert(msgspec.to_builtins(message), type(message))
    except msgspec.ValidationError as exc:
        from loopstate.domains.goals.events import readable

        raise LoopstateError(ErrorCode.INVALID_PARAMS, f"{tag}: {readable(str(exc), cls=type(message))}") from None
    except UnicodeEncodeError:
        raise LoopstateError(
            ErrorCode.INVALID_PARAMS,
            f"{tag}: a text field is not valid Unicode (it holds a lone surrogate, e.g. from non-UTF-8 input); "
            "send UTF-8 text",
        ) from None


def stream_name(goal_id: str) -> str:
    return PREFIX + check_goal_id(goal_id)


class GoalsDomain(Domain):
    name = "goals"
    stream_prefixes = ("goals",)
    layout = LAYOUT
    commands = proto.COMMANDS
    queries = proto.QUERIES
    views = ("board", "public_board")

    def fingerprint_params(self, command: Any) -> Any:
        """What a request fingerprint covers: the validated command (so bad input is refused
        before the service hashes it), without the ``new_goal`` confirmation (a retry that
        adds or drops it is the same request)."""
        params = msgspec.to_builtins(validated(command))
        params.pop("new_goal", None)
        return params

    def stream_for(self, message: Any) -> str:
        return stream_name(message.goal_id)

    def stream_for_view(self, view: str, key: str | None) -> str:
        if key is None:
            raise LoopstateError(ErrorCode.INVALID_PARAMS, f"topic goals/{view} needs a goal id: goals/{view}/<goal_id>")
        return stream_name(key)

    def initial(self, stream: str) -> GoalState:
        return initial(stream[len(PREFIX):])

    def evolve(self, state: GoalState, event: dict[str, Any]) -> GoalState:
        return evolve(state, event)

    def snapshot_type(self, stream: str) -> type:
        """Projection snapshots (core/snapshot.py) hold the state as it is (every field is folded),
        wrapped with its layout so a snapshot of another layout is never decoded as this one."""
        return GoalSnapshot

    def snapshot_state(self, state: GoalState) -> GoalSnapshot:
        return GoalSnapshot(layout=STATE_LAYOUT, state=state)

    def restore_state(self, stream: str, snapshot: GoalSnapshot) -> GoalState:
        return snapshot.state

    def decide(self, state: GoalState, command: Any, ctx: Context) -> list[dict[str, Any]]:
        command = validated(command)
        if state.store.event_count == 0:
            if isinstance(command, proto.RenderMarkdown):
                raise names.missing_goal(state.goal_id, ctx.extra.get(names.KNOWN_GOALS))
            names.check_new_goal(state.goal_id, ctx.extra.get(names.KNOWN_GOALS, ()), command.new_goal)
        if isinstance(command, proto.Backfill):
            from loopstate.domains.goals.backfill import backfill_events

            return backfill_events(state, command, ctx)
        from loopstate.domains.goals.decide import decide as decide_command

        return decide_command(state, command, ctx)

    def query(self, state: GoalState, query: Any, ctx: Context) -> Any:
        """A read of one goal; a goal without events is NOT_FOUND (a typo'd id is not an empty board).
        Subscriptions (``view``) do show an empty board: a panel may open before the first event."""
        query = validated(query)
        if state.store.event_count == 0:
            raise names.missing_goal(state.goal_id, ctx.extra.get(names.KNOWN_GOALS))
        now = format_time(ctx.now)
        if isinstance(query, proto.GetBoard):
            return build_board(state, generated_at=now, public=query.public, limit=query.limit, cursor=query.cursor)
        from loopstate.domains.goals import bridge, markdown

        if isinstance(query, proto.PreviewMarkdown):
            board = build_board(state, generated_at=now, public=query.public)
            text = markdown.render(board)
            return proto.MarkdownText(meta=board.meta, text=text, checksum=markdown.text_checksum(text))
        if isinstance(query, proto.CheckMarkdown):
            return bridge.check(state, query.markdown)
        if isinstance(query, proto.BridgeMarkdown):
            board = build_board(state, generated_at=now, public=query.public)
            return bridge.bridge(board, markdown.parse(query.markdown), state.content.last_append_sequence)
        raise LoopstateError(ErrorCode.INVALID_PARAMS, f"the goals domain has no query {type(query).__name__}")

    def view(self, state: GoalState, view: str, key: str | None, ctx: Context) -> proto.Board:
        """A subscription pushes the default page (the first page, ``BOARD_LIMIT`` todos), with its counts."""
        return build_board(state, generated_at=format_time(ctx.now), public=view == "public_board",
                           limit=proto.BOARD_LIMIT)


def rendered_text(state: GoalState, event: dict[str, Any]) -> str:
    """The Markdown a projection_rendered event describes, rebuilt from the state it was decided on.

    Bookkeeping events do not change projection content, so the state after the
    event renders the same text the decision checksummed.
    """
    from loopstate.domains.goals.decide import markdown_for

    return markdown_for(state, event["recorded_at"], bool(event["payload"].get("public")))
