"""The indexed, paged board against a plain recomputation from the events.

The fold keeps the live todos in board order and the completed ones in an
archive; these properties check, for any accepted history, that the pages
walked with any limit list exactly the todos the old full computation listed
(active by priority, planner order and append order; completed newest first),
that each page's counts say what it left out, and that a state restored from a
snapshot at any cut and folded on equals the full fold.
"""

from __future__ import annotations

import collections

import msgspec
import pytest
from goalkit import Harness
from hypothesis import HealthCheck, event, given, settings
from hypothesis import strategies as st
from test_goals_properties import _apply, _seal

from loopstate_protocol import goals as g
from loopstate_protocol.errors import ErrorCode

from loopstate.core.errors import LoopstateError
from loopstate.domains.goals import DOMAIN
from loopstate.domains.goals.projection import RECENT_COMPLETED, build_board
from loopstate.domains.goals.state import GoalState, state_checksum
from tests.conftest import snapshot_file

AT = "2026-03-02T12:00:00Z"
RANK = {"P0": 0, "P1": 1, "P2": 2, "P3": 3}
pool = st.sampled_from([f"T{n:03d}" for n in range(1, 31)])
adds = st.builds(g.AddTodo, goal_id=st.just("p"), todo_id=pool, title=st.sampled_from(["a", "b", "c"]),
                role=st.sampled_from(["agent", "user"]), priority=st.sampled_from(list(RANK)),
                planner_order=st.none() | st.integers(0, 2), privacy=st.sampled_from(["public_safe", "local_private"]))
# Adds first (so that most later commands find their todo), then any mix, completions twice as likely.
history = st.tuples(st.lists(adds, max_size=30), st.lists(st.one_of(
    adds,
    st.builds(g.UpdateTodo, goal_id=st.just("p"), todo_id=pool, priority=st.sampled_from(list(RANK)),
              planner_order=st.none() | st.integers(0, 2)),
    st.builds(g.ClaimTodo, goal_id=st.just("p"), todo_id=pool, claimed_by=st.just("codex")),
    st.builds(g.BlockTodo, goal_id=st.just("p"), todo_id=pool, reason=st.just("waits")),
    st.builds(g.DeferTodo, goal_id=st.just("p"), todo_id=pool, resume_when=st.just("later")),
    st.builds(g.CompleteTodo, goal_id=st.just("p"), todo_id=pool, rationale=st.just("done")),
    st.builds(g.CompleteTodo, goal_id=st.just("p"), todo_id=pool, rationale=st.just("done")),
), max_size=60)).map(lambda parts: parts[0] + parts[1])
IDS = [f"T{n:03d}" for n in range(1, 31)]
# Histories whose completed todos overflow the completed tail into the archive.
history = history | st.tuples(history, st.permutations(IDS), st.integers(RECENT_COMPLETED + 1, 30), history).map(
    lambda parts: [*parts[0], *(g.AddTodo(goal_id="p", todo_id=i, title="x") for i in IDS),
                   *(g.CompleteTodo(goal_id="p", todo_id=i, rationale="done") for i in parts[1][:parts[2]]), *parts[3]])


def expected_order(log: list[dict]) -> tuple[list[str], list[str], dict[str, int]]:
    """The old full computation, from the events alone: active ids in board order,
    completed ids newest first, and every todo's status counted."""
    todos: dict[str, dict] = {}
    for event in log:
        p, kind = event["payload"], event["event_type"]
        if kind == "todo_added":
            todos[p["todo_id"]] = {"priority": p.get("priority", "P2"), "order": p.get("planner_order"),
                                   "added": event["append_sequence"], "status": "open", "done": None}
        elif kind == "todo_updated":
            todo = todos[p["todo_id"]]
            todo["priority"] = p.get("priority") or todo["priority"]
            todo["order"] = p["planner_order"] if p.get("planner_order") is not None else todo["order"]
        elif kind.startswith("todo_"):
            status = {"todo_claimed": "claimed", "todo_blocked": "blocked", "todo_deferred": "deferred",
                      "todo_completed": "completed"}[kind]
            todos[p["todo_id"]]["status"] = status
            if status == "completed":
                todos[p["todo_id"]]["done"] = event["append_sequence"]

    def key(item):
        todo = item[1]
        return (RANK[todo["priority"]], todo["order"] is None, todo["order"] or 0, todo["added"])

    active = [i for i, t in sorted(todos.items(), key=key) if t["status"] != "completed"]
    done = [i for i, t in sorted(todos.items(), key=lambda it: (it[1]["done"] or 0, it[1]["added"]), reverse=True)
            if t["status"] == "completed"]
    return active, done, dict(collections.Counter(t["status"] for t in todos.values()))


