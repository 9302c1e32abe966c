"""Lifecycle rules: gates block completion, leases, closed todos, stable ids, refs."""

from __future__ import annotations

import pytest
from goalkit import Harness

from loopstate_protocol import goals as g
from loopstate_protocol.errors import ErrorCode

from loopstate.core.errors import LoopstateError

pytestmark = pytest.mark.both_stores  # docs/storage.md, *Which tests run on PostgreSQL*


def _refused(h: Harness, command, code: ErrorCode) -> LoopstateError:
    size = len(h.stream_bytes(command.goal_id)) if h.stream_path(command.goal_id).exists() else 0
    with pytest.raises(LoopstateError) as refused:
        h.run(command)
    assert refused.value.code is code, refused.value
    after = len(h.stream_bytes(command.goal_id)) if h.stream_path(command.goal_id).exists() else 0
    assert after == size  # a refusal appends nothing
    return refused.value


def test_an_unresolved_gate_tied_to_a_todo_blocks_its_completion(h: Harness) -> None:
    h.run(g.AddTodo(goal_id="g", title="ship"))
    h.run(g.AddGate(goal_id="g", title="Approve the release", gate_kind="owner", todo_id="T001", run_id="run-9"))
    error = _refused(h, g.CompleteTodo(goal_id="g", todo_id="T001", rationale="done"), ErrorCode.RULE_VIOLATION)
    assert "G001" in error.message and "Approve the release" in error.message and "goals resolve" in error.message
    assert error.details["open_gate_ids"] == ["G001"]
    board = h.ask(g.GetBoard(goal_id="g"))
    assert board.user_inbox[0].run_id == "run-9" and board.active[0].todos[0].open_gate_ids == ["G001"]
    h.run(g.ResolveGate(goal_id="g", gate_id="G001", decision="defer", rationale="next week"))
    _refused(h, g.CompleteTodo(goal_id="g", todo_id="T001", rationale="done"), ErrorCode.RULE_VIOLATION)
    h.run(g.ResolveGate(goal_id="g", gate_id="G001", decision="approve"))
    assert h.run(g.CompleteTodo(goal_id="g", todo_id="T001", rationale="done")).events


def test_a_gate_named_by_a_block_also_holds_the_todo(h: Harness) -> None:
    h.run(g.AddTodo(goal_id="g", title="migrate"))
    h.run(g.AddGate(goal_id="g", title="budget", gate_kind="controller"))
    h.run(g.BlockTodo(goal_id="g", todo_id="T001", reason="needs budget", gate_ids=["G001"]))
    _refused(h, g.ClaimTodo(goal_id="g", todo_id="T001", claimed_by="codex"), ErrorCode.RULE_VIOLATION)
    _refused(h, g.CompleteTodo(goal_id="g", todo_id="T001", rationale="x"), ErrorCode.RULE_VIOLATION)
    h.run(g.ResolveGate(goal_id="g", gate_id="G001", decision="reject", rationale="no budget"))
    h.run(g.ClaimTodo(goal_id="g", todo_id="T001", claimed_by="codex"))
    todo = h.ask(g.GetBoard(goal_id="g")).active[0].todos[0]
    assert (todo.status, todo.blocker_reason, todo.gate_ids) == ("claimed", None, [])


def test_blocking_on_an_unknown_gate_is_refused(h: Harness) -> None:
    h.run(g.AddTodo(goal_id="g", title="x"))
    error = _refused(h, g.BlockTodo(goal_id="g", todo_id="T001", reason="r", gate_ids=["G404"]), ErrorCode.NOT_FOUND)
    assert "G404" in error.message


