"""Frozen budgets: reservation refusals, exhaustion, the stable marker sequence and its repair."""

from __future__ import annotations

import json
import os

import pytest

from loopstate_protocol import runs as proto
from loopstate_protocol.errors import ErrorCode

from loopstate.core import canonical
from loopstate.core.chain import BATCH, Position, seal
from loopstate.core.errors import LoopstateError
from loopstate.domains.runs import LAYOUT, budgets
from tests.runs.conftest import AGENT, USER, lease_args, write_json
from tests.runs.schemas import THE_LOOP
from tests.conftest import needs_conformance

pytestmark = pytest.mark.both_stores  # docs/storage.md, *Which tests run on PostgreSQL*

LOCAL = {"action": "local_write", "destination": "repository"}


def limits(**overrides) -> dict:
    return {"max_duration_seconds": 7200, "max_stage_attempts": 3, "max_mutations": 100, "max_external_actions": 0,
            "max_cost_usd": None, **overrides}


def refused(h, command, code: ErrorCode) -> LoopstateError:
    with pytest.raises(LoopstateError) as info:
        h.run(command)
    assert info.value.code == code, info.value
    return info.value


def intend(h, run_id, lease, stage="build", cost="0") -> dict:
    return h.run(proto.Intend(run_id=run_id, completion_event_type="stage_started", completion_data={"stage": stage},
                              **LOCAL, cost_usd=cost, **lease_args(lease))).events[0]["data"]


def complete(h, run_id, lease, pending):
    return h.run(proto.Complete(run_id=run_id, operation_id=pending["operation_id"],
                                completion_event_type=pending["completion_event_type"],
                                completion_data=pending["completion_data"], **lease_args(lease))).events


def test_frozen_budgets_are_copied_into_the_run_and_never_change(h):
    run_id, lease = h.leased(budgets=limits(max_mutations=7))
    h.run(proto.StageStart(run_id=run_id, stage="build", **lease_args(lease)))
    assert {e["projection"]["run"]["budgets"]["max_mutations"] for e in h.events(run_id)} == {7}


def test_cost_adds_as_exact_decimals(h):
    run_id, lease = h.leased(budgets=limits(max_cost_usd="1"))
    complete(h, run_id, lease, intend(h, run_id, lease, "build", "0.1"))
    complete(h, run_id, lease, intend(h, run_id, lease, "build", "0.2"))  # a retry of the open stage
    assert h.status(run_id).run["usage"]["cost_usd"] == "0.3"


def test_a_declared_stage_start_keeps_one_stage_open_at_a_time(h):
    """`run intend --type stage_started` meets the rule `run stage start` does, before anything is reserved."""
    run_id, lease = h.leased(budgets=limits(max_cost_usd="1"))
    complete(h, run_id, lease, intend(h, run_id, lease, "build", "0.1"))
    before = len(h.events(run_id))
    error = refused(h, proto.Intend(run_id=run_id, completion_event_type="stage_started", completion_data={"stage": "test"},
                                    **LOCAL, cost_usd="0.2", **lease_args(lease)), ErrorCode.INVALID_TRANSITION)
    assert error.details == {"open_stage": "build", "stage": "test"}
    assert "complete it first" in error.message
    assert len(h.events(run_id)) == before
    assert h.status(run_id).run["usage"]["cost_usd"] == "0.1"


def test_cost_with_an_exponent_is_refused(h):
    run_id, lease = h.leased(budgets=limits(max_cost_usd="1"))
    error = refused(h, proto.Intend(run_id=run_id, completion_event_type="stage_started", completion_data={"stage": "build"},
                                    **LOCAL, cost_usd="1e-3", **lease_args(lease)), ErrorCode.VALIDATION_FAILED)
    assert error.details == {"field": "cost_usd", "rule": "money"}
    with pytest.raises(LoopstateError) as info:
        h.create(budgets=limits(max_cost_usd="1e-3"))
    assert info.value.details["rule"] == "money"


def test_null_cost_limit_means_no_spending_authority_not_unlimited(h):
    run_id, lease = h.leased()
    error = refused(h, proto.Intend(run_id=run_id, completion_event_type="stage_started", completion_data={"stage": "build"},
                                    **LOCAL, cost_usd="0.000001", **lease_args(lease)), ErrorCode.BUDGET_EXHAUSTED)
    assert "no spending authority" in error.message
    assert intend(h, run_id, lease, cost="0")["reservation"]["cost_usd"] == "0"
    assert h.status(run_id).run["usage"]["cost_usd"] is None  # unmeasured cost is not zero


def test_reservation_past_a_limit_is_refused_before_anything_is_written(h):
    run_id, lease = h.leased(budgets=limits(max_mutations=1, max_cost_usd="0.5"))
    refused(h, proto.Intend(run_id=run_id, completion_event_type="stage_started", completion_data={"stage": "build"},
                            **LOCAL, cost_usd="0.500001", **lease_args(lease)), ErrorCode.BUDGET_EXHAUSTED)
    assert len(h.events(run_id)) == 3


