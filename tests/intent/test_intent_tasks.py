"""Tasks: starts with initial claims, derived ids, modes, and project-scoped reads."""

from __future__ import annotations

import json
import shutil
import uuid

import msgspec
import pytest

from intentkit import Intent, ledger_events, user_claim
from loopstate.core.errors import LoopstateError
from loopstate_protocol import intent as p
from loopstate_protocol.errors import ErrorCode

pytestmark = pytest.mark.both_stores  # docs/storage.md, *Which tests run on PostgreSQL*


def test_start_with_initial_claims_gets_server_created_ids(it: Intent, data_dir):
    outcome = it.run(p.IntentTaskStart(label="refactor", initial_claims=[
        user_claim("Keep the public API stable", "hard_constraint"),
        user_claim("Tests pass on CI", "success_signal"),
    ]))
    (event,) = outcome.events
    assert event["event_type"] == "task_started"
    claims = event["payload"]["initial_claims"]
    assert len({c["claim_id"] for c in claims}) == 2
    assert all(uuid.UUID(c["claim_id"]) for c in claims)
    assert claims[0]["source_ref"]["kind"] == "user_event" and claims[0]["source_ref"]["event_id"]
    assert event["payload"]["source_ref"] == claims[0]["source_ref"]
    assert len(it.active_ids(event["task_id"])) == 2


def test_start_without_task_id_derives_the_same_id_on_exact_retry(it: Intent):
    command = p.IntentTaskStart(label="x")
    first = it.run(command, "start-1")
    again = it.run(command, "start-1")
    assert again.replayed and again.events[0]["task_id"] == first.events[0]["task_id"]
    assert uuid.UUID(first.events[0]["task_id"]).version == 5
    other = it.run(p.IntentTaskStart(label="x"), "start-2")
    assert other.events[0]["task_id"] != first.events[0]["task_id"]


def test_start_with_an_existing_task_id_is_a_conflict(it: Intent):
    task = it.start()
    with pytest.raises(LoopstateError) as err:
        it.run(p.IntentTaskStart(task_id=task))
    assert err.value.code == ErrorCode.CONFLICT


def test_changed_retry_of_a_start_is_refused_as_request_id_reuse(it: Intent):
    it.run(p.IntentTaskStart(label="a"), "same")
    with pytest.raises(LoopstateError) as err:
        it.run(p.IntentTaskStart(label="b"), "same")
    assert err.value.code == ErrorCode.REQUEST_ID_REUSED


@pytest.mark.parametrize("kw", [{"label": "x"}, {"initial_claims": [user_claim("anything")]}])
def test_off_mode_refuses_a_label_or_initial_claims(it: Intent, kw):
    with pytest.raises(LoopstateError) as err:
        it.run(p.IntentTaskStart(mode="off", **kw))
    assert err.value.code == ErrorCode.RULE_VIOLATION


def test_off_task_refuses_claims_until_switched_on(it: Intent):
    task = it.start(mode="off")
    with pytest.raises(LoopstateError) as err:
        it.add(task, "too early")
    assert err.value.code == ErrorCode.RULE_VIOLATION
    it.run(p.IntentModeSet(task_id=task, mode="on"))
    assert it.add(task, "now recorded")
    assert it.ask(p.IntentTasks())[0].mode == "on"


def test_more_than_twelve_initial_claims_are_refused(it: Intent):
    claims = [user_claim(f"claim {i}") for i in range(13)]
    with pytest.raises(LoopstateError) as err:
        it.run(p.IntentTaskStart(initial_claims=claims))
    assert err.value.code == ErrorCode.VALIDATION_FAILED and "at most 12" in err.value.message
    assert it.start(*claims[:12])


def test_one_bad_initial_claim_writes_nothing(it: Intent, data_dir):
    with pytest.raises(LoopstateError):
        it.run(p.IntentTaskStart(initial_claims=[user_claim("fine"), user_claim("")]))
    assert ledger_events(data_dir) == []


def test_task_reads_need_an_existing_task_of_this_project(it: Intent):
    with pytest.raises(LoopstateError) as err:
        it.snapshot(str(uuid.uuid4()))
    assert err.value.code == ErrorCode.NOT_FOUND
    with pytest.raises(LoopstateError) as err:
        it.snapshot("not-a-uuid")
    assert err.value.code == ErrorCode.VALIDATION_FAILED


@pytest.mark.jsonl_only("copies a stream file between projects")
def test_a_task_recorded_under_another_project_is_refused(svc, tmp_path, data_dir):
    first = tmp_path / "first"
    second = tmp_path / "second"
    first.mkdir()
    second.mkdir()
    a = Intent(svc, first)
    task = a.start(user_claim("belongs to the first project"))
    b_id = svc.project(str(second)).project_id
    a_dir = data_dir / "projects" / svc.project(str(first)).project_id
    (data_dir / "projects" / b_id / "streams").mkdir(parents=True)
    shutil.copy(a_dir / "streams" / "intent.jsonl", data_dir / "projects" / b_id / "streams" / "intent.jsonl")
    b = Intent(svc, second)
    with pytest.raises(LoopstateError) as err:
        b.snapshot(task)
    assert err.value.code == ErrorCode.RULE_VIOLATION and "not this project" in err.value.message
    with pytest.raises(LoopstateError):
        b.add(task, "write through the wrong project")


def test_mode_changes_are_user_only_and_not_repeated(it: Intent):
    task = it.start()
    with pytest.raises(LoopstateError) as err:
        it.run(p.IntentModeSet(task_id=task, mode="off", actor="agent"))
    assert err.value.code == ErrorCode.RULE_VIOLATION
    with pytest.raises(LoopstateError) as err:
        it.run(p.IntentModeSet(task_id=task, mode="on"))
    assert err.value.code == ErrorCode.CONFLICT
    event = it.run(p.IntentModeSet(task_id=task, mode="off")).events[0]
    assert event["event_type"] == "mode_set" and event["payload"] == {"mode": "off", "previous_mode": "on"}