def test_a_lease_held_by_another_claimer_is_refused_until_it_expires(h: Harness) -> None:
    h.run(g.AddTodo(goal_id="g", title="x"))
    h.run(g.ClaimTodo(goal_id="g", todo_id="T001", claimed_by="codex", lease_seconds=600))
    error = _refused(h, g.ClaimTodo(goal_id="g", todo_id="T001", claimed_by="claude"), ErrorCode.LEASE_HELD)
    assert "codex" in error.message and "2026-03-02T12:10:00Z" in error.message
    h.clock.advance(300)
    h.run(g.ClaimTodo(goal_id="g", todo_id="T001", claimed_by="codex", lease_seconds=600))  # renewed to 12:15
    h.clock.advance(400)  # 12:11:40: past the first lease, inside the renewed one
    _refused(h, g.ClaimTodo(goal_id="g", todo_id="T001", claimed_by="claude"), ErrorCode.LEASE_HELD)
    h.clock.advance(400)
    h.run(g.ClaimTodo(goal_id="g", todo_id="T001", claimed_by="claude"))
    assert h.ask(g.GetBoard(goal_id="g")).active[0].todos[0].claimed_by == "claude"


def test_a_completed_todo_is_closed(h: Harness) -> None:
    h.run(g.AddTodo(goal_id="g", title="x"))
    h.run(g.CompleteTodo(goal_id="g", todo_id="T001", rationale="done"))
    for command in (g.ClaimTodo(goal_id="g", todo_id="T001", claimed_by="codex"),
                    g.UpdateTodo(goal_id="g", todo_id="T001", title="y"),
                    g.BlockTodo(goal_id="g", todo_id="T001", reason="r"),
                    g.DeferTodo(goal_id="g", todo_id="T001", resume_when="later"),
                    g.CompleteTodo(goal_id="g", todo_id="T001", rationale="again"),
                    g.AddGate(goal_id="g", title="late gate", todo_id="T001")):
        assert "completed" in _refused(h, command, ErrorCode.INVALID_TRANSITION).message


def test_unknown_todos_and_gates_are_not_found(h: Harness) -> None:
    h.run(g.AddTodo(goal_id="g", title="x"))
    _refused(h, g.ClaimTodo(goal_id="g", todo_id="T404", claimed_by="codex"), ErrorCode.NOT_FOUND)
    _refused(h, g.ResolveGate(goal_id="g", gate_id="G404", decision="approve"), ErrorCode.NOT_FOUND)
    _refused(h, g.AttachEvidence(goal_id="g", target_kind="todo", target_id="T404", ref="x"), ErrorCode.NOT_FOUND)
    _refused(h, g.SpendQuota(goal_id="g", amount=1, unit="usd", todo_id="T404"), ErrorCode.NOT_FOUND)


def test_a_resolved_gate_cannot_be_resolved_again(h: Harness) -> None:
    h.run(g.AddGate(goal_id="g", title="approve"))
    h.run(g.ResolveGate(goal_id="g", gate_id="G001", decision="approve"))
    _refused(h, g.ResolveGate(goal_id="g", gate_id="G001", decision="reject"), ErrorCode.INVALID_TRANSITION)


def test_evidence_ids_are_stable(h: Harness) -> None:
    h.run(g.AddTodo(goal_id="g", title="x"))
    h.run(g.AttachEvidence(goal_id="g", target_kind="todo", target_id="T001", ref="ci#1", evidence_id="E-ci"))
    _refused(h, g.AttachEvidence(goal_id="g", target_kind="todo", target_id="T001", ref="ci#2", evidence_id="E-ci"),
             ErrorCode.RULE_VIOLATION)
    assert h.ask(g.GetBoard(goal_id="g")).active[0].todos[0].evidence_ids == ["E-ci"]


def test_an_update_must_change_something_and_refs_may_not_contradict_the_payload(h: Harness) -> None:
    h.run(g.AddTodo(goal_id="g", title="x"))
    _refused(h, g.UpdateTodo(goal_id="g", todo_id="T001"), ErrorCode.VALIDATION_FAILED)
    error = _refused(h, g.UpdateTodo(goal_id="g", todo_id="T001", title="y", refs={"todo_id": "T002"}),
                     ErrorCode.VALIDATION_FAILED)
    assert "refs.todo_id" in error.message
    _refused(h, g.UpdateTodo(goal_id="g", todo_id="T001", title="y", refs={"Bad-Key": "1"}), ErrorCode.VALIDATION_FAILED)


