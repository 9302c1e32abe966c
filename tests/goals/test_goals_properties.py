"""Properties over random command sequences, on the pure domain (no files).

Whatever sequence of commands is accepted: replay in any input order gives the
same state; the rendered Markdown (local and public) bridges clean against its
board; re-deciding any accepted command with its event id is a no-op.
"""

from __future__ import annotations

import datetime as dt
import hashlib
import random

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from loopstate_protocol import goals as g

from loopstate.core import canonical
from loopstate.core.errors import LoopstateError
from loopstate.domains.base import Context
from loopstate.domains.goals import DOMAIN
from loopstate.domains.goals.bridge import bridge, check
from loopstate.domains.goals.markdown import parse, render
from loopstate.domains.goals.ordering import replay
from loopstate.domains.goals.projection import build_board
from loopstate.domains.goals.state import state_checksum

NOW = dt.datetime(2026, 3, 2, 12, 0, tzinfo=dt.timezone.utc)
words = st.text(alphabet=st.sampled_from("abcXYZ019 -_.,:;#`*[]()!?/'\"é"), min_size=1, max_size=24).map(str.strip).filter(bool)
todo_ids = st.sampled_from(["T001", "T002", "T003", "T004"])
gate_ids = st.sampled_from(["G001", "G002"])
privacy = st.sampled_from(["public_safe", "local_private"])

commands = st.one_of(
    st.builds(g.AddTodo, goal_id=st.just("p"), title=words, role=st.sampled_from(["agent", "user", "controller"]),
              priority=st.sampled_from(["P0", "P1", "P2"]), planner_order=st.none() | st.integers(0, 3),
              metadata=st.dictionaries(st.sampled_from(["area", "owner"]), words, max_size=2), privacy=privacy),
    st.builds(g.ClaimTodo, goal_id=st.just("p"), todo_id=todo_ids, claimed_by=st.sampled_from(["codex", "claude"]),
              lease_seconds=st.none() | st.just(60)),
    st.builds(g.UpdateTodo, goal_id=st.just("p"), todo_id=todo_ids, title=words, privacy=privacy),
    st.builds(g.BlockTodo, goal_id=st.just("p"), todo_id=todo_ids, reason=words,
              gate_ids=st.lists(gate_ids, max_size=1)),
    st.builds(g.DeferTodo, goal_id=st.just("p"), todo_id=todo_ids, resume_when=words),
    st.builds(g.CompleteTodo, goal_id=st.just("p"), todo_id=todo_ids, rationale=words,
              validation_refs=st.lists(words, max_size=2)),
    st.builds(g.AddGate, goal_id=st.just("p"), title=words, gate_kind=st.sampled_from(["user", "controller"]),
              todo_id=st.none() | todo_ids),
    st.builds(g.ResolveGate, goal_id=st.just("p"), gate_id=gate_ids,
              decision=st.sampled_from(["approve", "reject", "defer"])),
)


def _seal(event: dict, sequence: int) -> dict:
    sealed = {**event, "append_sequence": sequence}
    sealed["event_hash"] = hashlib.sha256(canonical.encode(sealed)).hexdigest()
    return sealed


def _apply(sequence_of_commands):
    state = DOMAIN.initial("goals.p")
    accepted: list[tuple[object, dict]] = []
    log: list[dict] = []
    for number, command in enumerate(sequence_of_commands):
        ctx = Context(now=NOW, new_id=lambda: "", project_id="", project_root="", request_id=f"r{number}")
        try:
            events = DOMAIN.decide(state, command, ctx)
        except LoopstateError:
            continue  # refused: nothing to append
        for event in events:
            sealed = _seal(event, len(log) + 1)
            log.append(sealed)
            state = DOMAIN.evolve(state, sealed)
            accepted.append((command, ctx))
    return state, log, accepted


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.lists(commands, max_size=25), st.randoms(use_true_random=False))
def test_any_accepted_history_replays_renders_and_bridges_consistently(sequence_of_commands, rnd: random.Random) -> None:
    state, log, accepted = _apply(sequence_of_commands)
    shuffled = list(log)
    rnd.shuffle(shuffled)
    assert state_checksum(replay("p", shuffled)) == state_checksum(state)
    for public in (False, True):
        board = build_board(state, generated_at="2026-03-02T12:00:00Z", public=public)
        report = bridge(board, parse(render(board)), state.content.last_append_sequence)
        assert report.differences == [], (public, report.differences)
    # Deciding an accepted command again (same request, so the same derived event
    # id) against the final state is a no-op, even where the rules would now refuse it.
    for command, ctx in accepted:
        assert DOMAIN.decide(state, command, ctx) == []


markdown_lines = st.one_of(
    st.sampled_from(["## Todos", "## Gates", "## Completed", "## Archive candidates", "### agent", "### Role: user",
                     "- [ ] P1 `T001` A todo", "- [x] `G001` user: a gate", "  - decision: reject",
                     "  - order: x", "  - gate: G009", "  - todo: T404", "    > quoted", "  - details:",
                     "- [~] P0 claimed", "  - lease until: soon", "* [!] blocked", "\t- until: 2026-01-01T00:00:00Z",
                     "<!-- loopstate:goals-projection {\"goal_id\": \"p\"} -->", "# Active goal state: p", "",
                     "## Runs", "## Quota", "## Evidence", "## Refresh timeline", "|---|---|",
                     "| run-1 | ok |  |  | T001 | 2026-01-01T00:00:00Z |", "| run-2 | ok | a | b | T404 | never |",
                     "| usd | compute | 1.5 | 2 |", "| usd | compute | x | 1 |", "| a \\| b | c | 1 | 1 |",
                     "- `E1` todo T001: ci#1 (sum)", "- `E2` run run-1: r", "- `E3` gate G404: r",
                     "- 2026-01-01T00:00:00Z progress: done", "- soon progress: later"]),
    st.text(max_size=40),
)


@settings(max_examples=300, deadline=None)
@given(st.lists(markdown_lines, max_size=30))
def test_any_markdown_parses_bridges_and_backfills_or_is_refused_cleanly(lines) -> None:
    text = "\n".join(lines)
    state = DOMAIN.initial("goals.p")
    board = build_board(state, generated_at="2026-03-02T12:00:00Z", public=False)
    bridge(board, parse(text), 0)
    ctx = Context(now=NOW, new_id=lambda: "", project_id="", project_root="", request_id="r")
    check(state, text)  # the staleness check of a goal without events (the query refuses those: NOT_FOUND)
    try:
        events = DOMAIN.decide(state, g.Backfill(goal_id="p", markdown=text), ctx)
    except LoopstateError:
        return
    for number, event in enumerate(events, start=1):
        state = DOMAIN.evolve(state, _seal(event, number))