def test_reaching_a_limit_exactly_fails_the_run_on_the_completion_then_writes_its_marker(h):
    run_id, lease = h.leased(budgets=limits(max_mutations=1))
    pending = intend(h, run_id, lease)
    assert h.status(run_id).run["status"] == "active"
    events = complete(h, run_id, lease, pending)
    assert [e["type"] for e in events] == ["stage_started", "budget_reached"]
    run = events[0]["projection"]["run"]
    assert run["status"] == "failed" and run["terminal_reason"]["code"] == "budget_reached:max_mutations"
    assert events[1]["data"] == {"budget": "max_mutations", "stage": None, "limit": 1, "observed": 1}
    assert events[1]["projection"] == events[0]["projection"] and events[1]["at"] == events[0]["at"]
    assert (events[1]["lease_id"], events[1]["lease_generation"]) == (events[0]["lease_id"], events[0]["lease_generation"])


SIMULTANEOUS = limits(max_duration_seconds=60, max_stage_attempts=1, max_mutations=1, max_cost_usd="0.5")


def _exhaust_everything(h):
    run_id, lease = h.leased(budgets=SIMULTANEOUS)
    pending = intend(h, run_id, lease, "build", "0.5")
    h.clock.advance(60)
    return run_id, lease, pending


EXPECTED_MARKERS = [
    {"budget": "max_duration_seconds", "stage": None, "limit": 60, "observed": 60},
    {"budget": "max_stage_attempts", "stage": "build", "limit": 1, "observed": 1},
    {"budget": "max_mutations", "stage": None, "limit": 1, "observed": 1},
    {"budget": "max_cost_usd", "stage": None, "limit": "0.5", "observed": "0.5"},
]


def test_simultaneous_exhaustion_writes_every_marker_in_the_stable_order(h):
    run_id, lease, pending = _exhaust_everything(h)
    events = complete(h, run_id, lease, pending)
    assert [e["type"] for e in events] == ["stage_started"] + ["budget_reached"] * 4
    assert [e["data"] for e in events[1:]] == EXPECTED_MARKERS
    assert events[0]["projection"]["run"]["terminal_reason"]["code"] == "budget_reached:max_duration_seconds"


def test_stage_attempt_markers_follow_canonical_stage_order():
    usage = budgets.empty_usage()
    usage["stage_attempts"].update({"close": 2, "strategize": 2, "test": 2})
    keys = budgets.exhausted_keys(limits(max_stage_attempts=2), usage)
    assert keys == [("max_stage_attempts", "strategize"), ("max_stage_attempts", "test"), ("max_stage_attempts", "close")]


def _cut_after(h, run_id, keep_events: int, partial_bytes: int) -> None:
    """Simulate a crash mid-append in a store written before batches were marked (each
    event then stands alone, so a crash could keep part of a command's events): the
    events re-sealed without their batch markers, the first kept whole plus a torn
    piece of the next line. (With markers, the whole short batch is a torn tail:
    tests/core/test_core_batches.py.)"""
    path = h.service.project(h.root).dir / "streams" / f"runs.{run_id}.jsonl"
    at, lines = Position(), []
    for line in path.read_bytes().splitlines():
        event, sealed = seal({k: v for k, v in canonical.decode(line).items() if k != BATCH}, LAYOUT, at)
        at = Position(at.offset + len(sealed), event[LAYOUT.sequence_field], event[LAYOUT.hash_field])
        lines.append(sealed)
    data = b"".join(lines[:keep_events]) + lines[keep_events][:partial_bytes]
    fd = os.open(path, os.O_WRONLY | os.O_TRUNC)
    os.write(fd, data)
    os.close(fd)


@pytest.mark.jsonl_only("cuts the stream file to fake a crash")
def test_crash_in_the_middle_of_the_marker_sequence_is_repaired_without_replaying(h, data_dir):
    from tests.runs.conftest import Harness

    run_id, lease, pending = _exhaust_everything(h)
    complete(h, run_id, lease, pending)
    # The source event and two markers reached the disk; the third was torn.
    _cut_after(h, run_id, keep_events=4 + 1 + 2, partial_bytes=40)
    fresh = Harness(h.root, data_dir)  # a new process's view of the store
    fresh.clock.set("2026-08-16T08:10:00Z")
    assert fresh.status(run_id).missing_markers == 2
    events = fresh.run(proto.Sync(run_id=run_id)).events
    assert [e["data"] for e in events] == EXPECTED_MARKERS[2:]
    assert all(e["at"] == "2026-08-16T08:01:00Z" for e in events)  # the source's timestamp
    types = [e["type"] for e in fresh.events(run_id)]
    assert types.count("stage_started") == 1 and types.count("budget_reached") == 4
    assert fresh.status(run_id).missing_markers == 0


@pytest.mark.jsonl_only("cuts the stream file to fake a crash")
def test_every_exclusive_command_repairs_the_missing_suffix_before_its_own_work(h, data_dir):
    from tests.runs.conftest import Harness

    run_id, lease, pending = _exhaust_everything(h)
    complete(h, run_id, lease, pending)
    _cut_after(h, run_id, keep_events=4 + 1, partial_bytes=10)  # the source only
    fresh = Harness(h.root, data_dir)
    fresh.clock.set("2026-08-16T08:10:00Z")
    with pytest.raises(LoopstateError) as info:
        fresh.run(proto.Resume(run_id=run_id, owner=AGENT, reason="again", **lease_args(lease)))
    assert info.value.code == ErrorCode.BUDGET_EXHAUSTED
    assert [e["data"] for e in info.value.details["events"]] == EXPECTED_MARKERS
    assert [e["type"] for e in fresh.events(run_id)][-4:] == ["budget_reached"] * 4


