"""`loopstate goals ...` through a real process: tables, --json, exit codes, messages."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from goalkit import FIXTURE

pytestmark = pytest.mark.both_stores  # docs/storage.md, *Which tests run on PostgreSQL*


@pytest.mark.slow
def test_cli_records_todos_and_gates_and_shows_the_board(cli, root: Path) -> None:
    assert "todo_added todo_id=T001 at append_sequence 1" in cli("add", "g1", "Define the envelope", "--priority", "P0").stdout
    cli("add", "g1", "Replay deterministically", "--order", "1")
    cli("claim", "g1", "T001", "--by", "codex", "--lease", "600")
    cli("gate", "g1", "Approve the envelope", "--kind", "owner", "--todo", "T001", "--run", "run-1")
    refused = cli("complete", "g1", "T001", "--rationale", "merged", expect=1)
    assert "RULE_VIOLATION" in refused.stderr and "G001" in refused.stderr and refused.stdout == ""
    cli("resolve", "g1", "G001", "--decision", "approve", "--by", "alice")
    cli("complete", "g1", "T001", "--rationale", "merged", "--validation", "pr#1")
    cli("quota", "g1", "2.5", "usd")
    table = cli("board", "g1").stdout
    assert "goal g1: 7 lifecycle events, last_append_sequence 7" in table
    assert "T002" in table and "Replay deterministically" in table and "Completed" in table
    board = json.loads(cli("board", "g1", "--json").stdout)
    assert board["meta"]["last_append_sequence"] == 7
    assert [t["todo_id"] for t in board["completed"]] == ["T001"]
    assert board["quota"] == [{"unit": "usd", "category": "compute", "amount": 2.5, "entries": 1}]


def test_cli_json_outcome_and_event_id_idempotency(cli) -> None:
    first = json.loads(cli("add", "g1", "once", "--event-id", "evt-1", "--json").stdout)
    assert first["events"][0]["event_id"] == "evt-1" and first["no_op"] is False
    again = cli("add", "g1", "once", "--event-id", "evt-1")
    assert "no change" in again.stdout
    conflict = cli("add", "g1", "different", "--event-id", "evt-1", "--json", expect=1)
    assert json.loads(conflict.stdout)["error"]["code"] == "EVENT_ID_CONFLICT"
    retry = json.loads(cli("add", "g1", "second", "--request-id", "req-9", "--json").stdout)
    replay = json.loads(cli("add", "g1", "second", "--request-id", "req-9", "--json").stdout)
    assert replay["replayed"] is True and replay["events"] == retry["events"]


@pytest.mark.slow
def test_cli_render_check_and_bridge(cli, root: Path) -> None:
    cli("add", "g1", "first")
    cli("render", "g1")
    path = root / "ACTIVE_GOAL_STATE.md"
    assert "`T001` first" in path.read_text()
    assert "current" in cli("render", "g1", "--check").stdout
    cli("add", "g1", "second")
    stale = cli("render", "g1", "--check", "--json", expect=1)
    assert json.loads(stale.stdout)["status"] == "stale"
    assert "missing_in_markdown todo T002" in cli("bridge", "g1", expect=1).stdout
    cli("render", "g1")
    assert "clean" in cli("bridge", "g1").stdout
    path.write_text(path.read_text().replace("`T001` first", "`T001` first, edited"))
    assert "edited" in cli("render", "g1", "--check", expect=1).stdout
    refused = cli("render", "g1", expect=1)
    assert "CONFLICT" in refused.stderr and "--force" in refused.stderr
    preview = cli("render", "g1", "--stdout", "--public").stdout
    assert preview.startswith("# Active goal state: g1") and '"privacy":"public_safe"' in preview


@pytest.mark.slow
def test_cli_backfill_then_bridge_is_clean(cli, root: Path) -> None:
    done = cli("backfill", "payments", str(FIXTURE), "--json")
    events = json.loads(done.stdout)["events"]
    assert len(events) == 17 and {e["producer"] for e in events} == {"loopx.backfill"}
    assert all(e["refs"]["source"] == "markdown:ACTIVE_GOAL_STATE.md" for e in events)
    assert "clean" in cli("bridge", "payments", str(FIXTURE)).stdout
    cli("render", "payments")
    assert "clean" in cli("bridge", "payments").stdout
    public = cli("board", "payments", "--public", "--json").stdout
    assert "/home/alice" not in public and "omitted" in public
    assert json.loads(cli("list", "--json").stdout) == {"goals": ["payments"]}


@pytest.mark.slow
def test_cli_compact_then_board_reads_from_the_snapshot(cli) -> None:
    for number in range(5):
        cli("add", "g1", f"task {number}")
    cli("compact", "g1")
    cli("add", "g1", "after the snapshot")
    fast = json.loads(cli("board", "g1", "--json").stdout)
    full = json.loads(cli("board", "g1", "--json", "--no-snapshot").stdout)
    fast["meta"].pop("generated_at"), full["meta"].pop("generated_at")
    assert fast == full and fast["meta"]["store_sequence"] == 7


def test_cli_refuses_bad_input_with_a_clear_message(cli) -> None:
    bad_goal = cli("add", "../etc", "x", expect=1)
    assert "INVALID_PARAMS" in bad_goal.stderr and "goal" in bad_goal.stderr
    cli("add", "g1", "x")
    private = cli("add", "g1", "x", "--details", "secret body", expect=1)
    assert "PRIVACY_VIOLATION" in private.stderr and "local_private" in private.stderr
    missing = cli("backfill", "g1", "/nonexistent/file.md", expect=1)
    assert "NOT_FOUND" in missing.stderr
    assert "usage" in cli(expect=2).stderr.lower()


@pytest.mark.slow
def test_cli_run_refresh_quota_evidence_and_update_verbs(cli) -> None:
    cli("add", "g1", "first")
    cli("update", "g1", "T001", "--title", "first, renamed", "--meta", "area=storage", "--ref", "pr=12")
    cli("run", "g1", "run-1", "--status", "succeeded", "--delivery", "delivered", "--todo", "T001")
    cli("refresh", "g1", "state refreshed", "--kind", "state_only")
    cli("quota", "g1", "3", "usd", "--category", "review")
    assert "evidence_attached" in cli("evidence", "g1", "todo", "T001", "ci#55", "--summary", "smoke").stdout
    cli("defer", "g1", "T001", "--resume-when", "after review", "--until", "2026-04-01T00:00:00+02:00")
    board = json.loads(cli("board", "g1", "--json").stdout)
    todo = board["active"][0]["todos"][0]
    assert todo["title"] == "first, renamed" and todo["metadata"] == {"area": "storage"}
    assert todo["evidence_ids"] == ["E001"] and todo["resume_until"] == "2026-03-31T22:00:00Z"
    assert board["evidence"][0]["ref"] == "ci#55" and board["runs"][0]["delivery_outcome"] == "delivered"
    assert board["refreshes"][0]["refresh_kind"] == "state_only"
    assert board["quota"] == [{"unit": "usd", "category": "review", "amount": 3.0, "entries": 1}]
    events = json.loads(cli("block", "g1", "T001", "--reason", "waiting", "--json").stdout)["events"]
    assert events[0]["event_type"] == "todo_blocked"


def test_cli_render_flag_writes_the_workbench_after_the_event(cli, root: Path) -> None:
    done = cli("add", "g1", "first", "--render")
    assert "todo_added" in done.stdout and "projection_rendered" in done.stdout
    assert "current" in cli("render", "g1", "--check").stdout
    result = json.loads(cli("claim", "g1", "T001", "--by", "codex", "--render", "--json").stdout)
    assert result["events"][0]["event_type"] == "todo_claimed"
    assert result["render"]["events"][0]["payload"]["rendered_through_sequence"] == 3
    assert "claimed by: codex" in (root / "ACTIVE_GOAL_STATE.md").read_text()
    (root / "ACTIVE_GOAL_STATE.md").write_text("# hand notes\n")
    refused = cli("add", "g1", "second", "--render", expect=1)
    assert "todo_added" in refused.stdout and "was recorded, but ACTIVE_GOAL_STATE.md was not rendered" in refused.stderr
    assert json.loads(cli("board", "g1", "--json").stdout)["meta"]["source_event_count"] == 3


def test_cli_renders_the_workbench_in_a_fresh_git_repository(cli, root: Path) -> None:
    """`git init r && cd r && loopstate goals add g t && loopstate goals render g`: the untracked file is written."""
    import subprocess

    subprocess.run(["git", "init", "-q", str(root)], check=True)
    cli("add", "g", "t")
    assert "ACTIVE_GOAL_STATE.md" in cli("render", "g").stdout
    assert "T001" in (root / "ACTIVE_GOAL_STATE.md").read_text()
    rendered = json.loads(cli("add", "g", "second", "--render", "--json").stdout)
    assert "render_error" not in rendered and "T002" in (root / "ACTIVE_GOAL_STATE.md").read_text()
