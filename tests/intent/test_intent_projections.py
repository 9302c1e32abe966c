"""Projections: current view, audit view, compact handoff and hook context."""

from __future__ import annotations

import msgspec
import pytest

from intentkit import Intent, user_claim
from loopstate.core.errors import LoopstateError
from loopstate_protocol import intent as p
from loopstate_protocol.errors import ErrorCode


@pytest.fixture
def task(it: Intent) -> str:
    return it.start(
        user_claim("Never change the wire format", "hard_constraint"),
        user_claim("Green CI on main", "success_signal"),
    )


def test_current_view_groups_active_claims_by_facet_and_status(it: Intent, task):
    it.add(task, "wants it fast", actor="agent", status="inferred", confidence=0.6, facets=("outcome", "tradeoff"))
    it.add(task, "benchmarks show 2x", actor="evidence", status="evidence", facets=("result_feedback",),
           source=p.SourceInput(kind="tool_result", event_id="t1", excerpt="2x faster"))
    unknown = it.add(task, "Which Python versions?", actor="agent", status="unknown", facets=("unknown",))
    view = it.snapshot(task)
    assert list(view.by_facet) == ["outcome", "success_signal", "hard_constraint", "tradeoff", "unknown", "result_feedback"]
    assert [c.statement for c in view.by_facet["hard_constraint"]["explicit"]] == ["Never change the wire format"]
    assert view.by_facet["outcome"]["inferred"][0].confidence == 0.6
    assert [u.claim_id for u in view.unknowns] == [unknown]
    assert view.active_count == 5
    # Minimal sources: identities only, never excerpts.
    assert {s.kind for s in view.sources} == {"user_event", "agent_turn", "tool_result"}
    assert all(s.excerpt is None for s in view.sources)
    assert all(c.source_ref.excerpt is None for fs in view.by_facet.values() for cs in fs.values() for c in cs)


def test_invalidated_and_superseded_claims_appear_only_in_audit(it: Intent, task):
    a = it.add(task, "use redis")
    b = it.add(task, "use memcached")
    it.run(p.IntentClaimInvalidate(task_id=task, claim_id=a))
    c = it.replace(task, [b], "use no cache")
    assert {a, b}.isdisjoint(it.active_ids(task)) and c in it.active_ids(task)
    states = {v.claim_id: v.state for v in it.audit(task).claims}
    assert states[a] == "invalidated" and states[b] == "superseded" and states[c] == "active"


def test_project_view_without_task_id_lists_every_task(it: Intent, task):
    other = it.start(user_claim("other task"))
    view = it.snapshot()
    assert {t.task_id for t in view.tasks} == {task, other} and view.task_id is None


def test_compact_is_deterministic_and_capped_by_records_and_characters(it: Intent, task):
    for i in range(10):
        it.add(task, f"detail number {i:02d} " + "x" * 40, facets=("soft_constraint",))
    first = it.ask(p.IntentCompact(task_id=task, max_records=5, max_chars=10_000))
    again = it.ask(p.IntentCompact(task_id=task, max_records=5, max_chars=10_000))
    assert msgspec.json.encode(first) == msgspec.json.encode(again)
    assert len(first.items) == 5 and first.omitted == {"over_budget": 7}
    # The user's hard constraint and success signal come first.
    assert [i.facet for i in first.items[:2]] == ["hard_constraint", "success_signal"]
    small = it.ask(p.IntentCompact(task_id=task, max_records=50, max_chars=60))
    assert small.chars <= 60 and sum(small.omitted.values()) + len(small.items) == 12


def test_compact_never_drops_one_side_of_a_dispute_to_fit(it: Intent, task):
    it.add(task, "We must support Windows", status="disputed", facets=("disagreement",))
    it.add(task, "Windows support is out of scope", actor="agent", status="disputed", facets=("disagreement",))
    tight = it.ask(p.IntentCompact(task_id=task, max_records=1, max_chars=10_000))
    assert tight.omitted.get("disputes_over_budget") == 2 and tight.open_disputes == 2
    assert all(i.epistemic_status != "disputed" for i in tight.items)
    roomy = it.ask(p.IntentCompact(task_id=task, max_records=10, max_chars=10_000))
    assert sum(1 for i in roomy.items if i.epistemic_status == "disputed") == 2


def test_compact_refuses_nonsense_caps(it: Intent, task):
    with pytest.raises(LoopstateError) as err:
        it.ask(p.IntentCompact(task_id=task, max_records=0))
    assert err.value.code == ErrorCode.VALIDATION_FAILED


