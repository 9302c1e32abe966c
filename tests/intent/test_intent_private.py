"""Private sessions: memory-only events, control files, one-to-one ownership, recovery after restart."""

from __future__ import annotations

import json
from pathlib import Path

import msgspec
import pytest

from intentkit import Intent, ledger_events, user_claim
from loopstate.core.clock import FixedClock
from loopstate.core.errors import LoopstateError
from loopstate.core.ids import SequentialIds
from loopstate.domains.intent import DOMAIN
from loopstate.service import Service
from loopstate.service.intent_effects import session_hash, write_control
from loopstate_protocol import intent as p
from loopstate_protocol.errors import ErrorCode

pytestmark = pytest.mark.both_stores  # docs/storage.md, *Which tests run on PostgreSQL*

SECRET_PLAN = "Rename the product to Falcon before the launch"


def refused(call, code: ErrorCode) -> LoopstateError:
    with pytest.raises(LoopstateError) as err:
        call()
    assert err.value.code == code, err.value.message
    return err.value


def controls(data_dir: Path) -> list[dict]:
    return [json.loads(f.read_text()) for f in sorted(data_dir.glob("projects/*/private-sessions/*.json"))]


def store_text(data_dir: Path) -> str:
    return "".join(f.read_text(errors="replace") for f in data_dir.rglob("*") if f.is_file())


def start_private(it: Intent, session: str = "host-session-A", *claims) -> str:
    outcome = it.run(p.IntentTaskStart(mode="private", host_session_id=session, initial_claims=list(claims)))
    return outcome.events[0]["task_id"]


def restarted(data_dir: Path, root: Path) -> Intent:
    """A fresh Service: what a new sidecar process sees."""
    fresh = Intent(Service(data_dir=data_dir, clock=FixedClock("2026-01-02T00:00:00Z"), new_id=SequentialIds(7),
                           domains=[DOMAIN]), root)
    fresh.n = 100  # its own request ids
    return fresh


def test_private_events_stay_in_memory_and_the_control_holds_no_statement(it: Intent, data_dir):
    outcome = it.run(p.IntentTaskStart(mode="private", host_session_id="host-session-A",
                                       initial_claims=[user_claim(SECRET_PLAN)]))
    task = outcome.events[0]["task_id"]
    assert outcome.head.sequence == 0 and outcome.events[0]["event_type"] == "task_started"
    it.add(task, "Keep the codename out of commits")
    assert ledger_events(data_dir) == []
    assert len(it.active_ids(task)) == 2
    (control,) = controls(data_dir)
    assert set(control) == {"schema_version", "project_id", "task_id", "host_session_hash", "mode", "updated_at"}
    assert control["task_id"] == task and control["mode"] == "private" and control["schema_version"] == 1
    assert control["host_session_hash"] == session_hash("host-session-A") != "host-session-A"
    text = store_text(data_dir)
    assert SECRET_PLAN not in text and "codename" not in text and "host-session-A" not in text


def test_a_private_task_injects_nothing(it: Intent):
    task = start_private(it, "host-session-A", user_claim(SECRET_PLAN))
    hook = it.ask(p.IntentHookContext(task_id=task))
    assert hook.text == "" and hook.omitted == {"task_private": 1}


def test_private_start_needs_a_host_session(it: Intent):
    refused(lambda: it.run(p.IntentTaskStart(mode="private")), ErrorCode.VALIDATION_FAILED)


def test_an_exact_retry_in_memory_returns_the_same_events(it: Intent):
    task = start_private(it)
    first = it.run(p.IntentClaimAdd(task_id=task, claim=user_claim("private one")), "same-request")
    again = it.run(p.IntentClaimAdd(task_id=task, claim=user_claim("private one")), "same-request")
    assert again.replayed and again.events == first.events
    refused(lambda: it.run(p.IntentClaimAdd(task_id=task, claim=user_claim("changed")), "same-request"),
            ErrorCode.REQUEST_ID_REUSED)
    assert len(it.active_ids(task)) == 1


def test_one_session_owns_one_task_and_one_task_one_session(it: Intent):
    task = start_private(it, "host-session-A")
    refused(lambda: start_private(it, "host-session-A"), ErrorCode.CONFLICT)
    durable = it.start()
    refused(lambda: it.run(p.IntentModeSet(task_id=durable, mode="private", host_session_id="host-session-A")), ErrorCode.CONFLICT)
    # A different session can neither take the task nor clear its control.
    refused(lambda: it.run(p.IntentModeSet(task_id=task, mode="on", host_session_id="host-session-B")), ErrorCode.CONFLICT)
    refused(lambda: it.run(p.IntentModeSet(task_id=task, mode="on")), ErrorCode.CONFLICT)