def test_unknown_reconciliation_that_exhausts_budgets_keeps_unknown_truth_and_writes_markers(h):
    run_id, lease = h.leased(budgets=limits(max_mutations=1))
    pending = intend(h, run_id, lease)
    h.clock.advance(301)
    events = h.run(proto.Reconcile(run_id=run_id, operation_id=pending["operation_id"], outcome="unknown", actor=USER)).events
    assert [e["type"] for e in events] == ["operation_reconciled", "budget_reached"]
    assert events[0]["projection"]["run"]["terminal_reason"]["code"] == "operation_outcome_unknown"
    assert events[1]["projection"] == events[0]["projection"]


def test_exhausted_usage_blocks_recovery(h):
    run_id, lease = h.leased(budgets=limits(max_mutations=1))
    complete(h, run_id, lease, intend(h, run_id, lease))
    error = refused(h, proto.Resume(run_id=run_id, owner=AGENT, reason="more", **lease_args(lease)), ErrorCode.BUDGET_EXHAUSTED)
    assert "max_mutations" in error.message


def test_duration_exhaustion_found_at_a_heartbeat_fails_the_run_with_its_marker(h):
    run_id, lease = h.leased(budgets=limits(max_duration_seconds=100))
    h.clock.advance(100)
    error = refused(h, proto.Heartbeat(run_id=run_id, **lease_args(lease)), ErrorCode.BUDGET_EXHAUSTED)
    assert [e["type"] for e in error.details["events"]] == ["run_failed", "budget_reached"]
    run = h.status(run_id).run
    assert run["status"] == "failed" and run["terminal_reason"]["code"] == "budget_reached:max_duration_seconds"


def test_direct_stage_start_counts_attempts_and_the_last_allowed_attempt_fails_the_run(h):
    run_id, lease = h.leased(budgets=limits(max_stage_attempts=2))
    assert h.types(proto.StageStart(run_id=run_id, stage="build", **lease_args(lease))) == ["stage_started"]
    events = h.run(proto.StageStart(run_id=run_id, stage="build", **lease_args(lease))).events
    assert [e["type"] for e in events] == ["stage_started", "budget_reached"]
    assert events[1]["data"] == {"budget": "max_stage_attempts", "stage": "build", "limit": 2, "observed": 2}


def test_internal_records_do_not_consume_the_mutation_budget(h):
    run_id, lease = h.leased(budgets=limits(max_mutations=1))
    h.run(proto.IssueOpen(run_id=run_id, title="t", severity="low", blocking=False, **lease_args(lease)))
    h.run(proto.StageStart(run_id=run_id, stage="build", **lease_args(lease)))
    assert h.status(run_id).run["usage"]["mutations"] == 0


@needs_conformance
def test_budgets_a_command_leaves_out_come_from_the_project_config(h, root):
    config = json.loads((THE_LOOP / "fixtures/valid/config.json").read_text())
    config["budgets"]["max_mutations"] = 9
    write_json(root / ".loopstate" / "config.json", config)
    run_id = h.create(budgets={"max_cost_usd": "2.5"})
    assert h.status(run_id).run["budgets"] == {
        "max_duration_seconds": 7200, "max_stage_attempts": 3, "max_mutations": 9, "max_external_actions": 0,
        "max_cost_usd": "2.5",
    }


def test_lease_expiry_that_also_reaches_the_duration_budget_fails_with_the_budget_and_its_marker_at_once(h):
    run_id, lease = h.leased(budgets=limits(max_duration_seconds=300))  # lease_seconds is 300 too
    h.clock.advance(400)
    error = refused(h, proto.Heartbeat(run_id=run_id, **lease_args(lease)), ErrorCode.BUDGET_EXHAUSTED)
    assert [e["type"] for e in error.details["events"]] == ["run_failed", "budget_reached"]
    failed, marker = error.details["events"]
    assert failed["data"] == {"reason": "budget_reached:max_duration_seconds"}
    assert marker["data"] == {"budget": "max_duration_seconds", "stage": None, "limit": 300, "observed": 300}
    status = h.status(run_id)
    assert status.missing_markers == 0 and status.run["usage"]["duration_seconds"] == 300


def test_lease_expiry_below_the_duration_budget_fails_with_lease_expired_and_no_marker(h):
    run_id, lease = h.leased(budgets=limits(max_duration_seconds=301))
    h.clock.advance(400)
    error = refused(h, proto.Heartbeat(run_id=run_id, **lease_args(lease)), ErrorCode.LEASE_EXPIRED)
    assert [e["type"] for e in error.details["events"]] == ["run_failed"]
    assert error.details["events"][0]["data"] == {"reason": "lease_expired"}
