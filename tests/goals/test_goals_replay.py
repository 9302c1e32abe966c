"""Replay ordering, snapshot compaction, and the board view subscribers see."""

from __future__ import annotations

import os

import msgspec
import pytest
from goalkit import Harness

from loopstate_protocol import goals as g
from loopstate_protocol.errors import ErrorCode

from loopstate.core.errors import LoopstateError
from loopstate.domains.goals.ordering import replay, replay_key, replay_order
from loopstate.domains.goals.state import state_checksum
from loopstate.service.goals_effects import load_state
from tests.conftest import snapshot_file, stored_lines

pytestmark = pytest.mark.both_stores  # docs/storage.md, *Which tests run on PostgreSQL*


def _event(sequence: int, recorded_at: str, event_id: str) -> dict:
    return {"append_sequence": sequence, "recorded_at": recorded_at, "event_id": event_id}


def test_replay_orders_by_append_sequence_then_recorded_at_then_event_id() -> None:
    events = [
        _event(2, "2026-01-01T00:00:00Z", "a"),
        _event(1, "2026-01-01T00:00:05Z", "z"),
        _event(1, "2026-01-01T01:00:01+01:00", "b"),  # 00:00:01Z: earlier than 00:00:05Z
        _event(1, "2026-01-01T00:00:01Z", "a"),  # same instant as the one above: event_id decides
    ]
    ordered = replay_order(events)
    assert [(e["append_sequence"], e["event_id"]) for e in ordered] == [(1, "a"), (1, "b"), (1, "z"), (2, "a")]
    assert replay_order(list(reversed(events))) == ordered


def test_replay_refuses_naive_timestamps() -> None:
    with pytest.raises(LoopstateError) as refused:
        replay_key(_event(1, "2026-01-01T00:00:00", "a"))
    assert refused.value.code is ErrorCode.VALIDATION_FAILED and "offset" in refused.value.message


def test_a_fresh_process_replays_the_stream_into_the_same_state_as_the_writer(h: Harness) -> None:
    for number in range(1, 6):
        h.run(g.AddTodo(goal_id="g", title=f"task {number}", priority=f"P{number % 3}", planner_order=5 - number))
    h.run(g.ClaimTodo(goal_id="g", todo_id="T002", claimed_by="codex"))
    h.run(g.CompleteTodo(goal_id="g", todo_id="T003", rationale="done"))
    writer = h.service.folded(h.project, h.service.domains["goals"], "goals.g").state
    reader = h.fresh()
    reader.query(h.root, g.GetBoard(goal_id="g"))
    replayed = reader.folded(h.project, reader.domains["goals"], "goals.g").state
    assert state_checksum(replayed) == state_checksum(writer)
    assert state_checksum(replay("g", h.events("g"))) == state_checksum(writer)


def _many(h: Harness, count: int) -> None:
    for number in range(count):
        h.run(g.AddTodo(goal_id="g", title=f"task {number}"))


def test_snapshot_compaction_speeds_replay_without_replacing_the_lineage(h: Harness) -> None:
    _many(h, 60)
    before = stored_lines(h.project, "goals.g")
    state_at_60 = state_checksum(replay("g", h.events("g")))
    compaction = h.run(g.Compact(goal_id="g")).events[0]
    _many(h, 3)
    after = stored_lines(h.project, "goals.g")
    assert after[:60] == before and len(h.events("g")) == 64  # every event is still there
    assert compaction["payload"]["through_append_sequence"] == 60
    assert compaction["payload"]["state_checksum"] == state_at_60  # the declared checkpoint is reproducible
    assert compaction["payload"]["source_checksum"] == "sha256:" + h.events("g")[59]["event_hash"]

    fast = load_state(h.project, "g")
    full = load_state(h.project, "g", use_snapshot=False)
    assert (fast.snapshot_sequence, fast.events_folded) == (61, 3)
    assert (full.snapshot_sequence, full.events_folded) == (None, 64)
    assert state_checksum(fast.state) == state_checksum(full.state)


def _rewrite(h: Harness, change) -> None:
    path, kind = snapshot_file(h.project, "goals.g")
    envelope = msgspec.msgpack.decode(path.read_bytes(), type=kind)
    path.write_bytes(msgspec.msgpack.encode(change(envelope)))


def test_a_snapshot_that_no_longer_matches_is_ignored_never_trusted(h: Harness) -> None:
    _many(h, 5)
    h.run(g.Compact(goal_id="g"))
    assert load_state(h.project, "g").snapshot_sequence == 6
    _rewrite(h, lambda env: msgspec.structs.replace(env, state=msgspec.Raw(bytes(env.state).replace(b"task 0", b"tamper"))))
    loaded = load_state(h.project, "g")
    assert loaded.snapshot_sequence is None and loaded.events_folded == 6
    assert loaded.state.todos["T001"].title == "task 0"


