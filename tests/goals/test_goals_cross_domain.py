"""Goals refer to runs: a run recorded in the goal, or a run of the runs domain in the same project."""

from __future__ import annotations

from pathlib import Path

import pytest

from loopstate_protocol import goals as g
from loopstate_protocol import runs as r
from loopstate_protocol.errors import ErrorCode

from loopstate.core.clock import FixedClock
from loopstate.core.errors import LoopstateError
from loopstate.core.ids import SequentialIds
from loopstate.service.engine import Service

pytestmark = pytest.mark.both_stores  # docs/storage.md, *Which tests run on PostgreSQL*

SCOPE = {"assets": ["demo"], "actions": ["local_write"], "destinations": ["repository"], "exclusions": []}


def _runs_domain_run(service: Service, root: str, ids: SequentialIds) -> str:
    grant_id, run_id = ids(), ids()
    service.execute(root, r.AuthorityGrant(
        grant_id=grant_id, level="bounded", actor="synthetic-user", scope=SCOPE, risks_shown=["Local files may change."],
        confirmation_text="CONFIRM", expires_at="2026-08-16T18:00:00Z"), "grant-1")
    service.execute(root, r.Create(
        run_id=run_id, asset={"name": "demo", "root": ".", "track": "code", "boundaries": ["repository-local files"]},
        objective="Produce one artifact.", done_gate=["The check passes."], authority_grant_id=grant_id,
        actor={"harness": "manual", "actor": "synthetic-user", "session_id": "terminal"}), "create-1")
    return run_id


def test_evidence_on_a_run_needs_a_run_of_the_goal_or_of_the_runs_domain(data_dir: Path, root: Path) -> None:
    ids = SequentialIds(prefix=7)
    service = Service(data_dir=data_dir, clock=FixedClock("2026-08-16T08:00:00Z"), new_id=ids)
    where = str(root)
    with pytest.raises(LoopstateError) as refused:
        service.execute(where, g.AttachEvidence(goal_id="g", target_kind="run", target_id="run-7", ref="ci#1"), "e0")
    assert refused.value.code is ErrorCode.NOT_FOUND and "loopstate goals run g run-7" in refused.value.message

    service.execute(where, g.RecordRun(goal_id="g", run_id="run-7", status="succeeded"), "run-7")
    service.execute(where, g.AttachEvidence(goal_id="g", target_kind="run", target_id="run-7", ref="ci#1"), "e1")

    run_id = _runs_domain_run(service, where, ids)
    service.execute(where, g.AttachEvidence(goal_id="g", target_kind="run", target_id=run_id, ref="ci#2"), "e2")
    # A gate may name the runs-domain run and hold a todo until it is resolved.
    service.execute(where, g.AddTodo(goal_id="g", title="ship the artifact"), "t1")
    service.execute(where, g.AddGate(goal_id="g", title="approve the run's output", gate_kind="controller",
                                     todo_id="T001", run_id=run_id), "g1")
    with pytest.raises(LoopstateError) as held:
        service.execute(where, g.CompleteTodo(goal_id="g", todo_id="T001", rationale="done"), "c1")
    assert held.value.code is ErrorCode.RULE_VIOLATION and "G001" in held.value.message
    service.execute(where, g.ResolveGate(goal_id="g", gate_id="G001", decision="approve"), "r1")
    service.execute(where, g.CompleteTodo(goal_id="g", todo_id="T001", rationale="done"), "c2")
    board = service.query(where, g.GetBoard(goal_id="g"))
    assert [(e.target_id, e.ref) for e in board.evidence] == [("run-7", "ci#1"), (run_id, "ci#2")]
    assert board.resolved_gates[0].run_id == run_id


def test_a_run_remembered_beyond_the_timeline_window_still_takes_evidence(data_dir: Path, root: Path) -> None:
    service = Service(data_dir=data_dir, clock=FixedClock("2026-08-16T08:00:00Z"))
    where = str(root)
    service.execute(where, g.RecordRun(goal_id="g", run_id="run-old", status="succeeded"), "old")
    for number in range(60):
        service.execute(where, g.RecordRun(goal_id="g", run_id=f"run-{number}", status="succeeded"), f"r{number}")
    service.execute(where, g.AttachEvidence(goal_id="g", target_kind="run", target_id="run-old", ref="ci#1"), "e")
    assert service.query(where, g.GetBoard(goal_id="g")).run_count == 61
