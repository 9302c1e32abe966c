"""A new host session sees what the user said before: every session works on the project's current task.

Each event is a fresh `loopstate hook` process and each CLI command a fresh
`loopstate` process, on one store, as a host and a person at a terminal
drive them.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from hookkit import context_of, hook, host_input, loopstate, receipt_of

pytestmark = pytest.mark.both_stores  # docs/storage.md, *Which tests run on PostgreSQL*

HEADER = "User-stated intent (verbatim claims from the user's own messages):"


@pytest.fixture
def project(tmp_path: Path) -> Path:
    path = tmp_path / "shop"
    (path / ".git").mkdir(parents=True)
    return path


def event(project: Path, data_dir: Path, session: str, name: str, *, host: str = "claude",
          env: dict[str, str] | None = None, **fields):
    return hook(host, name, host_input(host, name, project, session, **fields), data_dir=data_dir, cwd=project,
                env=env)


def prompt(project: Path, data_dir: Path, session: str, text: str, **kw) -> dict:
    return event(project, data_dir, session, "UserPromptSubmit", prompt=text, **kw)


def receipt_for(project: Path, data_dir: Path, session: str, text: str, **kw) -> str:
    """An /intent command's receipt, where its host gets it (hookkit.receipt_of)."""
    return receipt_of(kw.get("host", "claude"), prompt(project, data_dir, session, text, **kw))


def tasks(project: Path, data_dir: Path) -> list[dict]:
    return json.loads(loopstate("intent", "tasks", "--json", cwd=project, data_dir=data_dir).stdout)["tasks"]


@pytest.mark.parametrize("host", ["claude", "codex"])
def test_a_claim_made_by_intent_start_is_injected_at_the_start_of_a_brand_new_session(host, project, data_dir):
    loopstate("intent", "start", "--claim", "outcome:One API call per checkout",
              "--claim", "hard_constraint:Keep the public API stable", cwd=project, data_dir=data_dir)
    for source in ("startup", "resume", "clear", "compact"):
        start = event(project, data_dir, f"brand-new-{source}", "SessionStart", host=host, source=source)
        assert context_of(start) == (f"{HEADER}\n- [hard_constraint] Keep the public API stable\n"
                                     "- [outcome] One API call per checkout"), source
    assert len(tasks(project, data_dir)) == 1  # no session started a task of its own


def test_intent_remember_in_one_session_is_injected_at_the_start_of_the_next(project, data_dir):
    assert event(project, data_dir, "first", "SessionStart") == {"continue": True}
    assert tasks(project, data_dir) == []  # a hook starts no task by itself
    receipt = receipt_for(project, data_dir, "first", "/intent remember Never log card numbers")
    assert "it started task" in receipt and "now the project's current task" in receipt  # the user's act starts one
    assert event(project, data_dir, "first", "SessionEnd") == {"continue": True}
    nxt = event(project, data_dir, "second", "SessionStart", source="startup")
    assert context_of(nxt) == f"{HEADER}\n- [outcome] Never log card numbers"


def test_intent_start_makes_a_new_current_task_and_only_project_claims_follow_it(project, data_dir):
    prompt(project, data_dir, "s1", "/intent remember Fix the checkout total")
    prompt(project, data_dir, "s1", "/intent remember --project hard_constraint:Python 3.11 only")
    old = [t for t in tasks(project, data_dir) if t.get("current")][0]["task_id"]
    receipt = receipt_for(project, data_dir, "s1", "/intent start invoices")
    assert receipt.startswith("loopstate: started task ") and f"Claims of task {old[:8]} are no longer injected" in receipt
    for session in ("s1", "s2"):  # the session that started it, and a new one
        start = event(project, data_dir, session, "SessionStart", source="startup")
        assert context_of(start) == f"{HEADER}\n- [hard_constraint] Python 3.11 only", session
    listed = tasks(project, data_dir)
    assert [t["label"] for t in listed if t.get("current")] == ["invoices"]
    loopstate("intent", "resume", old[:8], cwd=project, data_dir=data_dir)  # a short id, as the run verbs take
    assert "- [outcome] Fix the checkout total" in context_of(event(project, data_dir, "s3", "SessionStart"))


def test_twenty_sessions_leave_one_task(project, data_dir):
    loopstate("intent", "start", "--label", "shop", cwd=project, data_dir=data_dir)
    for n in range(20):
        session = f"exec-{n}"
        event(project, data_dir, session, "SessionStart", host="codex")
        prompt(project, data_dir, session, "do the next thing", host="codex")
        event(project, data_dir, session, "Stop", host="codex")
    assert [t["label"] for t in tasks(project, data_dir)] == ["shop"]