@pytest.mark.jsonl_only("a JSONL file's binding (tests/pg/test_pg_snapshots.py changes PostgreSQL's)")
@pytest.mark.parametrize("field", ["hash", "prefix_sha256", "first_hash", "sequence"])
def test_a_snapshot_pointing_at_a_changed_record_or_prefix_is_ignored(h: Harness, field: str) -> None:
    _many(h, 5)
    h.run(g.Compact(goal_id="g"))
    assert load_state(h.project, "g").snapshot_sequence == 6
    wrong = 5 if field == "sequence" else "0" * 64
    _rewrite(h, lambda env: msgspec.structs.replace(env, binding=msgspec.structs.replace(env.binding, **{field: wrong})))
    if field == "prefix_sha256":  # read only without a verified mark matching the file (docs/storage.md)
        os.unlink(h.project.dir / "checkpoints" / "goals.g.mark")
    loaded = load_state(h.project, "g")
    assert loaded.snapshot_sequence is None
    assert loaded.events_folded == 6 and [t.title for t in loaded.state.todos.values()] == [f"task {n}" for n in range(5)]


def test_without_its_snapshot_file_a_goal_replays_from_the_first_event(h: Harness) -> None:
    _many(h, 5)
    h.run(g.Compact(goal_id="g"))
    os.unlink(snapshot_file(h.project, "goals.g")[0])
    loaded = load_state(h.project, "g")
    assert (loaded.snapshot_sequence, loaded.events_folded) == (None, 6)
    assert len(loaded.state.todos) == 5


def test_compacting_an_empty_goal_is_refused(h: Harness) -> None:
    with pytest.raises(LoopstateError) as refused:
        h.run(g.Compact(goal_id="g"))
    assert refused.value.code is ErrorCode.RULE_VIOLATION


def test_the_board_view_is_keyed_by_goal_and_carries_the_new_last_append_sequence(h: Harness) -> None:
    heard: list[tuple[str, list[int]]] = []
    h.service.add_listener(lambda project, stream, news: heard.append(
        (stream, [r.event["append_sequence"] for r in news.records])))
    h.run(g.AddTodo(goal_id="one", title="x"))
    h.run(g.AddTodo(goal_id="two", title="y"))
    h.run(g.AddTodo(goal_id="one", title="z"))
    assert heard == [("goals.one", [1]), ("goals.two", [1]), ("goals.one", [2])]
    _, board = h.service.view(h.root, "goals", "board", "one")
    assert board.meta.goal_id == "one" and board.meta.last_append_sequence == 2
    assert [t.title for t in board.active[0].todos] == ["x", "z"]
    encoded = msgspec.json.decode(msgspec.json.encode(board))
    assert encoded["meta"]["last_append_sequence"] == 2
    with pytest.raises(LoopstateError) as missing_key:
        h.service.view(h.root, "goals", "board", None)
    assert missing_key.value.code is ErrorCode.INVALID_PARAMS
    with pytest.raises(LoopstateError) as bad_key:
        h.service.view(h.root, "goals", "board", "../etc")
    assert bad_key.value.code is ErrorCode.INVALID_PARAMS


def test_a_view_catches_up_with_another_process_append(h: Harness) -> None:
    h.run(g.AddTodo(goal_id="g", title="x"))
    assert h.service.view(h.root, "goals", "board", "g")[1].meta.last_append_sequence == 1
    other = h.fresh()
    other.execute(h.root, g.AddTodo(goal_id="g", title="from elsewhere"), "other-1")
    _, board = h.service.view(h.root, "goals", "board", "g")
    assert board.meta.last_append_sequence == 2
    assert [t.title for t in board.active[0].todos] == ["x", "from elsewhere"]


CHILD = """
import sys
from loopstate.domains.goals import DOMAIN
from loopstate.service.engine import Service
from loopstate_protocol import goals as g
root, name, count = sys.argv[1], sys.argv[2], int(sys.argv[3])
service = Service(domains=[DOMAIN])
for n in range(count):
    service.execute(root, g.AddTodo(goal_id="shared", title=f"{name} {n}"), f"{name}-{n}")
"""


def test_processes_appending_to_one_goal_get_distinct_ids_and_one_chain(h: Harness) -> None:
    import subprocess
    import sys

    env = {**os.environ, "LOOPSTATE_DATA_DIR": str(h.data_dir)}
    children = [subprocess.Popen([sys.executable, "-c", CHILD, h.root, f"writer{i}", "12"], env=env)
                for i in range(3)]
    assert [child.wait(timeout=120) for child in children] == [0, 0, 0]
    board = h.fresh().query(h.root, g.GetBoard(goal_id="shared"))
    todos = board.active[0].todos
    assert sorted(t.todo_id for t in todos) == [f"T{n:03d}" for n in range(1, 37)]
    assert sorted(t.title for t in todos) == sorted(f"writer{i} {n}" for i in range(3) for n in range(12))
    for i in range(3):  # each writer's own todos keep its order
        mine = [t.title for t in sorted(todos, key=lambda t: t.append_sequence) if t.title.startswith(f"writer{i} ")]
        assert mine == [f"writer{i} {n}" for n in range(12)]
