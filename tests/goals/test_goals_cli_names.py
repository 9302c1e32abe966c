"""A mistyped goal id through the real CLI: a read says the goal does not exist, a near-miss
name does not quietly start a second goal."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from loopstate.domains.goals.names import near


@pytest.fixture
def two_goals(cli, root: Path):
    cli("add", "json-export", "Write the exporter")
    cli("add", "payments", "Settle the ledger")
    (root / "notes.md").write_text("## Todos\n\n### agent\n\n- [ ] P1 `T001` Write the exporter\n", encoding="utf-8")
    return cli


READS = [
    ("board", "json-exprot"),
    ("board", "json-exprot", "--public", "--no-snapshot"),
    ("bridge", "json-exprot", "notes.md"),
    ("render", "json-exprot", "--stdout"),
    ("render", "json-exprot", "--check", "--output", "notes.md"),
]


@pytest.mark.parametrize("read", READS, ids=[" ".join(r) for r in READS])
def test_every_read_of_a_goal_without_events_is_not_found_and_lists_the_goals(two_goals, root: Path, read,
                                                                             monkeypatch) -> None:
    monkeypatch.chdir(root)  # the bridge's file is a path from the current directory
    refused = two_goals(*read, expect=1)
    assert refused.stdout == ""
    assert "NOT_FOUND" in refused.stderr and "goal 'json-exprot' has no events" in refused.stderr
    assert "Did you mean 'json-export'?" in refused.stderr
    assert "Goals in this project: json-export, payments." in refused.stderr
    error = json.loads(two_goals(*read, "--json", expect=1).stdout)["error"]
    assert error["code"] == "NOT_FOUND"
    assert error["details"]["known_goals"] == ["json-export", "payments"]
    assert error["details"]["suggestions"] == ["json-export"]


def test_a_read_in_a_project_without_goals_says_there_are_none(cli) -> None:
    refused = cli("board", "anything", expect=1)
    assert "NOT_FOUND" in refused.stderr and "This project has no goals yet" in refused.stderr


def test_rendering_a_goal_without_events_writes_nothing(two_goals, root: Path) -> None:
    refused = two_goals("render", "json-exprot", expect=1)
    assert "NOT_FOUND" in refused.stderr and not (root / "ACTIVE_GOAL_STATE.md").exists()
    assert json.loads(two_goals("list", "--json").stdout) == {"goals": ["json-export", "payments"]}


@pytest.mark.parametrize("first", [
    ("add", "json-exprot", "Write the exporter"),
    ("gate", "json-exprot", "Approve it"),
    ("quota", "json-exprot", "1", "usd"),
    ("refresh", "json-exprot", "state refreshed"),
    ("append", "json-exprot", "todo_added", '{"todo_id": "T001", "title": "x"}'),
    ("backfill", "json-exprot", "notes.md"),
    ("add", "json-expor", "deleted a letter"),
    ("add", "json-exports", "inserted a letter"),
    ("add", "jsno-export", "swapped two letters"),
])
def test_a_first_event_one_edit_away_from_an_existing_goal_needs_new_goal(two_goals, root: Path, first,
                                                                         monkeypatch) -> None:
    monkeypatch.chdir(root)
    refused = two_goals(*first, expect=1)
    assert "CONFLICT" in refused.stderr and "one edit away from 'json-export'" in refused.stderr
    assert "--new-goal" in refused.stderr
    assert json.loads(two_goals("list", "--json").stdout)["goals"] == ["json-export", "payments"], "nothing was written"
    confirmed = json.loads(two_goals(*first, "--new-goal", "--json").stdout)
    assert confirmed["events"] and confirmed["events"][0]["goal_id"] == first[1]
    # Once the goal exists, later commands need no confirmation.
    assert two_goals("refresh", first[1], "later", "--json").returncode == 0


def test_a_goal_id_differing_only_in_case_is_refused_even_when_confirmed(two_goals) -> None:
    for extra in ((), ("--new-goal",)):
        refused = two_goals("add", "JSON-export", "x", *extra, expect=1)
        assert "CONFLICT" in refused.stderr and "differs only in case from 'json-export'" in refused.stderr


def test_a_retry_that_adds_the_confirmation_is_the_same_request(two_goals) -> None:
    first = json.loads(two_goals("add", "json-exprot", "x", "--new-goal", "--request-id", "r1", "--json").stdout)
    again = json.loads(two_goals("add", "json-exprot", "x", "--request-id", "r1", "--json").stdout)
    assert again["replayed"] is True and again["events"] == first["events"]


@pytest.mark.parametrize(("name", "other", "expected"), [
    ("json-exprot", "json-export", True),
    ("payment", "payments", True),
    ("sprint-3", "sprint-4", False),  # a numbered series, not a typo
    ("goal", "goal2", False),
    ("g1", "g2", False),
    ("ab", "abc", False),  # too short to call a typo
    ("docs", "code", False),
    ("json-export", "json-export", False),
])
def test_what_counts_as_a_near_miss(name: str, other: str, expected: bool) -> None:
    assert near(name, other) is expected