def test_hook_context_shows_only_direct_user_explicit_claims_as_text(it: Intent, task):
    it.add(task, "agent thinks speed matters", actor="agent", status="inferred", confidence=0.5)
    it.add(task, "logs show a timeout", actor="evidence", status="evidence")
    it.add(task, "Is ARM supported?", status="unknown", facets=("unknown",))
    it.add(task, "Tabs or spaces", status="disputed", facets=("disagreement",))
    it.add(task, "project wide: tabs", actor="system", status="evidence", scope="project")
    hook = it.ask(p.IntentHookContext(task_id=task))
    assert "Never change the wire format" in hook.text and "Green CI on main" in hook.text
    for hidden in ("speed", "timeout", "ARM", "Tabs or spaces", "project wide"):
        assert hidden not in hook.text
    assert hook.omitted == {"inferred": 1, "evidence": 2, "unknown": 1, "disputed": 1}
    assert hook.open_disputes == 1 and len(hook.claim_ids) == 2


def test_hook_context_budget_drops_whole_claims_and_counts_them(it: Intent, task):
    hook = it.ask(p.IntentHookContext(task_id=task, max_chars=110))
    assert len(hook.text) <= 110 and hook.omitted == {"over_budget": 1} and len(hook.claim_ids) == 1
    nothing = it.ask(p.IntentHookContext(task_id=task, max_chars=10))
    assert nothing.text == "" and nothing.omitted == {"over_budget": 2}


def test_hook_context_of_an_off_task_is_empty(it: Intent, task):
    it.run(p.IntentModeSet(task_id=task, mode="off"))
    hook = it.ask(p.IntentHookContext(task_id=task))
    assert hook.text == "" and hook.claim_ids == [] and hook.omitted == {"task_off": 2}


def test_imported_user_explicit_claims_are_only_counts_in_the_hook_context(it: Intent, task):
    graph = it.ask(p.IntentExport(task_id=task))
    it.run(p.IntentImport(graph=graph))
    imported = [t.task_id for t in it.ask(p.IntentTasks()) if t.history_incomplete][0]
    hook = it.ask(p.IntentHookContext(task_id=imported))
    assert hook.text == "" and hook.omitted == {"imported": 2}


def test_snapshot_view_is_what_a_subscriber_sees(it: Intent, svc, root, task):
    folded, view = svc.view(str(root), "intent", "snapshot", task)
    assert msgspec.json.encode(view) == msgspec.json.encode(it.snapshot(task))
    _, project_view = svc.view(str(root), "intent", "snapshot", None)
    assert project_view.task_id is None and folded.head().sequence == 1


def test_listeners_hear_each_change(svc, root, it: Intent):
    heard = []
    svc.add_listener(lambda project, stream, news: heard.append((stream, [r.event["event_type"] for r in news.records])))
    task = it.start()
    it.add(task, "one more")
    assert heard == [("intent", ["task_started"]), ("intent", ["claim_added"])]


def test_hook_context_text_is_every_direct_user_explicit_claim_whatever_its_facet(it: Intent, task):
    # The rule is by provenance and status: the user's own explicit words are text
    # (a stated disagreement too); unknown and disputed records are counts.
    it.add(task, "I disagree with the caching plan", facets=("disagreement",))
    it.add(task, "Caching is contested", status="disputed", facets=("disagreement",))
    it.add(task, "Deadline unknown", status="unknown", facets=("unknown",))
    hook = it.ask(p.IntentHookContext(task_id=task))
    assert "I disagree with the caching plan" in hook.text
    assert "contested" not in hook.text and "Deadline" not in hook.text
    assert hook.omitted == {"disputed": 1, "unknown": 1} and len(hook.claim_ids) == 3
    assert hook.open_disputes == 2


def test_compact_orders_claims_by_instant_not_by_text(it: Intent):
    task = it.start()
    late = it.add(task, "later", valid_from="2026-01-01T00:00:00.500000Z", facets=("tradeoff",))
    early = it.add(task, "earlier", valid_from="2026-01-01T00:00:00Z", facets=("tradeoff",))
    assert [i.claim_id for i in it.ask(p.IntentCompact(task_id=task)).items] == [early, late]


def test_compact_cap_refusals_name_the_cap_and_the_value(it: Intent, task):
    for kwargs, field in (({"max_records": 501}, "max_records"), ({"max_chars": 0}, "max_chars")):
        with pytest.raises(LoopstateError) as err:
            it.ask(p.IntentCompact(task_id=task, **kwargs))
        assert err.value.details["field"] == field and field in err.value.message
