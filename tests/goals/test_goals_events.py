"""The envelope, the fourteen payload types, ids and schema versions."""

from __future__ import annotations

import msgspec
import pytest
from goalkit import Harness

from loopstate_protocol import goals as g
from loopstate_protocol.errors import ErrorCode

from loopstate.core.errors import LoopstateError
from loopstate.core.stream import Stream
from loopstate.domains.goals import envelope
from loopstate.domains.goals import events as ev
from loopstate.domains.goals.domain import LAYOUT

SEED_TYPES = [
    "todo_added", "todo_claimed", "todo_updated", "todo_blocked", "todo_deferred", "todo_completed",
    "gate_added", "gate_resolved", "run_recorded", "refresh_recorded", "quota_spent", "evidence_attached",
    "projection_rendered", "snapshot_compacted",
]
SEED_ENVELOPE = {"schema_version", "event_id", "goal_id", "event_type", "recorded_at", "append_sequence",
                 "producer", "privacy", "projection_version", "refs", "payload"}
LOOPSTATE_ADDED = {"prev_hash", "event_hash", "request_id", "request_fingerprint"}


def _every_type(h: Harness) -> None:
    h.run(g.AddTodo(goal_id="g", title="a todo"))
    h.run(g.ClaimTodo(goal_id="g", todo_id="T001", claimed_by="codex"))
    h.run(g.UpdateTodo(goal_id="g", todo_id="T001", priority="P0"))
    h.run(g.AddGate(goal_id="g", title="approve", todo_id="T001", run_id="run-7"))
    h.run(g.BlockTodo(goal_id="g", todo_id="T001", reason="needs approval", gate_ids=["G001"]))
    h.run(g.ResolveGate(goal_id="g", gate_id="G001", decision="approve", resolved_by="alice"))
    h.run(g.DeferTodo(goal_id="g", todo_id="T001", resume_when="next sprint", until="2026-04-01T09:00:00+02:00"))
    h.run(g.RecordRun(goal_id="g", run_id="run-7", status="succeeded", classification="code", todo_id="T001"))
    h.run(g.RecordRefresh(goal_id="g", summary="state refreshed", refresh_kind="state_only"))
    h.run(g.SpendQuota(goal_id="g", amount=1.5, unit="usd", run_id="run-7"))
    h.run(g.AttachEvidence(goal_id="g", target_kind="run", target_id="run-7", ref="ci#12"))
    h.run(g.CompleteTodo(goal_id="g", todo_id="T001", rationale="shipped", evidence_ids=["E001"]))
    h.run(g.RenderMarkdown(goal_id="g"))
    h.run(g.Compact(goal_id="g"))


def test_the_fourteen_seed_event_types_are_exactly_the_supported_ones() -> None:
    assert list(ev.EVENT_TYPES) == list(ev.PAYLOADS) == SEED_TYPES


def test_every_event_carries_the_seed_envelope_plus_the_loopstate_chain_fields(h: Harness) -> None:
    _every_type(h)
    events = h.events("g")
    assert [e["event_type"] for e in events] == [
        "todo_added", "todo_claimed", "todo_updated", "gate_added", "todo_blocked", "gate_resolved",
        "todo_deferred", "run_recorded", "refresh_recorded", "quota_spent", "evidence_attached",
        "todo_completed", "projection_rendered", "snapshot_compacted",
    ]
    for number, event in enumerate(events, start=1):
        assert set(event) == SEED_ENVELOPE | LOOPSTATE_ADDED
        assert event["schema_version"] == "loopx_state_event_v0" and event["goal_id"] == "g"
        assert event["append_sequence"] == number and event["recorded_at"].endswith("Z")
        # Every stored payload is already in its normalized typed form.
        assert ev.normalize_payload(event["event_type"], event["payload"]) == event["payload"]
    deferred = next(e for e in events if e["event_type"] == "todo_deferred")
    assert deferred["payload"]["until"] == "2026-04-01T07:00:00Z"  # offsets are normalized to UTC
    assert next(e for e in events if e["event_type"] == "gate_added")["refs"] == {"gate_id": "G001", "todo_id": "T001", "run_id": "run-7"}


@pytest.mark.parametrize("event_type, payload, field", [
    ("todo_added", {"todo_id": "T1", "title": "x", "priority": "P9"}, "priority"),
    ("todo_added", {"todo_id": "T1", "title": "two\nlines"}, "title"),
    ("todo_added", {"todo_id": "T1", "title": "trailing space "}, "payload.title must be one line"),
    ("todo_added", {"todo_id": "-T1", "title": "x"}, "payload.todo_id must be an id"),
    ("todo_added", {"todo_id": "T1", "title": "x", "surprise": 1}, "surprise"),
    ("todo_claimed", {"todo_id": "T1"}, "claimed_by"),
    ("gate_added", {"gate_id": "G1", "gate_kind": "boss", "title": "x"}, "gate_kind"),
    ("gate_resolved", {"gate_id": "G1", "decision": "maybe"}, "decision"),
    ("quota_spent", {"amount": -1, "unit": "usd"}, "amount"),
    ("evidence_attached", {"evidence_id": "E1", "target_kind": "pr", "target_id": "1", "ref": "x"}, "target_kind"),
    ("projection_rendered", {"projection_kind": "markdown", "target": "x", "checksum": "md5:1",
                             "rendered_through_sequence": 1}, "checksum"),
    ("snapshot_compacted", {"through_append_sequence": -1, "source_event_count": 1,
                            "source_checksum": "sha256:" + "0" * 64, "state_checksum": "sha256:" + "0" * 64},
     "through_append_sequence"),
])
def test_payloads_are_validated_against_their_types(event_type: str, payload: dict, field: str) -> None:
    with pytest.raises(LoopstateError) as refused:
        ev.normalize_payload(event_type, payload)
    assert refused.value.code is ErrorCode.VALIDATION_FAILED
    assert event_type in refused.value.message and field in refused.value.message


