"""Export and validated import: fresh ids, explicit_import provenance, relations and disputes intact."""

from __future__ import annotations

import copy

import pytest

from intentkit import Intent, user_claim
from loopstate.core.errors import LoopstateError
from loopstate_protocol import intent as p
from loopstate_protocol.errors import ErrorCode

pytestmark = pytest.mark.both_stores  # docs/storage.md, *Which tests run on PostgreSQL*


def refused(call, code: ErrorCode = ErrorCode.VALIDATION_FAILED) -> LoopstateError:
    with pytest.raises(LoopstateError) as err:
        call()
    assert err.value.code == code, err.value.message
    return err.value


def rich_graph(it: Intent) -> tuple[str, dict[str, str]]:
    """A task with explicit, inferred, evidence, disputed, invalidated and superseded claims."""
    task = it.start(user_claim("Keep latency under 50 ms", "hard_constraint"), label="perf")
    ids = {
        "explicit": it.add(task, "Ship the cache behind a flag", facets=("outcome",)),
        "inferred": it.add(task, "wants minimal dependencies", actor="agent", status="inferred", confidence=0.65,
                           facets=("soft_constraint",)),
        "evidence": it.add(task, "p99 is 70 ms today", actor="evidence", status="evidence", facets=("result_feedback",),
                           source=p.SourceInput(kind="tool_result", event_id="bench-1")),
        "disputed": it.add(task, "Redis is required", status="disputed", facets=("disagreement",)),
        "invalidated": it.add(task, "Target Python 3.9"),
        "superseded": it.add(task, "Use LRU eviction", facets=("tradeoff",)),
    }
    it.run(p.IntentClaimInvalidate(task_id=task, claim_id=ids["invalidated"], reason="3.11 only"))
    ids["replacement"] = it.replace(task, [ids["superseded"]], "Use LFU eviction", facets=("tradeoff",))
    return task, ids


def test_export_then_import_keeps_provenance_relations_and_the_open_dispute(it: Intent, svc, tmp_path):
    task, ids = rich_graph(it)
    graph = it.ask(p.IntentExport(task_id=task))
    assert graph["format"] == "loopstate-intent-graph" and len(graph["claims"]) == 8
    other_root = tmp_path / "other"
    other_root.mkdir()
    other = Intent(svc, other_root)
    event = other.run(p.IntentImport(graph=graph)).events[0]
    assert event["event_type"] == "graph_imported" and event["payload"]["history_incomplete"] is True
    (new_task,) = other.ask(p.IntentTasks())
    assert new_task.task_id != task and new_task.history_incomplete and new_task.label == "perf"
    audit = {c.statement: c for c in other.audit(new_task.task_id).claims}
    original = {c.statement: c for c in it.audit(task).claims}
    assert set(audit) == set(original)
    for statement, claim in audit.items():
        before = original[statement]
        assert claim.claim_id != before.claim_id  # fresh ids
        assert (claim.role, claim.epistemic_status, claim.scope, claim.facets, claim.confidence, claim.state) == (
            before.role, before.epistemic_status, before.scope, before.facets, before.confidence, before.state)
        assert claim.source_ref.kind == "explicit_import" and claim.source_ref.event_id is None
        assert len(claim.source_ref.sha256) == 64 and not claim.direct_user and claim.imported
    # Relations: the supersession edge, mapped to the new ids.
    new_edges = [(e.new, e.old) for e in other.audit(new_task.task_id).edges]
    assert new_edges == [(audit["Use LFU eviction"].claim_id, audit["Use LRU eviction"].claim_id)]
    assert audit["Target Python 3.9"].invalidation_reason == "3.11 only"
    # The open dispute is still open and first-class.
    view = other.snapshot(new_task.task_id)
    assert [d.statement for d in view.disagreements] == ["Redis is required"]
    assert audit["wants minimal dependencies"].confidence == 0.65
    # Source identities survive only inside provenance hashes.
    assert "bench-1" not in str(other.ask(p.IntentExport()))


def test_a_re_export_of_an_import_imports_again(it: Intent):
    _, _ = rich_graph(it)
    it.run(p.IntentImport(graph=it.ask(p.IntentExport())))
    again = it.ask(p.IntentExport())
    assert len(again["tasks"]) == 2 and len(again["claims"]) == 16
    it.run(p.IntentImport(graph=again))
    assert len(it.ask(p.IntentTasks())) == 4