def test_re_enable_appends_an_empty_durable_task_and_removes_the_control(it: Intent, data_dir):
    task = start_private(it, "host-session-A", user_claim(SECRET_PLAN))
    outcome = it.run(p.IntentModeSet(task_id=task, mode="on", host_session_id="host-session-A"))
    (event,) = outcome.events
    assert event["event_type"] == "task_started" and event["task_id"] == task
    assert event["payload"] == {"mode": "on", "label": None, "initial_claims": [], "reenabled_from_private": True}
    assert controls(data_dir) == []
    assert it.active_ids(task) == set()  # private claims never become durable
    assert SECRET_PLAN not in store_text(data_dir)
    assert it.add(task, "now durable")


def test_a_durable_task_can_go_private_and_come_back(it: Intent, data_dir):
    task = it.start(user_claim("durable before"))
    event = it.run(p.IntentModeSet(task_id=task, mode="private", host_session_id="host-session-A")).events[0]
    assert event["payload"] == {"mode": "private", "previous_mode": "on"}
    assert [c["task_id"] for c in controls(data_dir)] == [task]
    it.add(task, SECRET_PLAN)
    assert len(ledger_events(data_dir)) == 2 and SECRET_PLAN not in store_text(data_dir)
    back = it.run(p.IntentModeSet(task_id=task, mode="off", host_session_id="host-session-A")).events[0]
    assert back["event_type"] == "mode_set" and back["payload"] == {"mode": "off", "previous_mode": "private"}
    assert controls(data_dir) == []
    assert [c.statement for c in it.audit(task).claims] == ["durable before"]


def test_after_a_restart_a_private_task_is_refused_until_recovered(it: Intent, data_dir, root):
    task = start_private(it, "host-session-A", user_claim(SECRET_PLAN))
    fresh = restarted(data_dir, root)
    error = refused(lambda: fresh.add(task, "write into a task whose memory is gone"), ErrorCode.PRIVACY_VIOLATION)
    assert "private_recover" in error.message
    refused(lambda: fresh.run(p.IntentPrivateRecover(host_session_id="host-session-Z", action="resume")), ErrorCode.NOT_FOUND)
    fresh.run(p.IntentPrivateRecover(host_session_id="host-session-A", action="resume"))
    assert fresh.active_ids(task) == set()  # resumed empty: the old memory is gone for good
    fresh.add(task, "private again")
    assert ledger_events(data_dir) == []
    refused(lambda: fresh.run(p.IntentPrivateRecover(host_session_id="host-session-A", action="resume")), ErrorCode.CONFLICT)


@pytest.mark.parametrize("action,mode", [("durable_on", "on"), ("durable_off", "off")])
def test_recovery_can_create_an_empty_durable_task(it: Intent, data_dir, root, action, mode):
    task = start_private(it, "host-session-A", user_claim(SECRET_PLAN))
    fresh = restarted(data_dir, root)
    (event,) = fresh.run(p.IntentPrivateRecover(host_session_id="host-session-A", action=action)).events
    assert event["event_type"] == "task_started" and event["payload"]["mode"] == mode and event["task_id"] == task
    assert controls(data_dir) == []
    assert fresh.ask(p.IntentTasks())[0].mode == mode


def test_recovery_can_delete_the_control(it: Intent, data_dir, root):
    start_private(it, "host-session-A", user_claim(SECRET_PLAN))
    fresh = restarted(data_dir, root)
    assert fresh.run(p.IntentPrivateRecover(host_session_id="host-session-A", action="delete")).events == []
    assert controls(data_dir) == [] and ledger_events(data_dir) == []


def test_an_interrupted_re_enable_is_finished_by_its_exact_retry(it: Intent, svc, data_dir, root):
    task = start_private(it, "host-session-A")
    command = p.IntentModeSet(task_id=task, mode="on", host_session_id="host-session-A")
    first = it.run(command, "re-enable")
    # The process died after the durable append, before the control was removed:
    write_control(svc.project(str(root)), session_hash("host-session-A"), task, "2026-01-01T00:00:00Z")
    fresh = restarted(data_dir, root)
    again = fresh.run(command, "re-enable")
    assert again.replayed and again.events == first.events
    assert controls(data_dir) == []


def test_any_later_mutation_also_finishes_an_interrupted_re_enable(it: Intent, svc, data_dir, root):
    task = start_private(it, "host-session-A")
    it.run(p.IntentModeSet(task_id=task, mode="on", host_session_id="host-session-A"))
    write_control(svc.project(str(root)), session_hash("host-session-A"), task, "2026-01-01T00:00:00Z")
    restarted(data_dir, root).start()
    assert controls(data_dir) == []


def test_hook_paths_see_both_the_session_and_the_task_level_control(it: Intent, svc, root, data_dir):
    from loopstate.service.intent_effects import is_private

    project = svc.project(str(root))
    task = start_private(it, "host-session-A")
    durable = it.start()
    assert is_private(project, host_session_id="host-session-A")
    assert is_private(project, task_id=task, host_session_id="another-session")
    assert not is_private(project, task_id=durable, host_session_id="another-session")
    it.run(p.IntentModeSet(task_id=task, mode="on", host_session_id="host-session-A"))
    assert not is_private(project, task_id=task, host_session_id="host-session-A")