def test_runs_refreshes_quota_and_evidence_project_into_timelines_and_totals(h: Harness) -> None:
    h.run(g.AddTodo(goal_id="g", title="x"))
    for number in range(12):
        h.run(g.RecordRun(goal_id="g", run_id=f"run-{number}", status="succeeded", delivery_outcome="delivered"))
    h.run(g.RecordRefresh(goal_id="g", summary="progress noted"))
    h.run(g.SpendQuota(goal_id="g", amount=1.25, unit="usd"))
    h.run(g.SpendQuota(goal_id="g", amount=2.0, unit="usd"))
    h.run(g.SpendQuota(goal_id="g", amount=900, unit="tokens", category="review"))
    h.run(g.AttachEvidence(goal_id="g", target_kind="todo", target_id="T001", ref="pr#5", summary="diff"))
    board = h.ask(g.GetBoard(goal_id="g"))
    assert board.run_count == 12 and [r.run_id for r in board.runs] == [f"run-{n}" for n in range(2, 12)]
    assert [r.summary for r in board.refreshes] == ["progress noted"]
    assert [(q.unit, q.category, q.amount, q.entries) for q in board.quota] == [
        ("tokens", "review", 900.0, 1), ("usd", "compute", 3.25, 2)]
    assert [(e.evidence_id, e.ref) for e in board.evidence] == [("E001", "pr#5")]
    assert board.active[0].todos[0].evidence_ids == ["E001"]


def test_completed_todos_beyond_the_recent_window_become_archive_candidates(h: Harness) -> None:
    for number in range(1, 14):
        h.run(g.AddTodo(goal_id="g", title=f"task {number}"))
        h.run(g.CompleteTodo(goal_id="g", todo_id=f"T{number:03d}", rationale="done"))
    board = h.ask(g.GetBoard(goal_id="g"))
    assert [t.todo_id for t in board.completed][:2] == ["T013", "T012"] and len(board.completed) == 10
    # The default page stops after the completed tail and says what it left out.
    assert board.archive_candidates == [] and (board.page.after, board.page.completed_total) == (3, 13)
    rest = h.ask(g.GetBoard(goal_id="g", cursor=board.page.next_cursor))
    assert [t.todo_id for t in rest.archive_candidates] == ["T003", "T002", "T001"] and rest.page.next_cursor is None
    whole = h.ask(g.GetBoard(goal_id="g", limit=None))
    assert [t.todo_id for t in whole.archive_candidates] == ["T003", "T002", "T001"]
    # Archive candidates are compact: what the Markdown's archive section shows of them.
    assert whole.archive_candidates[0].rationale is None and whole.completed[0].rationale == "done"
    text = h.ask(g.PreviewMarkdown(goal_id="g")).text
    assert "## Archive candidates" in text
    assert h.ask(g.BridgeMarkdown(goal_id="g", markdown=text)).clean


def test_an_event_claiming_the_backfill_producer_must_carry_its_source_refs(h: Harness) -> None:
    with pytest.raises(LoopstateError) as refused:
        h.run(g.AddTodo(goal_id="g", title="imported by hand", producer="loopx.backfill"))
    assert refused.value.code is ErrorCode.VALIDATION_FAILED and "refs.source" in refused.value.message
    assert not h.stream_path("g").exists()
    event = h.run(g.AddTodo(goal_id="g", title="imported by a tool", producer="loopx.backfill",
                            refs={"source": "markdown:OLD_STATE.md", "source_line": "12"})).events[0]
    assert event["producer"] == "loopx.backfill" and event["refs"]["source"] == "markdown:OLD_STATE.md"