def test_imported_claims_cannot_displace_the_users_explicit_claims(it: Intent):
    task, ids = rich_graph(it)
    it.run(p.IntentImport(graph=it.ask(p.IntentExport(task_id=task))))
    imported_task = [t.task_id for t in it.ask(p.IntentTasks()) if t.history_incomplete][0]
    imported_ids = [c.claim_id for c in it.audit(imported_task).claims if c.state == "active"]
    assert ids["explicit"] in it.active_ids(task)
    # Only the user's direct event may supersede an imported user-explicit claim, as any other.
    imported_explicit = [c for c in it.audit(imported_task).claims if c.statement == "Ship the cache behind a flag"][0]
    refused(lambda: it.replace(imported_task, [imported_explicit.claim_id], "agent edit", actor="agent", status="inferred",
                               confidence=0.9), ErrorCode.RULE_VIOLATION)
    assert imported_explicit.claim_id in imported_ids


@pytest.fixture
def graph(it: Intent) -> dict:
    task, _ = rich_graph(it)
    return it.ask(p.IntentExport(task_id=task))


def mutate(graph: dict, change) -> dict:
    bad = copy.deepcopy(graph)
    change(bad)
    return bad


def claim_by(graph: dict, statement: str) -> dict:
    return next(c for c in graph["claims"] if c["statement"] == statement)


@pytest.mark.parametrize("name,change", [
    ("wrong format", lambda g: g.update(format="other")),
    ("no task", lambda g: g.update(tasks=[])),
    ("non-utc timestamp", lambda g: claim_by(g, "Target Python 3.9").update(valid_from="2026-01-01T00:00:00+01:00")),
    ("bad timestamp", lambda g: g["tasks"][0].update(started_at="soon")),
    ("duplicate claim id", lambda g: g["claims"][1].update(claim_id=g["claims"][0]["claim_id"])),
    ("claim id equals task id", lambda g: g["claims"][0].update(claim_id=g["tasks"][0]["task_id"])),
    ("dangling task", lambda g: g["claims"][0].update(task_id="00000000-0000-4000-8000-0000000000ff")),
    ("dangling supersedes", lambda g: claim_by(g, "Use LFU eviction").update(supersedes=["00000000-0000-4000-8000-0000000000ff"])),
    ("explicit evidence", lambda g: claim_by(g, "p99 is 70 ms today").update(epistemic_status="explicit")),
    ("user inferred", lambda g: claim_by(g, "Ship the cache behind a flag").update(epistemic_status="inferred", confidence=0.5)),
    ("inferred without confidence", lambda g: claim_by(g, "wants minimal dependencies").pop("confidence")),
    ("confidence on explicit", lambda g: claim_by(g, "Ship the cache behind a flag").update(confidence=1.0)),
    ("private task", lambda g: g["tasks"][0].update(mode="private")),
    ("no facets", lambda g: claim_by(g, "Ship the cache behind a flag").update(facets=[])),
    ("superseded without superseder", lambda g: claim_by(g, "Use LFU eviction").update(supersedes=[])),
    ("supersession against time", lambda g: claim_by(g, "Use LRU eviction").update(valid_from="2027-01-01T00:00:00Z")),
    ("transcript path", lambda g: claim_by(g, "Ship the cache behind a flag").update(statement="see ~/.codex/sessions/a.jsonl")),
    ("bad source", lambda g: claim_by(g, "Ship the cache behind a flag").update(source_ref={"kind": "rumour"})),
])
def test_invalid_imports_are_refused_and_write_nothing(it: Intent, graph, name, change):
    before = it.audit().sequence
    refused(lambda: it.run(p.IntentImport(graph=mutate(graph, change))))
    assert it.audit().sequence == before, name


def test_a_supersession_cycle_is_refused(it: Intent, graph):
    def cycle(g):
        lfu, lru = claim_by(g, "Use LFU eviction"), claim_by(g, "Use LRU eviction")
        lru["supersedes"] = [lfu["claim_id"]]
        lru["lifecycle"] = {"state": "superseded"}
        lfu["lifecycle"] = {"state": "superseded"}
    error = refused(lambda: it.run(p.IntentImport(graph=mutate(graph, cycle))))
    assert "cycle" in error.message


