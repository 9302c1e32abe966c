"""The project's current task: made by a start or a resume, folded from the ledger, picked once for an old store."""

from __future__ import annotations

import pytest

from intentkit import Intent, ledger_events, user_claim
from loopstate.core.errors import LoopstateError
from loopstate_protocol import intent as p
from loopstate_protocol.errors import ErrorCode
from test_intent_cli import as_json, cli

pytestmark = pytest.mark.both_stores  # docs/storage.md, *Which tests run on PostgreSQL*


def current(it: Intent) -> p.CurrentTask:
    return it.ask(p.IntentCurrent())


def test_a_start_makes_its_task_current_and_a_resume_brings_another_back(it: Intent, data_dir):
    assert current(it) == p.CurrentTask(task_id=None, reason=None, sequence=0)
    first = it.start(user_claim("Keep the API stable", "hard_constraint"))
    assert (current(it).task_id, current(it).reason, current(it).sequence) == (first, "started", 1)
    second = it.start(actor="agent")  # any front door's start, an agent's (the MCP task tool) too
    assert current(it).task_id == second
    resumed = it.run(p.IntentTaskResume(task_id=first))
    assert [(e["event_type"], e["payload"]) for e in resumed.events] == [("current_task_set", {"reason": "resumed"})]
    assert (current(it).task_id, current(it).reason, current(it).sequence) == (first, "resumed", 3)
    assert current(it).task.task_id == first and current(it).task.current
    assert it.run(p.IntentTaskResume(task_id=first)).events == []  # already current: nothing to write
    view = it.ask(p.IntentSnapshot())
    assert view.current_task_id == first
    assert [t.task_id for t in it.ask(p.IntentTasks()) if t.current] == [first]
    assert [e["payload"].get("current") for e in ledger_events(data_dir) if e["event_type"] == "task_started"] == [True, True]


def test_a_resume_names_a_task_of_this_project_and_never_a_private_one(it: Intent):
    with pytest.raises(LoopstateError) as missing:
        it.run(p.IntentTaskResume(task_id="00000000-0000-4000-8000-00000000dead"))
    assert missing.value.code == ErrorCode.NOT_FOUND and "`loopstate intent start`" in missing.value.message
    private = it.start(mode="private", host_session_id="sess-private")
    assert current(it).task_id is None  # a private task lives in one process: no session could share it
    with pytest.raises(LoopstateError) as refused:
        it.run(p.IntentTaskResume(task_id=private))
    assert refused.value.code == ErrorCode.RULE_VIOLATION and "is private" in refused.value.message


def test_a_store_without_a_current_task_picks_the_newest_task_with_the_users_words_on_its_first_write(it: Intent, data_dir):
    """decide's migration, given a state as the old rule folded it (starts carry no current mark)."""
    older = it.start(user_claim("Older rule"))
    newer = it.start(user_claim("Newer rule"))
    it.start()  # newest, but empty: a session's own task under the old rule
    it.add(newer, "An agent's guess", actor="agent", status="inferred", confidence=0.5)
    from loopstate.domains.intent import DOMAIN

    folded = it.svc.folded(it.svc.project(it.root), DOMAIN, "intent")
    folded.state.current = None  # what a store of the old rule folds to
    assert (current(it).task_id, current(it).reason, current(it).sequence) == (newer, "pending_migration", 0)
    outcome = it.run(p.IntentClaimAdd(task_id=older, claim=p.ClaimInput(
        statement="Written under the new rule", role="user", epistemic_status="explicit", facets=["outcome"])))
    assert [(e["event_type"], e["task_id"], e["actor"]) for e in outcome.events] == [
        ("current_task_set", newer, "system"), ("claim_added", older, "user")]
    assert outcome.events[0]["payload"] == {"reason": "migrated"}
    assert (current(it).task_id, current(it).reason) == (newer, "migrated")
    assert it.run(p.IntentClaimAdd(task_id=older, claim=p.ClaimInput(
        statement="A second write", role="user", epistemic_status="explicit", facets=["outcome"]))).events[0][
        "event_type"] == "claim_added"  # recorded once


@pytest.mark.jsonl_only("purge rewrites the intent file; on PostgreSQL it is refused (tests/team/test_team_proofs_on_pg.py)")
def test_the_current_task_survives_a_snapshot_and_a_purge_of_it(it: Intent, svc, root, data_dir):
    from loopstate.domains.intent import DOMAIN
    from loopstate.service import Service

    first = it.start(user_claim("Keep it"))
    second = it.start(user_claim("Then this"))
    svc.compact(str(root))  # a projection snapshot at the head: a cold read restores the current task from it
    cold = Service(data_dir=data_dir, domains=[DOMAIN])
    assert cold.query(str(root), p.IntentCurrent()).task_id == second
    it.run(p.IntentPurge(target="task", id=second, confirm=True))
    after = current(it)
    assert after.task_id == first and after.reason == "started"  # the start before it is current again


FIRST, SECOND = "abcd1234-0000-4000-8000-000000000001", "abcd5678-0000-4000-8000-000000000002"


def test_cli_ids_by_unique_prefix_and_an_ambiguous_one_lists_the_candidates(root, data_dir):
    for task_id in (FIRST, SECOND):
        cli(root, data_dir, "start", "--task-id", task_id, "--claim", f"Rule of {task_id[:8]}")
    added = as_json(cli(root, data_dir, "add", "abcd1", "Short ids work", "--json"))
    assert added["events"][-1]["task_id"] == FIRST
    claim = added["events"][-1]["payload"]["claim"]["claim_id"]
    done = as_json(cli(root, data_dir, "invalidate", "ABCD12", claim[:6], "--reason", "test", "--json"))
    assert done["events"][-1]["payload"]["claim_id"] == claim
    resumed = as_json(cli(root, data_dir, "resume", "abcd12", "--json"))
    assert [(e["event_type"], e["task_id"]) for e in resumed["events"]] == [("current_task_set", FIRST)]
    ambiguous = cli(root, data_dir, "add", "abcd", "x", ok=False)
    assert ambiguous.returncode == 1 and "task id prefix 'abcd' is ambiguous: 2 ids start with it" in ambiguous.stderr
    assert FIRST in ambiguous.stderr and SECOND in ambiguous.stderr
    short = cli(root, data_dir, "mode", "ab", "off", ok=False)
    assert short.returncode == 1 and "too short: give at least 4 characters" in short.stderr
    missing = cli(root, data_dir, "show", "--task", "ffffffff-0", ok=False)
    assert "no task id starts with 'ffffffff-0'; `loopstate intent tasks` lists them" in missing.stderr
    assert len(ledger_events(data_dir)) == 5  # the refusals wrote nothing


def test_cli_start_scope_project_makes_claims_every_task_sees(root, data_dir):
    as_json(cli(root, data_dir, "start", "--claim", "hard_constraint:Python 3.11 only", "--scope", "project", "--json"))
    later = as_json(cli(root, data_dir, "start", "--label", "later", "--json"))["events"][0]["task_id"]
    hook = as_json(cli(root, data_dir, "hook-context", later[:8], "--json"))
    assert hook["text"].endswith("- [hard_constraint] Python 3.11 only")
    shown = cli(root, data_dir, "show").stdout
    assert f"current task: {later} (later), the one new host sessions bind to" in shown
    listing = cli(root, data_dir, "tasks").stdout
    assert f"{later}*" in listing and "(* = the project's current task" in listing
