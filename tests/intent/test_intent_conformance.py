"""Every intent event type validates against seed 000's upstream ledger-event schema."""

from __future__ import annotations

import copy

import pytest

from intentkit import Intent, LOOPSTATE_ADDED, ledger_events, schema_errors, user_claim
from loopstate.core import canonical
from loopstate.core.chain import Position, seal
from loopstate.core.errors import LoopstateError
from loopstate.domains.intent import LAYOUT
from loopstate.domains.intent.records import EVENT_TYPES
from loopstate_protocol import intent as p
from loopstate_protocol.errors import ErrorCode
from tests.conftest import needs_conformance


def every_event_type(it: Intent) -> str:
    task = it.start(user_claim("Keep the API stable", "hard_constraint"))
    it.run(p.IntentModeSet(task_id=task, mode="off"))
    it.run(p.IntentModeSet(task_id=task, mode="on"))
    it.run(p.IntentSourceObserve(task_id=task, actor="user", source=p.SourceInput(kind="user_event", event_id="h-1", via_hook=True)))
    it.run(p.IntentCandidateAdd(task_id=task, statement="likes small diffs", facets=["soft_constraint"]))
    a = it.add(task, "Use tabs")
    b = it.replace(task, [a], "Use spaces")
    it.run(p.IntentClaimInvalidate(task_id=task, claim_id=b, reason="no preference after all"))
    it.run(p.IntentCompactionObserve(task_id=task, trigger="manual"))
    it.run(p.IntentResultSignal(task_id=task, signal="success", note="all tests pass"))
    it.run(p.IntentImport(graph=it.ask(p.IntentExport(task_id=task))))
    it.start()
    it.run(p.IntentTaskResume(task_id=task))  # loopstate's own event type: the current task, back to the first
    return task


@needs_conformance
def test_every_event_type_is_written_and_conforms(it: Intent, data_dir):
    every_event_type(it)
    events = ledger_events(data_dir)
    assert {e["event_type"] for e in events} == set(EVENT_TYPES)
    for event in events:
        assert schema_errors(event) == [], event["event_type"]
        # loopstate's own fields are present (batch only on a command's several events), and only they are removed
        assert set(LOOPSTATE_ADDED) - {"batch"} <= set(event)
        assert event["request_id"] and len(event["request_fingerprint"]) == 64


@needs_conformance
def test_the_schema_check_catches_a_bad_event(it: Intent, data_dir):
    every_event_type(it)
    event = ledger_events(data_dir)[0]
    for broken in (
        {**event, "extra": 1},
        {**event, "actor": "robot"},
        {**event, "event_type": "claim_purged"},
        {**event, "project_id": "short"},
        {k: v for k, v in event.items() if k != "request_id"},
    ):
        assert schema_errors(broken), broken


@pytest.mark.jsonl_only("edits the stream file")
def test_a_future_schema_version_is_refused_on_read(it: Intent, svc, root, data_dir):
    task = it.start()
    project = svc.project(str(root))
    path = project.dir / "streams" / "intent.jsonl"
    (first,) = ledger_events(data_dir)
    future = copy.deepcopy(first)
    future["schema_version"] = 2
    future["event_id"] = "00000000-0000-4000-8000-0000000000aa"
    event, line = seal({k: v for k, v in future.items() if k not in ("sequence", "prev_hash", "event_hash")}, LAYOUT,
                       Position(path.stat().st_size, 1, first["event_hash"]))
    with open(path, "ab") as handle:
        handle.write(line)
    from intentkit import Intent as Fresh
    from loopstate.core.ids import SequentialIds
    from loopstate.domains.intent import DOMAIN
    from loopstate.service import Service

    fresh = Fresh(Service(data_dir=data_dir, new_id=SequentialIds(3), domains=[DOMAIN]), root)
    with pytest.raises(LoopstateError) as err:
        fresh.snapshot(task)
    assert err.value.code == ErrorCode.FUTURE_SCHEMA
    path.write_bytes(canonical.encode(first) + b"\n")  # leave a valid ledger for the conformance check