def test_a_private_task_view_shows_its_memory_beside_the_durable_claims(it: Intent, data_dir):
    task = it.start(user_claim("durable before"))
    rule = it.add(task, "Project rule: no force pushes", scope="project")
    it.run(p.IntentModeSet(task_id=task, mode="private", host_session_id="host-session-A"))
    secret = it.add(task, SECRET_PLAN)
    view = it.snapshot(task)
    assert {c.statement for fs in view.by_facet.values() for cs in fs.values() for c in cs} == {
        "durable before", "Project rule: no force pushes", SECRET_PLAN}
    assert view.tasks[0].mode == "private"
    assert it.ask(p.IntentHookContext(task_id=task)).text == ""
    # Private claims cannot touch durable ones: the in-memory decision only sees the task's memory.
    refused(lambda: it.replace(task, [rule], "override in private"), ErrorCode.NOT_FOUND)
    assert secret not in json.dumps(ledger_events(data_dir))


@pytest.mark.jsonl_only("purge rewrites the intent file; on PostgreSQL it is refused (tests/team/test_team_proofs_on_pg.py)")
def test_private_memory_survives_another_process_rewriting_the_ledger(it: Intent, data_dir, root):
    durable = it.start()
    doomed = it.add(durable, "to be purged elsewhere")
    task = start_private(it, "host-session-A", user_claim(SECRET_PLAN))
    restarted(data_dir, root).run(p.IntentPurge(target="claim", id=doomed, confirm=True))
    assert len(it.active_ids(task)) == 1  # a query alone re-reads the new file and keeps the memory


def test_a_malformed_or_newer_control_stops_mutations_with_a_clear_code(it: Intent, svc, root, data_dir):
    task = start_private(it, "host-session-A")
    (path,) = list(data_dir.glob("projects/*/private-sessions/*.json"))
    original = path.read_bytes()
    path.write_text("{not json")
    refused(lambda: it.start(), ErrorCode.CORRUPT_LEDGER)
    path.write_text(json.dumps({**json.loads(original), "schema_version": 2}))
    refused(lambda: it.start(), ErrorCode.FUTURE_SCHEMA)
    path.write_text(json.dumps({**json.loads(original), "statement": "smuggled"}))
    refused(lambda: it.start(), ErrorCode.CORRUPT_LEDGER)
    path.write_text(json.dumps({**json.loads(original), "schema_version": True}))  # == 1 in Python, not a version
    refused(lambda: it.start(), ErrorCode.CORRUPT_LEDGER)
    path.write_bytes(original)
    assert it.add(task, "fine again")


def test_orphan_control_temp_files_are_removed_under_the_lock(it: Intent, data_dir):
    start_private(it, "host-session-A")
    (folder,) = list(data_dir.glob("projects/*/private-sessions"))
    orphan = folder / "abc.json.loopstate-tmp-0123456789abcdef"
    orphan.write_text("half written")
    it.start()
    assert not orphan.exists() and len(list(folder.iterdir())) == 1


def test_project_wide_views_never_show_private_tasks(it: Intent):
    task = start_private(it, "host-session-A", user_claim(SECRET_PLAN))
    it.start(user_claim("durable"))
    for view in (it.snapshot(), it.audit(), it.ask(p.IntentExport()), it.ask(p.IntentTasks())):
        assert SECRET_PLAN not in json.dumps(msgspec.to_builtins(view)) and task not in json.dumps(msgspec.to_builtins(view))


def test_hook_context_of_a_task_private_in_another_process_injects_nothing(it: Intent, data_dir, root):
    durable = it.start(user_claim("Keep the API stable"))
    it.run(p.IntentModeSet(task_id=durable, mode="private", host_session_id="host-session-A"))
    memory_only = start_private(it, "host-session-B", user_claim(SECRET_PLAN))
    other = restarted(data_dir, root)
    for task in (durable, memory_only):
        hook = other.ask(p.IntentHookContext(task_id=task))
        assert hook.text == "" and hook.claim_ids == [] and hook.omitted == {"task_private": 0}


def test_a_control_written_before_a_crashed_switch_keeps_the_hook_silent(it: Intent, svc, data_dir, root):
    task = it.start(user_claim("Keep the API stable"))
    # The process wrote the control, then died before its durable mode_set.
    write_control(svc.project(str(root)), session_hash("host-session-A"), task, "2026-01-01T00:00:00Z")
    other = restarted(data_dir, root)
    assert other.ask(p.IntentHookContext(task_id=task)).text == ""
    (path,) = list(data_dir.glob("projects/*/private-sessions/*.json"))
    path.write_text("{not json")
    assert other.ask(p.IntentHookContext(task_id=task)).text == ""  # unreadable control: fail closed
    path.unlink()
    assert "Keep the API stable" in other.ask(p.IntentHookContext(task_id=task)).text
