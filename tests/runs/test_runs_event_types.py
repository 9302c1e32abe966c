"""Every event type the seed lists is written by some command, and each validates against the seed's schema."""

from __future__ import annotations

import json

import pytest

from loopstate_protocol import runs as proto
from loopstate_protocol.errors import ErrorCode

from loopstate.core.chain import Position, seal
from loopstate.core.errors import LoopstateError
from loopstate.domains.runs import LAYOUT
from tests.runs.conftest import AGENT, USER, Harness, lease_args
from tests.runs.schemas import THE_LOOP, schema_errors
from tests.conftest import needs_conformance

COMPAT_EVENT_TYPES = {
    "run_created", "authority_granted", "authority_revoked", "lease_acquired", "lease_renewed", "route_selected",
    "stage_started", "heartbeat", "evidence_recorded", "issue_opened", "issue_transitioned", "stage_completed",
    "operation_intended", "operation_reconciled", "budget_reached", "kill_switch_detected", "recovery_started",
    "run_completed", "run_failed", "run_cancelled",
}
EVIDENCE = {"stage": "test", "requirement_ids": ["R1"], "type": "manual", "description": "looked", "procedure": ["look"],
            "outcome": "passed", "artifact_refs": [], "manual_observation": "fine", "digest": None, "environment": {}}


@needs_conformance
def test_every_seed_event_type_is_written_and_valid(h, root):
    grant_id = h.grant()
    run_id, lease = h.leased(grant_id=grant_id, budgets={"max_duration_seconds": 7200, "max_stage_attempts": 3,
                                                         "max_mutations": 2, "max_external_actions": 0, "max_cost_usd": None})
    held = lease_args(lease)
    h.clock.advance(130)
    h.run(proto.Heartbeat(run_id=run_id, **held))
    route = json.loads((THE_LOOP / "fixtures/valid/route.json").read_text())
    h.run(proto.RouteSelect(run_id=run_id, route=route, **held))
    h.run(proto.StageStart(run_id=run_id, stage="build", **held))
    h.run(proto.StageComplete(run_id=run_id, stage="build", outcome="passed", **held))
    h.run(proto.EvidenceAdd(run_id=run_id, evidence=EVIDENCE, **held))
    issue_id = h.run(proto.IssueOpen(run_id=run_id, title="t", severity="low", blocking=False, **held)).events[0]["data"]["issue_id"]
    h.run(proto.IssueUpdate(run_id=run_id, issue_id=issue_id, status="closed", resolution="done", **held))
    h.run(proto.Transition(run_id=run_id, to="blocked", reason="stuck", **held))
    h.run(proto.Resume(run_id=run_id, owner=AGENT, reason="unstuck", **held))
    held = lease_args(h.status(run_id).lease)
    op = h.run(proto.Intend(run_id=run_id, completion_event_type="stage_started", completion_data={"stage": "test"},
                            action="local_write", destination="repository", **held)).events[0]["data"]["operation_id"]
    h.run(proto.Reconcile(run_id=run_id, operation_id=op, outcome="unknown", actor=AGENT, **held))
    h.run(proto.Resume(run_id=run_id, owner=AGENT, reason="again", **held))
    held = lease_args(h.status(run_id).lease)
    op = h.run(proto.Intend(run_id=run_id, completion_event_type="stage_started", completion_data={"stage": "test"},
                            action="local_write", destination="repository", **held)).events[0]["data"]["operation_id"]
    h.run(proto.Complete(run_id=run_id, operation_id=op, completion_event_type="stage_started",
                         completion_data={"stage": "test"}, **held))  # mutations reach 2: failed + budget_reached
    other, other_lease = h.leased(grant_id=grant_id)
    (root / ".loopstate").mkdir()
    (root / ".loopstate" / "STOP").touch()
    h.run(proto.Sync(run_id=other))
    (root / ".loopstate" / "STOP").unlink()
    h.run(proto.Stop(run_id=other, actor=USER, cancel=True))
    third, third_lease = h.leased(grant_id=grant_id)
    h.run(proto.Transition(run_id=third, to="complete", reason="done", **lease_args(third_lease)))
    fourth = h.create(grant_id)
    fifth, fifth_lease = h.leased(grant_id=grant_id)
    h.run(proto.Transition(run_id=fifth, to="failed", reason="gave up", **lease_args(fifth_lease)))
    h.run(proto.AuthorityRevoke(grant_id=grant_id, revoked_by="synthetic-user"))
    written = set()
    for run in (run_id, other, third, fourth, fifth):
        for event in h.events(run):
            written.add(event["type"])
            assert not schema_errors("audit_event", event), (event["type"], schema_errors("audit_event", event))
    assert written == COMPAT_EVENT_TYPES


@pytest.mark.jsonl_only("edits the stream file")
def test_an_unparsable_event_time_halts_mutation(h):
    run_id, lease = h.leased()
    path = h.service.project(h.root).dir / "streams" / f"runs.{run_id}.jsonl"
    last = json.loads(path.read_bytes().splitlines()[-1])
    forged = {k: v for k, v in last.items() if k not in ("sequence", "previous_event_digest", "event_digest")}
    forged["type"], forged["data"], forged["at"] = "heartbeat", {"stage": "strategize", "status": "active"}, "2026-13-45T99:00:00Z"
    _, line = seal(forged, LAYOUT, Position(0, last["sequence"], last["event_digest"]))
    with open(path, "ab") as handle:
        handle.write(line)
    fresh = Harness(h.root, h.data_dir)
    with pytest.raises(LoopstateError) as info:
        fresh.run(proto.Heartbeat(run_id=run_id, **lease_args(lease)))
    assert info.value.code == ErrorCode.CORRUPT_LEDGER and "unparsable time" in info.value.message
    h.schema_sweep = False