def test_compaction_is_recorded_even_for_an_off_task(it: Intent):
    task = it.start(mode="off")
    event = it.run(p.IntentCompactionObserve(task_id=task, host_event_id="evt-42")).events[0]
    assert event["event_type"] == "compaction_observed"
    assert event["payload"] == {"trigger": "auto", "active_claims": 0, "host_event_id": "evt-42"}


def test_result_signal_note_is_evidence_unless_the_user_says_it(it: Intent):
    task = it.start()
    tool = it.run(p.IntentResultSignal(task_id=task, signal="failure", note="3 tests fail",
                                       source=p.SourceInput(kind="tool_result", event_id="pytest-run-1"))).events[0]
    assert tool["event_type"] == "result_signal_observed" and tool["payload"]["signal"] == "failure"
    assert tool["payload"]["claim"]["epistemic_status"] == "evidence"
    assert tool["payload"]["claim"]["facets"] == ["failure_signal"]
    user = it.run(p.IntentResultSignal(task_id=task, signal="feedback", note="looks right to me", actor="user")).events[0]
    assert user["payload"]["claim"]["epistemic_status"] == "explicit" and user["payload"]["claim"]["role"] == "user"
    bare = it.run(p.IntentResultSignal(task_id=task, signal="success")).events[0]
    assert "claim" not in bare["payload"]
    assert len(it.active_ids(task)) == 2


def test_an_off_task_records_no_sources_candidates_or_signals(it: Intent):
    task = it.start(mode="off")
    for command in (
        p.IntentSourceObserve(task_id=task, source=p.SourceInput(kind="agent_turn", event_id="t-1")),
        p.IntentCandidateAdd(task_id=task, statement="x", facets=["outcome"]),
        p.IntentResultSignal(task_id=task, signal="success"),
    ):
        with pytest.raises(LoopstateError) as err:
            it.run(command)
        assert err.value.code == ErrorCode.RULE_VIOLATION


@pytest.mark.parametrize("command", [
    p.IntentTaskStart(mode="sideways"),
    p.IntentTaskStart(actor="robot"),
    p.IntentResultSignal(task_id="00000000-0000-4000-8000-000000000001", signal="maybe"),
    p.IntentPurge(target="project", id="00000000-0000-4000-8000-000000000001", confirm=True),
])
def test_commands_built_in_python_are_checked_like_wire_input(it: Intent, command, data_dir):
    with pytest.raises(LoopstateError) as err:
        it.run(command)
    assert err.value.code == ErrorCode.INVALID_PARAMS
    assert ledger_events(data_dir) == []


def test_reads_of_a_new_project_create_nothing(it: Intent, data_dir):
    assert it.ask(p.IntentTasks()) == [] and it.snapshot().active_count == 0
    assert it.ask(p.IntentExport())["tasks"] == []
    assert not data_dir.exists()


def test_the_default_service_serves_intent(data_dir, root):
    from loopstate.service import Service

    outcome = Service(data_dir=data_dir).execute(str(root), p.IntentTaskStart(label="default registry"), "req-default")
    assert outcome.events[0]["event_type"] == "task_started" and outcome.head.sequence == 1


@pytest.mark.jsonl_only("copies a stream file between projects")
def test_project_wide_views_of_a_copied_ledger_show_only_this_projects_tasks(svc, tmp_path, data_dir):
    first, second = tmp_path / "first", tmp_path / "second"
    first.mkdir()
    second.mkdir()
    a = Intent(svc, first)
    foreign = a.start(user_claim("belongs to the first project"))
    a.add(foreign, "first project's rule", scope="project")
    a.run(p.IntentCandidateAdd(task_id=foreign, statement="first project's signal", facets=["outcome"], actor="agent"))
    b_dir = data_dir / "projects" / svc.project(str(second)).project_id / "streams"
    b_dir.mkdir(parents=True)
    shutil.copy(data_dir / "projects" / svc.project(str(first)).project_id / "streams" / "intent.jsonl", b_dir / "intent.jsonl")
    b = Intent(svc, second)
    b.n = 100
    own = b.start(user_claim("belongs to the second project"))
    views = [b.snapshot(), b.snapshot(own), b.audit(), b.ask(p.IntentTasks()), b.ask(p.IntentCandidates()),
             b.ask(p.IntentExport()), b.ask(p.IntentCompact(task_id=own)), b.ask(p.IntentHookContext(task_id=own))]
    text = json.dumps(msgspec.to_builtins(views))
    assert "first project" not in text and foreign not in text
    assert "belongs to the second project" in text


def test_tasks_of_one_task_id_list_that_task_only(it: Intent):
    first = it.run(p.IntentTaskStart(label="a", initial_claims=[user_claim("keep it")])).events[0]["task_id"]
    second = it.run(p.IntentTaskStart(label="b")).events[0]["task_id"]
    it.run(p.IntentModeSet(task_id=second, mode="off"))
    assert [(t.task_id, t.mode, t.active_claims) for t in it.ask(p.IntentTasks(task_id=second))] == [(second, "off", 0)]
    assert [(t.task_id, t.label, t.active_claims) for t in it.ask(p.IntentTasks(task_id=first))] == [(first, "a", 1)]
    assert it.ask(p.IntentTasks(task_id=str(uuid.uuid4()))) == []
    with pytest.raises(LoopstateError) as refused:
        it.ask(p.IntentTasks(task_id="not-a-task"))
    assert refused.value.code == ErrorCode.VALIDATION_FAILED and refused.value.details["field"] == "task_id"