def page_ids(board: g.Board) -> list[str]:
    """The page's todos in board order (the active ones by priority across role groups)."""
    active = sorted((t for group in board.active for t in group.todos),
                    key=lambda t: (RANK[t.priority], t.planner_order is None, t.planner_order or 0, t.append_sequence))
    return [t.todo_id for t in (*active, *board.completed, *board.archive_candidates)]


@pytest.mark.slow
@settings(max_examples=120, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(history, st.sampled_from([1, 2, 5, 11, 100]), st.booleans())
def test_pages_walked_with_any_limit_list_exactly_the_full_computation(commands, limit, public) -> None:
    state, log, _ = _apply(commands)
    active, done, counts = expected_order(log)
    event(f"completed todos: {'over' if len(done) > RECENT_COMPLETED else 'at most'} {RECENT_COMPLETED}")
    whole = build_board(state, generated_at=AT, public=public)
    assert page_ids(whole) == active + done
    assert [t.todo_id for t in whole.completed] == done[:RECENT_COMPLETED]
    assert all(t.rationale is None for t in whole.archive_candidates)  # compact views
    assert whole.page.status_counts == dict(sorted(counts.items())) and whole.page.next_cursor is None

    first = build_board(state, generated_at=AT, public=public, limit=limit)
    shown_active = min(limit, len(active))
    tail = min(RECENT_COMPLETED, limit - shown_active, len(done)) if shown_active == len(active) else 0
    assert page_ids(first) == active[:shown_active] + done[:tail]
    walked, board, pages = page_ids(first), first, 1
    while board.page.next_cursor is not None:
        assert board.page.after == len(active) + len(done) - len(walked)
        board = build_board(state, generated_at=AT, public=public, limit=limit, cursor=board.page.next_cursor)
        assert board.page.before == len(walked) and 0 < len(page_ids(board)) <= limit
        walked += page_ids(board)
        pages += 1
        assert pages <= len(active) + len(done) + 1
    assert walked == active + done and board.page.after == 0


@pytest.mark.slow
@settings(max_examples=80, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(history, st.integers(0, 80))
def test_a_snapshot_at_any_cut_plus_the_tail_folds_to_the_full_fold(commands, cut) -> None:
    state, log, _ = _apply(commands)
    cut = min(cut, len(log))
    partial = DOMAIN.initial("goals.p")
    for event in log[:cut]:
        partial = DOMAIN.evolve(partial, event)
    saved = msgspec.msgpack.encode(DOMAIN.snapshot_state(partial))
    restored = DOMAIN.restore_state("goals.p", msgspec.msgpack.decode(saved, type=DOMAIN.snapshot_type("goals.p")))
    for event in log[cut:]:
        restored = DOMAIN.evolve(restored, event)
    assert state_checksum(restored) == state_checksum(state)
    assert build_board(restored, generated_at=AT, public=False) == build_board(state, generated_at=AT, public=False)


def test_a_cursor_stays_valid_across_appends(h: Harness) -> None:
    for number in range(1, 7):
        h.run(g.AddTodo(goal_id="g", title=f"task {number}", priority="P2"))
    first = h.ask(g.GetBoard(goal_id="g", limit=3))
    assert page_ids(first) == ["T001", "T002", "T003"] and first.page.after == 3
    # Meanwhile: a todo ahead of the cursor (P0), one after it, and a completion.
    h.run(g.AddTodo(goal_id="g", title="urgent", priority="P0"))
    h.run(g.AddTodo(goal_id="g", title="later", priority="P3"))
    h.run(g.CompleteTodo(goal_id="g", todo_id="T005", rationale="done"))
    second = h.ask(g.GetBoard(goal_id="g", limit=3, cursor=first.page.next_cursor))
    assert page_ids(second) == ["T004", "T006", "T008"]
    assert (second.page.before, second.page.after) == (4, 1)  # T007 (P0) and T001-T003 come before it now
    third = h.ask(g.GetBoard(goal_id="g", limit=3, cursor=second.page.next_cursor))
    assert [t.todo_id for t in third.completed] == ["T005"] and third.page.next_cursor is None


@pytest.mark.parametrize("cursor", ["zz", "a.1.2", "c.1.2", "a.1.2.3.-4", "c.", "b.1", "c.1x"])
def test_a_cursor_the_board_did_not_give_is_refused_saying_what_to_pass(h: Harness, cursor: str) -> None:
    h.run(g.AddTodo(goal_id="g", title="one"))
    with pytest.raises(LoopstateError) as info:
        h.ask(g.GetBoard(goal_id="g", cursor=cursor))
    assert info.value.code is ErrorCode.INVALID_PARAMS
    assert "next_cursor" in info.value.message and repr(cursor) in info.value.message


@pytest.mark.parametrize("limit", [0, -1, g.MAX_BOARD_LIMIT + 1])
def test_a_limit_out_of_range_is_refused(h: Harness, limit: int) -> None:
    h.run(g.AddTodo(goal_id="g", title="one"))
    with pytest.raises(LoopstateError) as info:
        h.ask(g.GetBoard(goal_id="g", limit=limit))
    assert info.value.code is ErrorCode.INVALID_PARAMS and "limit" in info.value.message


def test_the_subscription_view_is_the_default_page(h: Harness) -> None:
    for number in range(1, g.BOARD_LIMIT + 6):
        h.run(g.AddTodo(goal_id="g", title=f"task {number}"))
    _, board = h.service.view(h.root, "goals", "board", "g")
    assert len(page_ids(board)) == g.BOARD_LIMIT and board.page.after == 5 and board.page.active_total == 105


def test_a_repeated_add_of_an_archived_todo_is_a_no_op_not_a_new_todo(h: Harness) -> None:
    h.run(g.AddTodo(goal_id="g", title="first", event_id="evt-first"))
    h.run(g.CompleteTodo(goal_id="g", todo_id="T001", rationale="done"))
    for number in range(2, RECENT_COMPLETED + 4):  # push T001 out of the completed tail
        h.run(g.AddTodo(goal_id="g", title=f"task {number}"))
        h.run(g.CompleteTodo(goal_id="g", todo_id=f"T{number:03d}", rationale="done"))
    assert h.run(g.AddTodo(goal_id="g", title="first", event_id="evt-first")).events == []
    with pytest.raises(LoopstateError) as info:
        h.run(g.AddTodo(goal_id="g", title="changed", event_id="evt-first"))
    assert info.value.code is ErrorCode.EVENT_ID_CONFLICT and info.value.details["first_sequence"] == 1
    with pytest.raises(LoopstateError) as info:
        h.run(g.UpdateTodo(goal_id="g", todo_id="T001", title="reopened"))
    assert info.value.code is ErrorCode.INVALID_TRANSITION  # an archived todo is still known as completed


def test_a_foreign_writer_time_is_kept_as_a_tag_and_still_decides_repeats() -> None:
    """A time the store did not write in its own form cannot be given back; the body and tag decide."""
    state = DOMAIN.initial("goals.p")
    event = {"schema_version": "goal_event_v0", "event_id": "e1", "goal_id": "p", "event_type": "todo_added",
             "recorded_at": "2026-03-02T13:00:00+01:00", "producer": "other", "privacy": "public_safe",
             "refs": {"todo_id": "T001"}, "payload": {"todo_id": "T001", "title": "x"}}
    state = DOMAIN.evolve(state, _seal(event, 1))
    assert DOMAIN.evolve(state, _seal(event, 2)).store.event_count == 1  # identical: ignored
    with pytest.raises(LoopstateError) as info:
        DOMAIN.evolve(state, _seal({**event, "recorded_at": "2026-03-02T12:00:00Z"}, 2))
    assert info.value.code is ErrorCode.EVENT_ID_CONFLICT


def test_the_packed_tables_hold_many_keys_exactly() -> None:
    from loopstate.domains.goals import eventids

    table = eventids.EventIds()
    for number in range(5000):
        at = eventids.find(table, f"e{number}")
        assert at[2] is None
        eventids.add(table, at, number + 1, f"{number:08x}" + "0" * 24, "2026-03-02T12:00:00.000001Z")
    assert all(eventids.lookup(table, f"e{n}").sequence == n + 1 for n in range(0, 5000, 7))
    assert eventids.lookup(table, "e5000") is None
    known = eventids.lookup(table, "e42")
    assert known.same_body(f"{42:08x}" + "0" * 24) and not known.same_body(f"{43:08x}" + "0" * 24)
    assert known.recorded_at == "2026-03-02T12:00:00.000001Z"
    assert len(table.marks) == 12 * 5000 and table.offsets == [(0, 1)] and len(table.index.tags) == 8 * 5000
    assert 0.4 <= 5000 / (len(table.index.slots) / 4) <= 0.8  # the probe table's slots are 40-80% full
    assert isinstance(msgspec.msgpack.decode(msgspec.msgpack.encode(GoalState(goal_id="p")), type=GoalState), GoalState)


def test_a_tag_index_keeps_every_entry_of_a_shared_tag_in_insertion_order() -> None:
    """Two todo ids may share a 64-bit tag: the done-id index keeps both entries and gives both
    back (first inserted first), through every growth of its probe table, and a miss is a miss."""
    from loopstate.domains.goals import packed

    index = packed.TagIndex()
    shared = 0xDEADBEEF_00000040  # its low bits and its step are the same at every table size
    numbers = []
    for number in range(3000):
        numbers.append(packed.insert(index, shared if number % 1000 == 0 else packed.tag_of(f"T{number}")))
    assert numbers == list(range(3000))
    assert list(packed.numbers(index, shared)) == [0, 1000, 2000]
    assert list(packed.numbers(index, packed.tag_of("T7"))) == [7]
    assert packed.first(index, packed.tag_of("T3000")) == -1 and packed.find(index, packed.tag_of("T3000"))[0] == -1


def test_a_snapshot_of_the_state_layout_before_the_archive_is_not_used(h: Harness) -> None:
    """Layout 1 held the state bare (every todo in ``todos``, a ``seen`` dict): read as today's
    layout it would lack the archive and the event ids, so it must not decode at all."""
    from loopstate.core import snapshot
    from loopstate.service.goals_effects import load_state

    for number in range(1, 14):
        h.run(g.AddTodo(goal_id="g", title=f"task {number}", event_id=f"add-{number}"))
        h.run(g.CompleteTodo(goal_id="g", todo_id=f"T{number:03d}", rationale="done"))
    h.run(g.Compact(goal_id="g"))
    assert load_state(h.project, "g").snapshot_sequence is not None  # today's layout is used
    path, kind = snapshot_file(h.project, "goals.g")
    envelope = msgspec.msgpack.decode(path.read_bytes(), type=kind)
    current = msgspec.msgpack.decode(envelope.state)
    bare = {**current["state"], "seen": {}}  # what layout 1 wrote: the state itself
    for name in ("order", "status_counts", "recent_done", "done", "done_ids", "event_ids"):
        del bare[name]
    old = msgspec.msgpack.encode(bare)
    envelope.state, envelope.state_crc32 = old, snapshot.checksum(old)
    path.write_bytes(msgspec.msgpack.encode(envelope))
    loaded = load_state(h.project, "g")
    assert loaded.snapshot_sequence is None and loaded.events_folded == 27  # a full fold instead
    assert h.fresh().query(h.root, g.GetBoard(goal_id="g")).page.completed_total == 13
    with pytest.raises(LoopstateError) as info:  # the event ids are there: a changed repeat conflicts
        h.fresh().execute(h.root, g.AddTodo(goal_id="g", title="changed", event_id="add-1"), "r-again")
    assert info.value.code is ErrorCode.EVENT_ID_CONFLICT


def test_after_a_restart_from_the_snapshot_an_old_event_id_is_still_known_with_its_time(h: Harness) -> None:
    """The event-id table a snapshot restores is the fold's: a repeat of the first event, long
    archived, is a no-op (it gets the original's time back, not the clock's), a changed one conflicts,
    and a new id with the same body is a new todo."""
    from loopstate.service.goals_effects import load_state

    for number in range(1, 41):
        h.run(g.AddTodo(goal_id="g", title=f"task {number}", event_id=f"add-{number}"))
        h.run(g.CompleteTodo(goal_id="g", todo_id=f"T{number:03d}", rationale="done", event_id=f"done-{number}"))
        h.clock.advance(1.5)
    h.run(g.Compact(goal_id="g"))
    assert load_state(h.project, "g").snapshot_sequence == 81
    h.clock.advance(3600)
    restarted = h.fresh()
    for event_id, command in (("add-1", g.AddTodo(goal_id="g", title="task 1", event_id="add-1")),
                              ("done-7", g.CompleteTodo(goal_id="g", todo_id="T007", rationale="done",
                                                       event_id="done-7"))):
        assert restarted.execute(h.root, command, f"again-{event_id}").events == []
    with pytest.raises(LoopstateError) as info:
        restarted.execute(h.root, g.AddTodo(goal_id="g", title="task one", event_id="add-1"), "changed")
    assert info.value.code is ErrorCode.EVENT_ID_CONFLICT and info.value.details["first_sequence"] == 1
    added = restarted.execute(h.root, g.AddTodo(goal_id="g", title="task 1", event_id="add-41"), "new")
    assert [e["payload"]["todo_id"] for e in added.events] == ["T041"]
    assert len(h.events("g")) == 82 and load_state(h.project, "g").snapshot_sequence == 81


def test_an_archive_record_leaves_out_only_the_defaults_and_reads_back_whole() -> None:
    from loopstate.domains.goals import packed
    from loopstate.domains.goals.state import Done, Todo, archived

    def completed(number: int, role: str = "agent", **fields) -> Todo:
        return Todo(todo_id=f"T{number:03d}", title="task", role=role, priority="P1", status="completed",
                    added_sequence=number, added_event_id=f"e{number}", completed_sequence=number + 10, **fields)

    todos = [completed(1), completed(2, role="acme-legal"), completed(3, private_fields=["rationale", "title"]),
             completed(4, role="ops", private_fields=["role", "title"])]
    archive = packed.Archive()
    for todo in todos:
        packed.append(archive, archived(todo), todo.completed_sequence)
    assert [packed.record(archive, n, Done) for n in range(4)] == [
        Done(todo_id=t.todo_id, title=t.title, priority=t.priority, added_sequence=t.added_sequence,
             completed_sequence=t.completed_sequence, role=t.role,
             private_fields=[n for n in t.private_fields if n in ("title", "role")]) for t in todos]
    assert msgspec.msgpack.decode(msgspec.msgpack.encode(archived(todos[0]))) == ["T001", "task", "P1", 1, 11]
    whole = msgspec.msgpack.encode(packed.record(archive, 0, Done))  # what the Struct itself writes
    assert len(whole) - len(msgspec.msgpack.encode(archived(todos[0]))) == 7  # 'agent' and [] left out
    assert (packed.count_below(archive, 12), packed.count_below(archive, 15)) == (1, 4)


def test_an_event_ids_sequence_is_exact_when_the_fold_skipped_repeats_and_after_a_snapshot() -> None:
    """Sequences are not stored per id but as offsets from the entry number: a fold that skipped
    identical repeats (each shifts the offset) still gives every id its first sequence, and so does
    the table a snapshot restores."""
    from loopstate.domains.goals import eventids

    state = DOMAIN.initial("goals.p")
    sequence, firsts = 0, {}
    for number in range(1, 31):
        event = {"schema_version": "goal_event_v0", "event_id": f"add-{number}", "goal_id": "p",
                 "event_type": "todo_added", "recorded_at": AT, "producer": "other", "privacy": "public_safe",
                 "refs": {"todo_id": f"T{number:03d}"}, "payload": {"todo_id": f"T{number:03d}", "title": "x"}}
        for _ in range(1 + (number % 3 == 0) + (number % 7 == 0)):  # some events appended two or three times
            sequence += 1
            state = DOMAIN.evolve(state, _seal(event, sequence))
        firsts.setdefault(f"add-{number}", sequence - (number % 3 == 0) - (number % 7 == 0))
    # one offset, then a change after each of the 13 repeated ids (3, 6, 7, ... 28) but the last (30)
    assert state.store.event_count == 30 and len(state.event_ids.offsets) == 1 + 13 - 1
    restored = msgspec.msgpack.decode(msgspec.msgpack.encode(state), type=GoalState)
    for table in (state.event_ids, restored.event_ids):
        assert {event_id: eventids.lookup(table, event_id).sequence for event_id in firsts} == firsts


def test_a_snapshot_of_layout_2_is_not_used_and_the_goal_folds_in_full(h: Harness) -> None:
    """Layout 2 kept event ids in one table of 24-byte slots: a snapshot that says layout 2 must
    not be read as today's tables; the goal folds from its first event instead, and stays whole."""
    from loopstate.core import snapshot
    from loopstate.service.goals_effects import load_state

    for number in range(1, 6):
        h.run(g.AddTodo(goal_id="g", title=f"task {number}", event_id=f"add-{number}"))
        h.run(g.CompleteTodo(goal_id="g", todo_id=f"T{number:03d}", rationale="done"))
    h.run(g.Compact(goal_id="g"))
    assert load_state(h.project, "g").snapshot_sequence == 11
    path, kind = snapshot_file(h.project, "goals.g")
    envelope = msgspec.msgpack.decode(path.read_bytes(), type=kind)
    old = msgspec.msgpack.encode({**msgspec.msgpack.decode(envelope.state), "layout": 2})
    envelope.state, envelope.state_crc32 = old, snapshot.checksum(old)
    path.write_bytes(msgspec.msgpack.encode(envelope))
    loaded = load_state(h.project, "g")
    assert loaded.snapshot_sequence is None and loaded.events_folded == 11
    assert h.fresh().execute(h.root, g.AddTodo(goal_id="g", title="task 1", event_id="add-1"), "again").events == []
