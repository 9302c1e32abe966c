"""The audit log: one chained stream per run, full projections, repaired projections, corruption."""

from __future__ import annotations

import json
import os

import pytest

from loopstate_protocol import runs as proto
from loopstate_protocol.errors import ErrorCode

from loopstate.core.chain import Position, seal
from loopstate.core.errors import LoopstateError
from loopstate.domains.runs import LAYOUT, classify_schema
from tests.runs.conftest import Harness, lease_args


def projection_files(h, run_id):
    return h.service.project(h.root).dir / "runs" / run_id


def stream_path(h, run_id):
    return h.service.project(h.root).dir / "streams" / f"runs.{run_id}.jsonl"


@pytest.mark.jsonl_only("edits the stream file")
def test_one_stream_per_run_with_sequence_plus_one_and_a_digest_chain(h):
    first, lease = h.leased()
    second = h.create()
    h.run(proto.StageStart(run_id=first, stage="build", **lease_args(lease)))
    names = h.service.project(h.root).stream_names()
    assert f"runs.{first}" in names and f"runs.{second}" in names
    events = h.events(first)
    assert [e["sequence"] for e in events] == list(range(1, len(events) + 1))
    assert events[0]["previous_event_digest"] is None
    for before, after in zip(events, events[1:]):
        assert after["previous_event_digest"] == before["event_digest"]


def test_loopstate_adds_request_id_and_fingerprint_to_every_event(h):
    run_id = h.create()
    for event in h.events(run_id):
        assert event["request_id"].startswith("req-") and len(event["request_fingerprint"]) == 64


def test_exact_retry_returns_the_first_result_and_a_changed_retry_is_refused(h):
    run_id = h.create()
    first = h.run(proto.Acquire(run_id=run_id, owner={"harness": "codex", "actor": "a", "session_id": "s"}), "acq")
    again = h.run(proto.Acquire(run_id=run_id, owner={"harness": "codex", "actor": "a", "session_id": "s"}), "acq")
    assert again.replayed and again.events == first.events
    with pytest.raises(LoopstateError) as info:
        h.run(proto.Acquire(run_id=run_id, owner={"harness": "codex", "actor": "b", "session_id": "s"}), "acq")
    assert info.value.code == ErrorCode.REQUEST_ID_REUSED


def test_run_and_lease_projections_are_written_from_the_log(h):
    run_id, lease = h.leased()
    folder = projection_files(h, run_id)
    assert json.loads((folder / "run.json").read_text()) == h.status(run_id).run
    assert json.loads((folder / "lease.json").read_text()) == lease
    assert json.loads((folder / "issues.json").read_text())["issues"] == []
    assert oct((folder / "run.json").stat().st_mode & 0o777) == "0o600"


def test_missing_projections_are_repaired_before_the_next_mutation(h):
    run_id, lease = h.leased()
    folder = projection_files(h, run_id)
    (folder / "run.json").unlink()
    (folder / "lease.json").unlink()
    h.clock.advance(1)
    h.run(proto.Heartbeat(run_id=run_id, **lease_args(lease)))  # coalesced: no event, but the boundary repairs
    assert json.loads((folder / "run.json").read_text()) == h.status(run_id).run
    assert json.loads((folder / "lease.json").read_text()) == h.status(run_id).lease


def test_a_stale_projection_is_never_trusted_over_the_log(h):
    run_id, lease = h.leased()
    folder = projection_files(h, run_id)
    forged = json.loads((folder / "run.json").read_text())
    forged["status"] = "complete"
    (folder / "run.json").write_text(json.dumps(forged))
    fresh = Harness(h.root, h.data_dir)
    fresh.clock.set("2026-08-16T08:00:01Z")
    assert fresh.status(run_id).run["status"] == "active"
    fresh.run(proto.StageStart(run_id=run_id, stage="build", **lease_args(lease)))
    assert json.loads((folder / "run.json").read_text())["status"] == "active"


@pytest.mark.jsonl_only("edits the stream file")
def test_a_corrupt_chain_is_preserved_and_blocks_mutation(h):
    run_id, lease = h.leased()
    path = stream_path(h, run_id)
    data = path.read_bytes()
    edited = data.replace(b'"objective":"Produce one synthetic artifact."', b'"objective":"Produce two synthetic artifacts"', 1)
    assert edited != data
    fd = os.open(path, os.O_WRONLY | os.O_TRUNC)
    os.write(fd, edited)
    os.close(fd)
    fresh = Harness(h.root, h.data_dir)
    with pytest.raises(LoopstateError) as info:
        fresh.run(proto.StageStart(run_id=run_id, stage="build", **lease_args(lease)))
    assert info.value.code == ErrorCode.CORRUPT_LEDGER
    assert path.read_bytes() == edited  # preserved as found
    h.schema_sweep = False  # the stream is deliberately broken


def _append_raw(h, run_id, event):
    """Append a well-chained event that loopstate's rules would never write."""
    path = stream_path(h, run_id)
    last = json.loads(path.read_bytes().splitlines()[-1])
    _, line = seal(event, LAYOUT, Position(0, last["sequence"], last["event_digest"]))
    with open(path, "ab") as handle:
        handle.write(line)


