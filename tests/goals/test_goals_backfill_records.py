"""Backfill beyond todos and gates: runs, the refresh timeline, quota totals and evidence refs."""

from __future__ import annotations

from pathlib import Path

import pytest
from goalkit import Harness

from loopstate_protocol import goals as g
from loopstate_protocol.errors import ErrorCode

from loopstate.core.errors import LoopstateError

RECORDS = """# Active goal state: imported

## Todos

### agent

- [ ] P1 `T001` Ship the replay

## Runs

2 runs recorded; latest:

| run | status | classification | delivery | todo | recorded |
|---|---|---|---|---|---|
| run-7 | failed | flaky |  | T001 | 2026-03-01T09:00:00+01:00 |
| run-7 | succeeded |  | delivered | T001 | 2026-03-01T10:00:00Z |

## Refresh timeline

- 2026-03-01T11:00:00Z state_only: state refreshed after the merge

## Quota

| unit | category | amount | entries |
|---|---|---|---|
| usd | compute | 1234567.25 | 3 |

## Evidence

- `E001` todo T001: ci#55 (replay smoke)
- `E002` run run-7: report-3
"""


def test_backfill_imports_runs_refreshes_quota_and_evidence_with_their_file_times(h: Harness) -> None:
    events = h.run(g.Backfill(goal_id="imported", markdown=RECORDS)).events
    assert [e["event_type"] for e in events] == [
        "todo_added", "run_recorded", "run_recorded", "refresh_recorded", "quota_spent", "evidence_attached",
        "evidence_attached"]
    assert all(e["producer"] == "loopx.backfill" and e["refs"]["source"] == "markdown:ACTIVE_GOAL_STATE.md"
               for e in events)
    assert [e["recorded_at"] for e in events if e["event_type"] == "run_recorded"] == [
        "2026-03-01T08:00:00Z", "2026-03-01T10:00:00Z"]
    board = h.ask(g.GetBoard(goal_id="imported"))
    assert [(r.run_id, r.status) for r in board.runs] == [("run-7", "failed"), ("run-7", "succeeded")]
    assert board.quota[0].amount == 1234567.25
    assert [(e.evidence_id, e.target_kind, e.target_id, e.ref, e.summary) for e in board.evidence] == [
        ("E001", "todo", "T001", "ci#55", "replay smoke"), ("E002", "run", "run-7", "report-3", None)]
    assert h.ask(g.BridgeMarkdown(goal_id="imported", markdown=RECORDS)).clean
    assert h.run(g.Backfill(goal_id="imported", markdown=RECORDS)).events == []  # the same file again: nothing


def test_a_goal_rendered_and_backfilled_elsewhere_bridges_clean_with_every_section(h: Harness) -> None:
    h.run(g.AddTodo(goal_id="src", title="first", priority="P0"))
    h.run(g.RecordRun(goal_id="src", run_id="run-1", status="succeeded", delivery_outcome="delivered", todo_id="T001"))
    h.run(g.RecordRefresh(goal_id="src", summary="progress | with a bar", refresh_kind="progress"))
    h.run(g.SpendQuota(goal_id="src", amount=0.1, unit="usd"))
    h.run(g.SpendQuota(goal_id="src", amount=0.2, unit="usd"))
    h.run(g.AttachEvidence(goal_id="src", target_kind="run", target_id="run-1", ref="ci#9", summary="green"))
    h.run(g.RenderMarkdown(goal_id="src"))
    rendered = (Path(h.root) / "ACTIVE_GOAL_STATE.md").read_text()
    h.run(g.Backfill(goal_id="copy", markdown=rendered))
    report = h.ask(g.BridgeMarkdown(goal_id="copy", markdown=rendered))
    assert report.clean, report.differences
    copy = h.ask(g.GetBoard(goal_id="copy"))
    assert copy.quota[0].amount == 0.1 + 0.2 and copy.refreshes[0].summary == "progress | with a bar"
    # A later file of the same goal does not count the quota total or the run twice.
    h.run(g.SpendQuota(goal_id="src", amount=1, unit="usd"))
    h.run(g.RenderMarkdown(goal_id="src", force=True))
    h.run(g.Backfill(goal_id="copy", markdown=(Path(h.root) / "ACTIVE_GOAL_STATE.md").read_text()))
    again = h.ask(g.GetBoard(goal_id="copy"))
    assert again.quota[0].amount == 0.1 + 0.2 and again.run_count == 1


def test_the_bridge_reports_record_differences(h: Harness) -> None:
    h.run(g.Backfill(goal_id="imported", markdown=RECORDS))
    h.run(g.SpendQuota(goal_id="imported", amount=1, unit="usd"))
    h.run(g.RecordRun(goal_id="imported", run_id="run-8", status="running"))
    text = RECORDS.replace("ci#55", "ci#56")
    found = {(d.kind, d.subject, d.field) for d in h.ask(g.BridgeMarkdown(goal_id="imported", markdown=text)).differences}
    assert found == {("field_differs", "quota usd/compute", "amount"), ("missing_in_markdown", "run run-8", None),
                     ("field_differs", "evidence E001", "ref")}


@pytest.mark.parametrize("change, says", [
    ("- `E002` run run-7: report-3", "- `E002` run run-9: report-3"),
    ("| usd | compute | 1234567.25 | 3 |", "| usd | compute | 1 | 1 |\n| usd | compute | 2 | 1 |"),
    ("| run-7 | failed | flaky |  | T001 |", "| run-7 | failed | flaky |  | T009 |"),
    ("2026-03-01T11:00:00Z state_only", "yesterday state_only"),
    ("| usd | compute | 1234567.25 | 3 |", "| usd | compute | lots | 3 |"),
])
def test_backfill_refuses_records_it_cannot_import_and_appends_nothing(h: Harness, change: str, says: str) -> None:
    with pytest.raises(LoopstateError) as refused:
        h.run(g.Backfill(goal_id="imported", markdown=RECORDS.replace(change, says)))
    assert refused.value.code in (ErrorCode.RULE_VIOLATION, ErrorCode.VALIDATION_FAILED)
    assert "line" in refused.value.message
    assert not h.stream_path("imported").exists()