def test_an_oversized_import_is_refused(it: Intent, graph):
    filler = claim_by(graph, "Ship the cache behind a flag")
    big = mutate(graph, lambda g: g["claims"].extend(
        {**filler, "claim_id": f"00000000-0000-4000-8000-{i:012d}"} for i in range(1, 5002)))
    error = refused(lambda: it.run(p.IntentImport(graph=big)))
    assert "at most" in error.message


def test_only_the_user_imports(it: Intent, graph):
    refused(lambda: it.run(p.IntentImport(graph=graph, actor="agent")), ErrorCode.RULE_VIOLATION)


def _two_claim_graph(it: Intent) -> dict:
    task = it.start(user_claim("first"))
    first = it.add(task, "second")
    it.replace(task, [first], "third")
    return it.ask(p.IntentExport(task_id=task))


def test_import_compares_supersession_times_as_instants(it: Intent):
    graph = _two_claim_graph(it)
    old = next(c for c in graph["claims"] if c["lifecycle"]["state"] == "superseded")
    new = next(c for c in graph["claims"] if c["supersedes"])
    old["valid_from"], new["valid_from"] = "2026-01-01T00:00:00.500000Z", "2026-01-01T00:00:00Z"
    err = refused(lambda: it.run(p.IntentImport(graph=graph)))
    assert "supersession must follow time" in err.message


def test_import_refuses_explicit_intent_whose_source_was_a_tool_result(it: Intent):
    graph = _two_claim_graph(it)
    graph["claims"][0]["source_ref"] = {"kind": "tool_result", "event_id": "tool-7"}
    err = refused(lambda: it.run(p.IntentImport(graph=graph)))
    assert "tool_result" in err.message and graph["claims"][0]["claim_id"] in err.message


def test_import_refuses_a_lifecycle_that_names_another_superseder(it: Intent):
    graph = _two_claim_graph(it)
    old = next(c for c in graph["claims"] if c["lifecycle"]["state"] == "superseded")
    old["lifecycle"]["superseded_by"] = graph["claims"][0]["claim_id"]
    err = refused(lambda: it.run(p.IntentImport(graph=graph)))
    assert "superseded_by" in err.message


def test_import_refuses_a_non_utc_export_time(it: Intent):
    graph = _two_claim_graph(it)
    graph["exported_at"] = "2026-01-01T00:00:00+02:00"
    assert refused(lambda: it.run(p.IntentImport(graph=graph))).details["field"] == "exported_at"


def test_import_field_refusals_name_the_claim_that_broke_them(it: Intent):
    graph = _two_claim_graph(it)
    victim = graph["claims"][1]
    for field, value, words in (("confidence", 0.4, "confidence"), ("facets", [], "facets"), ("statement", "x" * 501, "500")):
        bad = copy.deepcopy(graph)
        bad["claims"][1][field] = value
        err = refused(lambda: it.run(p.IntentImport(graph=bad)))
        assert victim["claim_id"] in err.message and words in err.message


def test_a_one_task_export_whose_claim_was_superseded_from_another_task_imports(it: Intent):
    first = it.start()
    rule = it.add(first, "Use tabs everywhere", scope="project", facets=("soft_constraint",))
    second = it.start()
    it.replace(second, [rule], "Use spaces everywhere", scope="project", facets=("soft_constraint",))
    graph = it.ask(p.IntentExport(task_id=first))
    (claim,) = graph["claims"]
    assert claim["lifecycle"]["state"] == "invalidated" and "outside this export" in claim["lifecycle"]["reason"]
    event = it.run(p.IntentImport(graph=graph)).events[0]
    assert event["payload"]["claims"][0]["lifecycle"]["state"] == "invalidated"


@pytest.mark.parametrize("source_ref,words", [
    ({"kind": "user_event", "sha256": "not-a-digest"}, "64 lower-case hex"),
    ({"kind": "user_event", "event_id": "/home/me/.codex/sessions/rollout.jsonl"}, "path"),
    ({"kind": "user_event", "event_id": 5}, "opaque event id"),
])
def test_import_validates_the_original_source_identity(it: Intent, source_ref, words):
    graph = _two_claim_graph(it)
    graph["claims"][0]["source_ref"] = source_ref
    assert words in refused(lambda: it.run(p.IntentImport(graph=graph))).message


def test_import_version_must_be_the_integer_1(it: Intent):
    graph = _two_claim_graph(it)
    graph["version"] = True  # equal to 1 in Python, but not the format's version
    assert "version 1" in refused(lambda: it.run(p.IntentImport(graph=graph))).message