@pytest.mark.slow
def test_two_concurrent_sessions_see_each_others_remembered_claims_at_their_next_prompt(project, data_dir):
    for session in ("left", "right"):
        event(project, data_dir, session, "SessionStart")
    prompt(project, data_dir, "left", "/intent remember Use the staging database")
    assert context_of(prompt(project, data_dir, "right", "go on")) == f"{HEADER}\n- [outcome] Use the staging database"
    prompt(project, data_dir, "right", "/intent remember soft_constraint:Small commits")
    seen = context_of(prompt(project, data_dir, "left", "continue"))
    assert "- [outcome] Use the staging database" in seen and "- [soft_constraint] Small commits" in seen
    assert prompt(project, data_dir, "left", "and again") == {"continue": True}  # unchanged since: not again
    assert len(tasks(project, data_dir)) == 1


def test_loopstate_task_pins_a_process_to_a_task(project, data_dir):
    first = json.loads(loopstate("intent", "start", "--claim", "Ship the refund flow", "--json", cwd=project,
                                 data_dir=data_dir).stdout)["events"][0]["task_id"]
    loopstate("intent", "start", "--claim", "Ship the invoice flow", cwd=project, data_dir=data_dir)
    pinned = {"LOOPSTATE_TASK": first[:8]}
    assert context_of(event(project, data_dir, "pinned", "SessionStart", env=pinned)) == \
        f"{HEADER}\n- [outcome] Ship the refund flow"
    prompt(project, data_dir, "pinned", "/intent remember Refunds within 14 days", env=pinned)
    assert "- [outcome] Refunds within 14 days" in context_of(prompt(project, data_dir, "pinned", "go", env=pinned))
    unpinned = context_of(event(project, data_dir, "free", "SessionStart"))
    assert unpinned == f"{HEADER}\n- [outcome] Ship the invoice flow"  # the current task is untouched
    wrong = event(project, data_dir, "pinned", "SessionStart", env={"LOOPSTATE_TASK": "ffffffff"})
    assert "no task id starts with 'ffffffff'" in wrong["systemMessage"]  # fails open, saying what was wrong


@pytest.mark.slow
def test_a_private_session_is_its_own_and_the_others_keep_the_shared_task(project, data_dir):
    prompt(project, data_dir, "shared", "/intent remember Keep the API")
    assert receipt_for(project, data_dir, "quiet", "/intent private").startswith("loopstate: this session is private")
    assert event(project, data_dir, "quiet", "SessionStart") == {"continue": True}  # injects nothing
    assert "nothing was recorded" in receipt_for(project, data_dir, "quiet", "/intent remember Secret plan")
    assert context_of(event(project, data_dir, "shared", "SessionStart")) == f"{HEADER}\n- [outcome] Keep the API"
    assert "Keep the API" in receipt_for(project, data_dir, "shared", "/intent show")
    back = receipt_for(project, data_dir, "quiet", "/intent on")
    assert back.startswith("loopstate: intent is on") and "no longer private" in back
    assert context_of(event(project, data_dir, "quiet", "SessionStart")) == f"{HEADER}\n- [outcome] Keep the API"
    assert len(tasks(project, data_dir)) == 1  # the private task was never durable: nothing of it is left


def old_rule_store(project: Path, data_dir: Path) -> tuple[str, str]:
    """A store as the old rule left it (a session started its own task, no task was current): the user's
    task with a claim, then a newer empty task a hook started for session ``old-session``, whose
    binding file (schema 1) names it. Written by today's service, then made old: the ``current`` marks
    taken off the starts and the stream chained again."""
    from loopstate_protocol import intent as p

    from loopstate.core import canonical
    from loopstate.core.chain import Position, seal
    from loopstate.core.project import Project
    from loopstate.domains.intent import LAYOUT
    from loopstate.service import Service
    from loopstate.service.sessions import session_hash

    user_task, session_task = "11111111-1111-4111-8111-111111111111", "22222222-2222-4222-8222-222222222222"
    service = Service(data_dir=data_dir)
    claim = p.ClaimInput(statement="Keep the API stable", role="user", epistemic_status="explicit",
                         facets=["hard_constraint"])
    service.execute(str(project), p.IntentTaskStart(task_id=user_task, initial_claims=[claim]), "old-1")
    service.execute(str(project), p.IntentTaskStart(task_id=session_task, actor="system"), "old-2")
    folder = Project(str(project), data_dir=data_dir).dir
    stream = folder / "streams" / "intent.jsonl"
    lines, at = [], Position()
    for line in stream.read_bytes().splitlines():
        event = json.loads(line)
        event["payload"].pop("current")
        event, sealed = seal({k: v for k, v in event.items() if k not in ("sequence", "prev_hash")}, LAYOUT, at)
        at = Position(at.offset + len(sealed), event["sequence"], event["event_hash"])
        lines.append(sealed)
    stream.write_bytes(b"".join(lines))
    for cache in (*folder.glob("checkpoints/*"), *folder.glob("snapshots/*")):
        cache.unlink()
    session = session_hash("old-session")
    (folder / "hook-sessions").mkdir()
    (folder / "hook-sessions" / f"{session}.json").write_bytes(canonical.encode({
        "schema_version": 1, "project_id": Project(str(project), data_dir=data_dir).project_id,
        "host_session_hash": session, "task_id": session_task, "epoch": 0, "run_id": None, "goal_id": None,
        "injected": None, "state_key": None, "reinject": False, "updated_at": "2026-11-30T10:00:00Z"}))
    return user_task, session_task


