"""Purge: user-confirmed physical deletion, re-chained stream, purge record with counts only."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from intentkit import Intent, ledger_events, user_claim
from loopstate.core import checkpoint
from loopstate.core.clock import FixedClock
from loopstate.core.errors import LoopstateError
from loopstate.core.ids import SequentialIds
from loopstate.domains.intent import DOMAIN
from loopstate.service import Service
from loopstate_protocol import intent as p
from loopstate_protocol.errors import ErrorCode

pytestmark = pytest.mark.jsonl_only("purge rewrites the intent file; on PostgreSQL it is refused (tests/team/test_team_proofs_on_pg.py)")

DOOMED = "The launch codename is Bluebird"


def refused(call, code: ErrorCode) -> LoopstateError:
    with pytest.raises(LoopstateError) as err:
        call()
    assert err.value.code == code, err.value.message
    return err.value


def store_bytes(data_dir: Path) -> bytes:
    return b"".join(f.read_bytes() for f in sorted(data_dir.rglob("*")) if f.is_file())


def purges(data_dir: Path) -> list[dict]:
    files = list(data_dir.glob("projects/*/purges/intent.jsonl"))
    return [json.loads(line) for f in files for line in f.read_text().splitlines()]


def purge(it: Intent, target: str, ident: str, request_id: str | None = None):
    return it.run(p.IntentPurge(target=target, id=ident, confirm=True), request_id)


def fresh(data_dir: Path, root: Path) -> Intent:
    intent = Intent(Service(data_dir=data_dir, clock=FixedClock("2026-01-03T00:00:00Z"), new_id=SequentialIds(9),
                            domains=[DOMAIN]), root)
    intent.n = 500
    return intent


def test_purging_a_claim_removes_its_content_and_id_everywhere(it: Intent, data_dir, root):
    task = it.start(user_claim("Keep the API stable"))
    doomed = it.add(task, DOOMED)
    it.add(task, "Release on Monday")
    old_hashes = {e["event_hash"] for e in ledger_events(data_dir)}
    outcome = purge(it, "claim", doomed)
    assert outcome.events == [] and not outcome.replayed
    data = store_bytes(data_dir)
    assert DOOMED.encode() not in data and doomed.encode() not in data
    events = ledger_events(data_dir)
    assert [e["sequence"] for e in events] == [1, 2]
    assert events[0]["prev_hash"] is None and events[1]["prev_hash"] == events[0]["event_hash"]
    assert outcome.head.sequence == 2 and outcome.head.hash == events[-1]["event_hash"]
    record, done = purges(data_dir)
    assert record["old_head_sequence"] == 3 and record["state"] == "prepared"
    assert record["removed_events"] == 1 and record["removed_claims"] == 1 and record["target"] == "claim"
    assert set(record) == {
        "schema_version", "state", "purged_at", "target", "removed_events", "rewritten_events", "kept_events",
        "removed_claims", "removed_candidates", "old_head_sequence", "new_head_sequence", "new_head_hash", "request_digest",
    }
    assert done == {"state": "done", "request_digest": record["request_digest"]}
    # No hash of the old chain is left anywhere in the store (each covers what was purged).
    assert not any(h.encode() in data for h in old_hashes - {e["event_hash"] for e in events})
    # Every view agrees, in this process and in a new one that verifies the re-chained file from scratch.
    assert {c.statement for c in it.audit(task).claims} == {"Keep the API stable", "Release on Monday"}
    assert {c.statement for c in fresh(data_dir, root).audit(task).claims} == {"Keep the API stable", "Release on Monday"}


def test_a_purge_needs_the_users_confirmation(it: Intent):
    task = it.start()
    claim = it.add(task, DOOMED)
    refused(lambda: it.run(p.IntentPurge(target="claim", id=claim)), ErrorCode.RULE_VIOLATION)
    refused(lambda: it.run(p.IntentPurge(target="claim", id=claim, confirm=True, actor="agent")), ErrorCode.RULE_VIOLATION)
    refused(lambda: purge(it, "claim", "00000000-0000-4000-8000-0000000000ff"), ErrorCode.NOT_FOUND)
    assert claim in it.active_ids(task)


def test_purging_a_task_removes_all_its_events_and_leaves_others(it: Intent, data_dir):
    keep = it.start(user_claim("other task stays"))
    doomed_task = it.start(user_claim(DOOMED), label="doomed label")
    it.add(doomed_task, "more doomed content")
    it.run(p.IntentCandidateAdd(task_id=doomed_task, statement="doomed signal", facets=["outcome"], actor="agent"))
    purge(it, "task", doomed_task)
    data = store_bytes(data_dir)
    for needle in (DOOMED, "doomed label", "more doomed content", "doomed signal", doomed_task):
        assert needle.encode() not in data
    assert [t.task_id for t in it.ask(p.IntentTasks())] == [keep]
    assert it.ask(p.IntentCandidates()) == []
    assert purges(data_dir)[0]["removed_events"] == 3


def test_purging_a_superseding_claim_does_not_revive_what_it_replaced(it: Intent):
    task = it.start()
    old = it.add(task, "Prefer tabs")
    new = it.replace(task, [old], DOOMED)
    purge(it, "claim", new)
    (view,) = it.audit(task).claims
    assert view.claim_id == old and view.state == "invalidated"
    assert view.invalidation_reason == "the superseding claim was purged"
    assert it.audit(task).edges == []


def test_purging_a_superseded_claim_keeps_its_replacement_active(it: Intent):
    task = it.start()
    old = it.add(task, DOOMED)
    new = it.replace(task, [old], "Prefer spaces")
    purge(it, "claim", old)
    (view,) = it.audit(task).claims
    assert view.claim_id == new and view.state == "active" and view.supersedes == []


def test_purging_an_initial_claim_and_an_imported_claim(it: Intent, data_dir):
    task = it.start(user_claim(DOOMED), user_claim("stays"))
    it.run(p.IntentImport(graph=it.ask(p.IntentExport(task_id=task))))
    imported = [c for c in it.audit().claims if c.imported and c.statement == DOOMED][0]
    initial = [c for c in it.audit(task).claims if c.statement == DOOMED][0]
    purge(it, "claim", initial.claim_id)
    purge(it, "claim", imported.claim_id)
    assert DOOMED.encode() not in store_bytes(data_dir)
    assert sorted(c.statement for c in it.audit().claims) == ["stays", "stays"]


def test_purge_scrubs_quarantine_hashes_and_drops_the_checkpoint(it: Intent, svc, data_dir, root):
    task = it.start()
    claim = it.add(task, DOOMED)
    project = svc.project(str(root))
    ledger_file = project.dir / "streams" / "intent.jsonl"
    with open(ledger_file, "ab") as handle:  # a crash mid-append left half a line holding the text
        handle.write(b'{"payload":"' + DOOMED.encode())
    it.add(task, "next mutation quarantines the torn tail")
    quarantine_file = project.dir / "quarantine" / "intent.jsonl"
    assert "sha256" in quarantine_file.read_text()
    folded = svc.folded(project, DOMAIN, "intent")
    checkpoint.save(folded.ledger.stream, folded.ledger._last_line_start)
    assert checkpoint.path_for(folded.ledger.stream).exists()
    purge(it, "claim", claim)
    entries = [json.loads(line) for line in quarantine_file.read_text().splitlines()]
    assert entries and all("sha256" not in e and "offset" not in e and e["scrubbed_by_purge"] for e in entries)
    assert not checkpoint.path_for(folded.ledger.stream).exists()
    assert fresh(data_dir, root).audit(task).claims[0].statement == "next mutation quarantines the torn tail"


def test_an_exact_retry_of_a_purge_is_replayed(it: Intent, data_dir):
    task = it.start()
    claim = it.add(task, DOOMED)
    purge(it, "claim", claim, "purge-1")
    again = purge(it, "claim", claim, "purge-1")
    assert again.replayed and len(purges(data_dir)) == 2  # one purge: its record and its done mark


def test_a_purge_request_id_reused_for_another_target_is_refused_not_replayed(it: Intent, data_dir):
    task = it.start()
    first = it.add(task, DOOMED)
    second = it.add(task, "Also delete this later")
    purge(it, "claim", first, "purge-1")
    error = refused(lambda: purge(it, "claim", second, "purge-1"), ErrorCode.REQUEST_ID_REUSED)
    assert "new request id" in error.message
    assert second in it.active_ids(task) and len(purges(data_dir)) == 2
    purge(it, "claim", second, "purge-2")
    assert second not in it.active_ids(task)
    refused(lambda: it.run(p.IntentClaimAdd(task_id=task, claim=user_claim("reuses a purge id")), "purge-2"),
            ErrorCode.REQUEST_ID_REUSED)


def test_another_process_notices_the_rewrite_and_folds_again(it: Intent, data_dir, root):
    task = it.start()
    claim = it.add(task, DOOMED)
    other = fresh(data_dir, root)
    assert claim in other.active_ids(task)
    purge(it, "claim", claim)
    assert claim not in other.active_ids(task)
    assert other.add(task, "appends after the rewrite")
    assert [e["sequence"] for e in ledger_events(data_dir)] == [1, 2]


def test_subscribers_hear_the_purge(it: Intent, svc):
    task = it.start()
    claim = it.add(task, DOOMED)
    heard = []
    svc.add_listener(lambda project, stream, news: heard.append([r.event["sequence"] for r in news.records]))
    purge(it, "claim", claim)
    assert heard == [[1]]


def test_a_request_whose_event_was_rewritten_cannot_be_replayed_into_purged_content(it: Intent):
    command = p.IntentTaskStart(initial_claims=[user_claim(DOOMED), user_claim("kept")])
    task = it.run(command, "start").events[0]["task_id"]
    doomed = [c.claim_id for c in it.audit(task).claims if c.statement == DOOMED][0]
    purge(it, "claim", doomed)
    refused(lambda: it.run(command, "start"), ErrorCode.REQUEST_ID_REUSED)


def test_purging_a_private_task_or_claim_clears_memory_and_control(it: Intent, data_dir):
    task = it.run(p.IntentTaskStart(mode="private", host_session_id="sess-A",
                                    initial_claims=[user_claim(DOOMED)])).events[0]["task_id"]
    claim = it.add(task, "private but purged")
    purge(it, "claim", claim)
    assert {c.statement for c in it.audit(task).claims} == {DOOMED}
    purge(it, "task", task)
    assert list(data_dir.glob("projects/*/private-sessions/*.json")) == []
    refused(lambda: it.snapshot(task), ErrorCode.NOT_FOUND)


def test_purging_a_candidate_by_id(it: Intent, data_dir):
    task = it.start()
    event = it.run(p.IntentCandidateAdd(task_id=task, statement=DOOMED, facets=["outcome"], actor="agent")).events[0]
    purge(it, "claim", event["payload"]["candidate_id"])
    assert it.ask(p.IntentCandidates()) == [] and DOOMED.encode() not in store_bytes(data_dir)
    assert purges(data_dir)[0]["removed_candidates"] == 1


def test_purging_a_task_keeps_what_it_did_to_other_tasks_claims(it: Intent, data_dir):
    first = it.start()
    rule = it.add(first, "Use black", scope="project")
    dropped = it.add(first, "Support Python 3.8", scope="project")
    second = it.start()
    it.replace(second, [rule], DOOMED, scope="project")
    it.run(p.IntentClaimInvalidate(task_id=second, claim_id=dropped, reason=DOOMED))
    purge(it, "task", second)
    states = {c.claim_id: (c.state, c.invalidation_reason, c.task_id) for c in it.audit().claims}
    assert states == {
        rule: ("invalidated", "the superseding claim was purged", first),
        dropped: ("invalidated", "invalidated from a purged task", first),
    }
    assert DOOMED.encode() not in store_bytes(data_dir) and second.encode() not in store_bytes(data_dir)


@pytest.mark.parametrize("which", ["reviewed", "original"])
def test_purging_a_reviewed_claim_removes_every_copy_of_its_statement(it: Intent, data_dir, which):
    task = it.start()
    keep = it.add(task, "Release on Monday")
    original = it.add(task, DOOMED)
    reviewed = it.run(p.IntentClaimConfirm(task_id=task, claim_id=original)).events[0]["payload"]["claim"]["claim_id"]
    purge(it, "claim", reviewed if which == "reviewed" else original)
    data = store_bytes(data_dir)
    for needle in (DOOMED, original, reviewed):
        assert needle.encode() not in data
    assert [c.claim_id for c in it.audit(task).claims] == [keep]
    assert purges(data_dir)[0]["removed_claims"] == 2


def test_purging_a_reviewed_private_claim_forgets_every_copy_in_memory(it: Intent):
    task = it.run(p.IntentTaskStart(mode="private", host_session_id="sess-R")).events[0]["task_id"]
    original = it.add(task, DOOMED)
    reviewed = it.run(p.IntentClaimConfirm(task_id=task, claim_id=original)).events[0]["payload"]["claim"]["claim_id"]
    purge(it, "claim", original)
    assert {c.claim_id for c in it.audit(task).claims} & {original, reviewed} == set()


def test_a_purge_accepts_the_id_in_upper_case(it: Intent, data_dir):
    task = it.start()
    claim = it.add(task, DOOMED)
    purge(it, "claim", claim.upper())
    assert DOOMED.encode() not in store_bytes(data_dir)


def test_a_purge_leaves_no_projection_snapshot_of_what_it_removed(it: Intent, svc, data_dir, root):
    task = it.start(user_claim("Keep the API stable"))
    doomed = it.add(task, DOOMED)
    ((_, written),) = svc.compact(str(root))  # a snapshot holding the doomed claim, at the head
    assert written and DOOMED.encode() in store_bytes(data_dir)
    purge(it, "claim", doomed)
    data = store_bytes(data_dir)
    assert DOOMED.encode() not in data and doomed.encode() not in data
    assert {c.statement for c in fresh(data_dir, root).audit(task).claims} == {"Keep the API stable"}