@pytest.mark.jsonl_only("edits the stream file")
def test_projection_continuity_break_blocks_mutation(h):
    run_id, lease = h.leased()
    forged = dict(h.events(run_id)[-1])
    forged["projection"] = json.loads(json.dumps(forged["projection"]))
    forged["projection"]["run"]["budgets"]["max_mutations"] = 10_000
    forged["type"] = "heartbeat"
    forged["data"] = {"stage": "strategize", "status": "active"}
    _append_raw(h, run_id, {k: v for k, v in forged.items() if k not in ("sequence", "previous_event_digest", "event_digest")})
    fresh = Harness(h.root, h.data_dir)
    with pytest.raises(LoopstateError) as info:
        fresh.run(proto.StageStart(run_id=run_id, stage="build", **lease_args(lease)))
    assert info.value.code == ErrorCode.CORRUPT_LEDGER and "frozen budgets" in info.value.message


def test_schema_versions_one_point_x_are_read_and_a_higher_major_is_future():
    assert classify_schema("1.0") == "ok"
    assert classify_schema("1.7") == "ok"
    assert classify_schema("2.0") == "future"
    for bad in ("1", "1.0.0", "01.0", "v1.0", 1, None, "1.x"):
        assert classify_schema(bad) == "invalid"


@pytest.mark.jsonl_only("edits the stream file")
def test_a_future_major_schema_event_makes_the_run_read_only(h):
    run_id = h.create()
    future = dict(h.events(run_id)[-1])
    future["schema_version"] = "2.0"
    _append_raw(h, run_id, {k: v for k, v in future.items() if k not in ("sequence", "previous_event_digest", "event_digest")})
    fresh = Harness(h.root, h.data_dir)
    with pytest.raises(LoopstateError) as info:
        fresh.status(run_id)
    assert info.value.code == ErrorCode.FUTURE_SCHEMA
    h.schema_sweep = False


def test_status_view_is_keyed_by_run_id(h):
    run_id, lease = h.leased()
    folded, view = h.service.view(h.root, "runs", "status", run_id)
    assert view.run_id == run_id and view.lease == lease and view.sequence == 3
    with pytest.raises(LoopstateError):
        h.service.view(h.root, "runs", "status", None)


def test_evidence_and_grant_projections_follow_the_seeds_layout(h):
    run_id, lease = h.leased()
    evidence = {"stage": "test", "requirement_ids": ["R1"], "type": "manual", "description": "looked",
                "procedure": ["look"], "outcome": "passed", "artifact_refs": [], "manual_observation": "fine",
                "digest": None, "environment": {}}
    evidence_id = h.run(proto.EvidenceAdd(run_id=run_id, evidence=evidence, **lease_args(lease))).events[0]["data"]["evidence_id"]
    path = projection_files(h, run_id) / "evidence" / f"{evidence_id}.json"
    assert json.loads(path.read_text())["evidence_id"] == evidence_id
    path.unlink()
    h.run(proto.Heartbeat(run_id=run_id, **lease_args(lease)))
    assert path.exists()
    grant_id = h.status(run_id).run["authority_grant_id"]
    grant = h.service.project(h.root).dir / "grants" / f"{grant_id}.json"
    assert json.loads(grant.read_text())["grant_id"] == grant_id


def _forged_copy_of_last(h, run_id, **changes):
    last = json.loads(json.dumps(h.events(run_id)[-1]))
    event = {k: v for k, v in last.items() if k not in ("sequence", "previous_event_digest", "event_digest")}
    for key, value in changes.items():
        event[key] = value
    return event


@pytest.mark.jsonl_only("edits the stream file")
@pytest.mark.parametrize("forgery", ["interleaved", "envelope", "owner", "backwards", "second_run_created", "authority"])
def test_each_projection_continuity_rule_blocks_mutation(h, forgery):
    h.record_sweep = False  # the forged event breaks the very rules loopstate's validator checks
    run_id, lease = h.leased()
    if forgery == "interleaved":
        h.run(proto.Intend(run_id=run_id, completion_event_type="stage_started", completion_data={"stage": "build"},
                           action="local_write", destination="repository", **lease_args(lease)))
        event = _forged_copy_of_last(h, run_id, type="heartbeat", data={"stage": "build", "status": "active"})
        event["projection"]["pending_operation"] = None
    elif forgery == "envelope":
        event = _forged_copy_of_last(h, run_id, lease_generation=7)
    elif forgery == "owner":
        event = _forged_copy_of_last(h, run_id)
        event["projection"]["run"]["owner"] = {"harness": "manual", "actor": "intruder", "session_id": "x"}
    elif forgery == "backwards":
        event = _forged_copy_of_last(h, run_id, at="2026-08-16T07:59:59Z")
    elif forgery == "second_run_created":
        event = _forged_copy_of_last(h, run_id, type="run_created", data={"objective": "again"})
    else:
        event = _forged_copy_of_last(h, run_id)
        event["projection"]["run"]["authority_grant_id"] = "00000000-0000-4000-8000-00000000beef"
    _append_raw(h, run_id, event)
    fresh = Harness(h.root, h.data_dir)
    fresh.clock.set("2026-08-16T08:00:30Z")
    with pytest.raises(LoopstateError) as info:
        fresh.run(proto.Sync(run_id=run_id))
    assert info.value.code == ErrorCode.CORRUPT_LEDGER