@pytest.mark.jsonl_only("writes a stream file of the old rule")
def test_a_store_of_the_old_rule_keeps_working_and_its_first_write_records_the_current_task(project, data_dir):
    user_task, session_task = old_rule_store(project, data_dir)
    shown = json.loads(loopstate("intent", "show", "--json", cwd=project, data_dir=data_dir).stdout)
    assert shown["current_task_id"] == user_task  # read before any write: the pick the first write will record
    # The old session's binding names its own empty task; it now follows the current one.
    resumed = event(project, data_dir, "old-session", "SessionStart", source="resume")
    assert context_of(resumed) == f"{HEADER}\n- [hard_constraint] Keep the API stable"
    prompt(project, data_dir, "old-session", "/intent remember Add a changelog entry")
    log = json.loads(loopstate("log", "--stream", "intent", "--json", cwd=project, data_dir=data_dir).stdout)
    events = log["streams"][0]["events"]
    assert [(e["event_type"], e["task_id"], e["actor"]) for e in events[2:]] == [
        ("current_task_set", user_task, "system"), ("claim_added", user_task, "user")]
    assert events[2]["payload"] == {"reason": "migrated"}  # the log says why the task became current
    lines = loopstate("log", "--stream", "intent", cwd=project, data_dir=data_dir).stdout.splitlines()
    assert "current_task_set (migrated)" in lines[3] and "claim_added" in lines[4]
    listed = {t["task_id"]: t for t in tasks(project, data_dir)}
    assert listed[user_task].get("current") and not listed[session_task].get("current")
    human = loopstate("intent", "show", cwd=project, data_dir=data_dir).stdout
    assert f"current task: {user_task}, the one new host sessions bind to" in human
    loopstate("verify", cwd=project, data_dir=data_dir)


@pytest.mark.slow
def test_run_create_and_acquire_with_session_bind_that_host_session_to_the_run(project, data_dir):
    def tool(session: str) -> dict:
        return event(project, data_dir, session, "PreToolUse")

    assert tool("worker") == {"continue": True}  # bound to no run: nothing denies
    created = json.loads(loopstate("run", "create", "--objective", "Fix checkout", "--done-gate", "tests pass",
                                   "--asset", "app", "--session", "planner", "--json", cwd=project,
                                   data_dir=data_dir).stdout)
    run_id = created["run_id"]
    assert f"run {run_id} is ready but has no lease yet" in tool("planner")["hookSpecificOutput"]["permissionDecisionReason"]
    assert tool("worker") == {"continue": True}  # no implicit binding of another session
    loopstate("run", "acquire", run_id[:8], "--session", "worker", cwd=project, data_dir=data_dir)
    assert tool("worker") == {"continue": True}  # bound now, and the run may work
    status = json.loads(loopstate("run", "status", run_id[:8], "--json", cwd=project, data_dir=data_dir).stdout)
    assert json.dumps(status).count('"session_id": "worker"') >= 1  # the lease's owner is that session
    loopstate("run", "stop", "--cancel", run_id, "--reason", "done", cwd=project, data_dir=data_dir)
    denied = tool("worker")["hookSpecificOutput"]["permissionDecisionReason"]
    assert f"run {run_id} is cancelled: a finished run does no more work" in denied
    start = event(project, data_dir, "worker", "SessionStart")
    assert context_of(start).startswith(f"Run {run_id}: cancelled")


@pytest.mark.slow
def test_a_private_session_records_nothing_even_when_a_pin_names_a_task(project, data_dir):
    task = json.loads(loopstate("intent", "start", "--claim", "Keep it", "--json", cwd=project,
                                data_dir=data_dir).stdout)["events"][0]["task_id"]
    pinned = {"LOOPSTATE_TASK": task}
    assert receipt_for(project, data_dir, "p", "/intent private", env=pinned).startswith(
        "loopstate: this session is private")
    assert "nothing was recorded" in receipt_for(project, data_dir, "p", "/intent remember Secret", env=pinned)
    assert event(project, data_dir, "p", "SessionStart", env=pinned) == {"continue": True}
