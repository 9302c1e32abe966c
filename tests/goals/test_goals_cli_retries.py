"""Exact retries through the real CLI: an event given again is a no-op, however its defaults were spelled.

The seed's idempotency compares an event's normalized body; a default written
out (``--role agent``, ``--category compute``) must normalize to the body that
leaves it out, and a Markdown file imported twice must append nothing the
second time, also for items that carry no id of their own.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from loopstate.core.stream import Stream
from loopstate.domains.goals import events as ev
from loopstate.domains.goals.domain import LAYOUT


def _events(cli, goal: str) -> int:
    return json.loads(cli("board", goal, "--json").stdout)["meta"]["store_sequence"]


@pytest.mark.parametrize(("first", "again"), [
    (("add", "g1", "once", "--event-id", "e1"), ("add", "g1", "once", "--event-id", "e1", "--role", "agent")),
    (("add", "g1", "once", "--event-id", "e1", "--role", "agent"), ("add", "g1", "once", "--event-id", "e1")),
    (("add", "g1", "once", "--event-id", "e1", "--role", "agent", "--priority", "P2"),
     ("add", "g1", "once", "--event-id", "e1", "--role", "agent", "--priority", "P2")),
])
def test_a_todo_given_again_with_its_default_role_spelled_out_is_a_no_op(cli, first, again) -> None:
    cli(*first)
    repeated = cli(*again, "--json")
    assert json.loads(repeated.stdout)["no_op"] is True
    assert _events(cli, "g1") == 1


def test_a_quota_spend_given_again_with_its_default_category_spelled_out_is_a_no_op(cli) -> None:
    cli("add", "g1", "spend on me")
    cli("quota", "g1", "2", "usd", "--event-id", "q1")
    assert json.loads(cli("quota", "g1", "2", "usd", "--event-id", "q1", "--category", "compute", "--json").stdout)["no_op"]
    assert _events(cli, "g1") == 2
    stored = json.loads(cli("quota", "g1", "2", "usd", "--event-id", "q2", "--category", "compute", "--json").stdout)
    assert "category" not in stored["events"][0]["payload"], "a default is not stored"
    changed = cli("quota", "g1", "2", "usd", "--event-id", "q1", "--category", "review", "--json", expect=1)
    assert json.loads(changed.stdout)["error"]["code"] == "EVENT_ID_CONFLICT"


def test_a_raw_append_with_explicit_defaults_repeats_the_typed_event(cli) -> None:
    cli("add", "g1", "typed", "--event-id", "e1")
    payload = json.dumps({"todo_id": "T001", "title": "typed", "role": "agent", "priority": "P2"})
    assert json.loads(cli("append", "g1", "todo_added", payload, "--event-id", "e1", "--json").stdout)["no_op"]
    assert _events(cli, "g1") == 1


WORKBENCH = """# Active goal state

## Todos

### agent

- [ ] P1 Write the parser
- [ ] P2 `T005` Keep the replay deterministic
- [ ] P2 Document the format

## Gates

### User inbox

- [ ] user: Approve the format
"""


def test_backfilling_the_same_file_twice_appends_nothing_even_for_items_without_ids(cli, root: Path) -> None:
    path = root / "ACTIVE_GOAL_STATE.md"
    path.write_text(WORKBENCH, encoding="utf-8")
    first = json.loads(cli("backfill", "g1", str(path), "--json").stdout)
    added = sorted(e["payload"]["todo_id"] for e in first["events"] if e["event_type"] == "todo_added")
    assert len(set(added)) == 3 and "T005" in added
    again = json.loads(cli("backfill", "g1", str(path), "--json").stdout)
    assert again["events"] == [] and again["no_op"] is True
    board = json.loads(cli("board", "g1", "--json").stdout)
    assert board["meta"]["store_sequence"] == len(first["events"])
    titles = sorted(t["title"] for group in board["active"] for t in group["todos"])
    assert titles == ["Document the format", "Keep the replay deterministic", "Write the parser"]
    assert [g["title"] for g in board["user_inbox"]] == ["Approve the format"]


@pytest.mark.jsonl_only("reads or edits the stream file")
def test_an_event_stored_with_its_defaults_spelled_out_is_repeated_not_conflicting(cli, h) -> None:
    """A store written before defaults were normalized away holds ``role: agent`` in the body."""
    cli("add", "g1", "first")
    stream = Stream(h.project.dir, "goals.g1", LAYOUT)
    list(stream.read_new())
    legacy = ev.make_event(event_type="todo_added", event_id="e1", goal_id="g1", recorded_at="2026-03-02T12:00:00Z",
                           producer=ev.DEFAULT_PRODUCER, privacy_class="public_safe", refs={"todo_id": "T002"},
                           payload={"todo_id": "T002", "title": "once"})
    stream.append([{**legacy, "payload": {**legacy["payload"], "role": "agent", "priority": "P2"}}])
    for extra in ((), ("--role", "agent"), ("--priority", "P2")):
        again = json.loads(cli("add", "g1", "once", "--event-id", "e1", "--id", "T002", *extra, "--json").stdout)
        assert again["no_op"] is True, extra
    changed = cli("add", "g1", "once", "--event-id", "e1", "--id", "T002", "--role", "reviewer", "--json", expect=1)
    assert json.loads(changed.stdout)["error"]["code"] == "EVENT_ID_CONFLICT"
    assert _events(cli, "g1") == 2