def test_an_unknown_event_type_is_refused() -> None:
    with pytest.raises(LoopstateError) as refused:
        ev.normalize_payload("todo_deleted", {})
    assert refused.value.code is ErrorCode.VALIDATION_FAILED and "todo_added" in refused.value.message


@pytest.mark.parametrize("goal_id", ["", "-lead", "has.dot", "sp ace", "../up", "x" * 81, "ü"])
def test_goal_ids_are_validated(h: Harness, goal_id: str) -> None:
    with pytest.raises(LoopstateError) as refused:
        h.run(g.AddTodo(goal_id=goal_id, title="x"))
    assert refused.value.code is ErrorCode.INVALID_PARAMS and "goal" in refused.value.message.lower()


def test_commands_built_in_python_meet_the_wire_constraints(h: Harness) -> None:
    with pytest.raises(LoopstateError) as refused:
        h.run(g.ClaimTodo(goal_id="g", todo_id="T001", claimed_by="codex", lease_seconds=-5))
    assert refused.value.code is ErrorCode.INVALID_PARAMS and "lease_seconds" in refused.value.message


def test_wire_decoding_refuses_unknown_fields_and_names_the_tag() -> None:
    decoder = msgspec.json.Decoder(g.AddTodo | g.ClaimTodo)
    command = decoder.decode(b'{"kind":"goals.add","goal_id":"g","title":"x"}')
    assert isinstance(command, g.AddTodo)
    with pytest.raises(msgspec.ValidationError, match="titel"):
        decoder.decode(b'{"kind":"goals.add","goal_id":"g","titel":"x"}')


def test_schema_versions_classify_v0_ok_later_future_and_others_invalid() -> None:
    assert envelope.classify_schema("loopx_state_event_v0") == "ok"
    assert envelope.classify_schema("loopx_state_event_v3") == "future"
    for value in ("loopx_state_event_v01", "v0", 0, None, "loopx_state_event_v"):
        assert envelope.classify_schema(value) == "invalid"


@pytest.mark.jsonl_only("reads or edits the stream file")
def test_a_stream_written_by_a_newer_schema_is_refused_with_future_schema(h: Harness) -> None:
    h.run(g.AddTodo(goal_id="g", title="x"))
    stream = Stream(h.project.dir, "goals.g", LAYOUT)
    list(stream.read_new())
    newer = {**h.events("g")[0], "schema_version": "loopx_state_event_v1", "event_id": "e2"}
    stream.append([newer])
    with pytest.raises(LoopstateError) as refused:
        h.fresh().query(h.root, g.GetBoard(goal_id="g"))
    assert refused.value.code is ErrorCode.FUTURE_SCHEMA


def test_event_ids_derive_from_the_request_id_so_a_retry_repeats_the_first_result(h: Harness) -> None:
    first = h.run(g.AddTodo(goal_id="g", title="x"), "req-1")
    retry = h.run(g.AddTodo(goal_id="g", title="x"), "req-1")
    assert retry.replayed and retry.events == first.events
    other = h.run(g.AddTodo(goal_id="g", title="x"), "req-2")
    assert other.events[0]["event_id"] != first.events[0]["event_id"]
    with pytest.raises(LoopstateError) as reused:
        h.run(g.AddTodo(goal_id="g", title="y"), "req-1")
    assert reused.value.code is ErrorCode.REQUEST_ID_REUSED


def test_an_auto_assigned_todo_id_is_stable_across_an_event_id_repeat(h: Harness) -> None:
    h.run(g.AddTodo(goal_id="g", title="one", event_id="e-1"))
    h.run(g.AddTodo(goal_id="g", title="two"))
    assert h.run(g.AddTodo(goal_id="g", title="one", event_id="e-1")).events == []


def test_event_id_idempotency_compares_normalized_bodies(h: Harness) -> None:
    first = g.AddTodo(goal_id="g", title="same", event_id="e-norm", recorded_at="2026-03-02T13:00:00+01:00",
                      todo_id="T001")
    h.run(first)
    # The same event written another way: UTC form of the time, the default priority spelled out,
    # refs that only repeat what the payload names.
    same = g.AddTodo(goal_id="g", title="same", event_id="e-norm", recorded_at="2026-03-02T12:00:00Z",
                     todo_id="T001", priority="P2", role="agent", refs={"todo_id": "T001"})
    assert h.run(same).events == []
    assert h.events("g")[0]["recorded_at"] == "2026-03-02T12:00:00Z"
    with pytest.raises(LoopstateError) as conflict:
        h.run(g.AddTodo(goal_id="g", title="same", event_id="e-norm", todo_id="T001", priority="P1"))
    assert conflict.value.code is ErrorCode.EVENT_ID_CONFLICT
