"""`loopstate goals board` pages, through the real CLI in subprocesses."""

from __future__ import annotations

import json
import re
import shlex

from goalkit import Harness

from loopstate_protocol import goals as g


def _goal_with(h: Harness, active: int, completed: int) -> None:
    for number in range(1, active + completed + 1):
        h.run(g.AddTodo(goal_id="g", title=f"task {number}"))
    for number in range(active + 1, active + completed + 1):
        h.run(g.CompleteTodo(goal_id="g", todo_id=f"T{number:03d}", rationale="done"))


def test_the_board_says_what_it_left_out_and_the_command_it_prints_shows_the_rest(h: Harness, cli) -> None:
    _goal_with(h, active=3, completed=14)
    first = cli("board", "g").stdout
    assert "Shown: todos 1-13 of 17 (14 completed, 3 open). 4 more: `loopstate goals board g --cursor c." in first
    assert "T017" in first and "T008" in first and "T007" not in first
    command = re.search(r"`loopstate goals board (g --cursor \S+)`", first).group(1)
    rest = cli("board", *shlex.split(command)).stdout
    assert "Archive candidates (older completed todos: 4 on this page)" in rest
    assert all(f"T00{n}" in rest for n in (4, 5, 6, 7)) and "T008" not in rest
    assert "Shown: todos 14-17 of 17" in rest and "more:" not in rest


def test_json_pages_follow_next_cursor_to_the_end(h: Harness, cli) -> None:
    _goal_with(h, active=4, completed=12)
    seen, cursor = [], None
    while True:
        args = ["board", "g", "--json", "--limit", "5"] + (["--cursor", cursor] if cursor else [])
        board = json.loads(cli(*args).stdout)
        seen += [t["todo_id"] for group in board["active"] for t in group["todos"]]
        seen += [t["todo_id"] for t in board["completed"] + board["archive_candidates"]]
        cursor = board["page"]["next_cursor"]
        if cursor is None:
            break
    assert seen == [f"T{n:03d}" for n in range(1, 5)] + [f"T{n:03d}" for n in range(16, 4, -1)]
    whole = json.loads(cli("board", "g", "--json", "--all").stdout)
    assert len(whole["archive_candidates"]) == 2 and whole["page"] | {"status_counts": None} == {
        "limit": None, "cursor": None, "next_cursor": None, "before": 0, "after": 0, "active_total": 4,
        "completed_total": 12, "status_counts": None, "resolved_gates_total": 0, "evidence_total": 0}


def test_bad_paging_flags_are_refused_with_what_to_do(h: Harness, cli) -> None:
    _goal_with(h, active=1, completed=0)
    bad = cli("board", "g", "--cursor", "c.12.x", expect=1)
    assert "INVALID_PARAMS" in bad.stderr and "pass the page.next_cursor a board page gave" in bad.stderr
    assert "limit" in cli("board", "g", "--limit", "0", expect=1).stderr
    assert "leave out --cursor" in cli("board", "g", "--all", "--cursor", "c.3", expect=1).stderr
