"""Claims: every field rule of the seed's table, and the lifecycle protections."""

from __future__ import annotations

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


@pytest.fixture
def task(it: Intent) -> str:
    return it.start(label="claims")


# --- field rules ---------------------------------------------------------------


def test_claim_payload_has_every_field_of_the_seed(it: Intent, task):
    event = it.run(p.IntentClaimAdd(task_id=task, claim=user_claim("Ship by Friday", "outcome"))).events[0]
    claim = event["payload"]["claim"]
    assert set(claim) == {
        "claim_id", "statement", "role", "epistemic_status", "source_ref", "scope", "valid_from",
        "last_confirmed", "supersedes", "facets",
    }
    assert claim["scope"] == "task" and claim["last_confirmed"] is None and claim["supersedes"] == []
    assert claim["valid_from"] == "2026-01-01T00:00:00Z"


def test_statement_is_1_to_500_characters_after_redaction(it: Intent, task):
    assert it.add(task, "x" * 500)
    error = refused(lambda: it.add(task, "x" * 501))
    assert "at most 500" in error.message and error.details["field"] == "statement"
    refused(lambda: it.add(task, "   "))
    # The secret is replaced by a shorter mark, so the redacted text fits.
    long_secret = "ghp_" + "a" * 600
    claim_id = it.add(task, "the value " + long_secret)
    assert it.audit(task).claims[-1].claim_id == claim_id
    assert "[REDACTED:github_token]" in it.audit(task).claims[-1].statement
    # ...and a short secret whose mark is longer can push a statement over the limit.
    grows = "x" * 480 + " pwd=abc123"
    assert len(grows) <= 500
    error = refused(lambda: it.add(task, grows))
    assert "after redaction" in error.message and error.details["length"] > 500


def test_role_must_be_the_acting_party(it: Intent, task):
    claim = p.ClaimInput(statement="user said so", role="user", epistemic_status="explicit", facets=["outcome"])
    error = refused(lambda: it.run(p.IntentClaimAdd(task_id=task, actor="agent", claim=claim)), ErrorCode.RULE_VIOLATION)
    assert error.details["field"] == "role"


@pytest.mark.parametrize("actor,status", [
    ("agent", "explicit"), ("evidence", "explicit"), ("system", "explicit"), ("evidence", "inferred"),
    ("user", "inferred"), ("user", "evidence"), ("system", "disputed"),
])
def test_illegal_role_status_combinations_are_refused(it: Intent, task, actor, status):
    kw = {"confidence": 0.5} if status == "inferred" else {}
    refused(lambda: it.add(task, "a statement", actor=actor, status=status, **kw), ErrorCode.RULE_VIOLATION)


def test_confidence_is_present_exactly_when_inferred(it: Intent, task):
    assert it.add(task, "probably wants speed", actor="agent", status="inferred", confidence=0.7)
    refused(lambda: it.add(task, "no confidence", actor="agent", status="inferred"))
    refused(lambda: it.add(task, "too sure", actor="agent", status="inferred", confidence=1.5))
    refused(lambda: it.add(task, "sure", actor="agent", status="inferred", confidence=float("nan")))
    error = refused(lambda: it.add(task, "explicit with confidence", confidence=0.9))
    assert error.details["field"] == "confidence"


def test_facets_are_one_or_more_of_the_nine_without_repeats(it: Intent, task):
    assert it.add(task, "two facets", facets=("outcome", "tradeoff"))
    refused(lambda: it.add(task, "no facet", facets=()))
    refused(lambda: it.add(task, "bad facet", facets=("vibe",)))
    refused(lambda: it.add(task, "repeat", facets=("outcome", "outcome")))


def test_timestamps_must_be_utc(it: Intent, task):
    assert it.add(task, "dated", valid_from="2025-12-31T10:00:00Z", last_confirmed="2025-12-31T11:00:00Z")
    refused(lambda: it.add(task, "offset", valid_from="2025-12-31T10:00:00+02:00"))
    refused(lambda: it.add(task, "garbage", last_confirmed="yesterday"))


def test_long_term_scope_needs_a_direct_user_declaration(it: Intent, task):
    assert it.add(task, "Always use tabs in this repo", scope="long_term", facets=("hard_constraint",))
    refused(lambda: it.add(task, "user likes tabs", actor="agent", status="inferred", confidence=0.9, scope="long_term"),
            ErrorCode.RULE_VIOLATION)
    relayed = p.SourceInput(kind="user_event", event_id="evt-1")
    assert it.add(task, "project rule", scope="project", source=relayed)


def test_actor_must_cite_its_own_kind_of_source(it: Intent, task):
    tool = p.SourceInput(kind="tool_result", event_id="tool-1")
    refused(lambda: it.add(task, "from a tool", source=tool), ErrorCode.RULE_VIOLATION)
    agent = p.SourceInput(kind="user_event", event_id="u-1")
    refused(lambda: it.add(task, "agent claims a user event", actor="agent", status="evidence", source=agent),
            ErrorCode.RULE_VIOLATION)
    imported = p.SourceInput(kind="explicit_import", event_id="i-1")
    refused(lambda: it.add(task, "claims to be imported", source=imported), ErrorCode.RULE_VIOLATION)


# --- lifecycle -----------------------------------------------------------------------


def test_invalidate_makes_a_claim_inactive_but_auditable(it: Intent, task):
    claim = it.add(task, "use sqlite")
    event = it.run(p.IntentClaimInvalidate(task_id=task, claim_id=claim, reason="changed my mind")).events[0]
    assert event["event_type"] == "claim_invalidated" and event["payload"]["reason"] == "changed my mind"
    assert claim not in it.active_ids(task)
    (view,) = [c for c in it.audit(task).claims if c.claim_id == claim]
    assert view.state == "invalidated" and view.invalidation_reason == "changed my mind"
    refused(lambda: it.run(p.IntentClaimInvalidate(task_id=task, claim_id=claim)), ErrorCode.INVALID_TRANSITION)


def test_replaced_preference_shows_only_the_new_one_while_audit_keeps_both_and_the_edge(it: Intent, task):
    old = it.add(task, "Prefer tabs", facets=("soft_constraint",))
    new = it.replace(task, [old], "Prefer spaces", facets=("soft_constraint",))
    current = it.snapshot(task)
    statements = [c.statement for c in current.by_facet["soft_constraint"]["explicit"]]
    assert statements == ["Prefer spaces"]
    audit = it.audit(task)
    by_id = {c.claim_id: c for c in audit.claims}
    assert by_id[old].state == "superseded" and by_id[old].superseded_by == new
    assert by_id[new].state == "active" and by_id[new].supersedes == [old]
    assert [(e.new, e.old) for e in audit.edges] == [(new, old)]


def test_replace_is_one_event_with_the_new_claim_and_superseded_ids(it: Intent, task):
    a = it.add(task, "A")
    b = it.add(task, "B")
    outcome = it.run(p.IntentClaimReplace(task_id=task, supersedes=[a, b], claim=user_claim("A and B merged")))
    (event,) = outcome.events
    assert event["event_type"] == "claim_replaced"
    assert event["payload"]["superseded"] == [a, b] and event["payload"]["claim"]["supersedes"] == [a, b]


def test_replace_refuses_empty_repeated_unknown_or_inactive_targets(it: Intent, task):
    a = it.add(task, "A")
    refused(lambda: it.replace(task, [], "nothing"))
    refused(lambda: it.replace(task, [a, a], "twice"))
    refused(lambda: it.replace(task, ["00000000-0000-4000-8000-00000000ffff"], "ghost"), ErrorCode.NOT_FOUND)
    it.replace(task, [a], "A2")
    refused(lambda: it.replace(task, [a], "A3"), ErrorCode.INVALID_TRANSITION)


def test_replacement_cannot_predate_the_claim_it_supersedes(it: Intent, task):
    a = it.add(task, "A", valid_from="2025-12-01T00:00:00Z")
    refused(lambda: it.replace(task, [a], "earlier", valid_from="2025-11-01T00:00:00Z"))


@pytest.mark.parametrize("actor,status,source_kind", [
    ("agent", "inferred", None), ("agent", "evidence", None), ("evidence", "evidence", None), ("system", "evidence", None),
])
def test_user_explicit_claim_is_never_superseded_by_evidence_inference_or_system(it: Intent, task, actor, status, source_kind):
    explicit = it.add(task, "Use PostgreSQL", facets=("hard_constraint",))
    kw = {"confidence": 0.99} if status == "inferred" else {}
    error = refused(lambda: it.replace(task, [explicit], "Use MySQL instead", actor=actor, status=status, **kw),
                    ErrorCode.RULE_VIOLATION)
    assert "explicit statement" in error.message
    assert explicit in it.active_ids(task)


def test_user_explicit_claim_is_invalidated_only_from_a_direct_user_event(it: Intent, task):
    explicit = it.add(task, "Do not touch the schema", facets=("hard_constraint",))
    refused(lambda: it.run(p.IntentClaimInvalidate(task_id=task, claim_id=explicit, actor="agent")), ErrorCode.RULE_VIOLATION)
    refused(lambda: it.run(p.IntentClaimInvalidate(task_id=task, claim_id=explicit, actor="system")), ErrorCode.RULE_VIOLATION)
    it.run(p.IntentClaimInvalidate(task_id=task, claim_id=explicit, actor="user"))
    assert explicit not in it.active_ids(task)


def test_user_explicit_claim_is_not_displaced_by_a_user_unknown(it: Intent, task):
    explicit = it.add(task, "Deploy to eu-west-1")
    refused(lambda: it.replace(task, [explicit], "Not sure about the region", status="unknown"), ErrorCode.RULE_VIOLATION)
    assert it.replace(task, [explicit], "Deploy to us-east-1")


def test_unknown_and_disputed_are_never_merged_with_an_inference(it: Intent, task):
    unknown = it.add(task, "Which database?", actor="agent", status="unknown", facets=("unknown",))
    refused(lambda: it.replace(task, [unknown], "Probably PostgreSQL", actor="agent", status="inferred", confidence=0.8),
            ErrorCode.RULE_VIOLATION)
    disputed = it.add(task, "Caching is needed", status="disputed", facets=("disagreement",))
    refused(lambda: it.replace(task, [disputed], "agent settles it", actor="agent", status="inferred", confidence=0.9),
            ErrorCode.RULE_VIOLATION)
    # evidence may answer an unknown
    assert it.replace(task, [unknown], "The config names PostgreSQL", actor="evidence", status="evidence")


def test_disputes_stay_open_until_the_user_resolves_them(it: Intent, task):
    disputed = it.add(task, "We need a cache", actor="agent", status="disputed", facets=("disagreement",))
    view = it.snapshot(task)
    assert [d.claim_id for d in view.disagreements] == [disputed]
    refused(lambda: it.run(p.IntentClaimInvalidate(task_id=task, claim_id=disputed, actor="agent")), ErrorCode.RULE_VIOLATION)
    refused(lambda: it.replace(task, [disputed], "evidence says no cache", actor="evidence", status="evidence"),
            ErrorCode.RULE_VIOLATION)
    assert [d.claim_id for d in it.snapshot(task).disagreements] == [disputed]
    it.replace(task, [disputed], "No cache for now", facets=("soft_constraint",))
    assert it.snapshot(task).disagreements == []


def test_claim_confirm_reissues_with_last_confirmed_and_needs_the_user(it: Intent, task, clock):
    claim = it.add(task, "Prefer small PRs", facets=("soft_constraint",))
    refused(lambda: it.run(p.IntentClaimConfirm(task_id=task, claim_id=claim, actor="agent")), ErrorCode.RULE_VIOLATION)
    clock.advance(3600)
    event = it.run(p.IntentClaimConfirm(task_id=task, claim_id=claim)).events[0]
    assert event["event_type"] == "claim_replaced" and event["payload"]["confirmation"] is True
    assert event["payload"]["claim"]["last_confirmed"] == "2026-01-01T01:00:00Z"
    assert event["payload"]["claim"]["statement"] == "Prefer small PRs"


def test_claims_in_other_tasks_of_the_project_can_be_superseded(it: Intent):
    first = it.start()
    rule = it.add(first, "Use black for formatting", scope="project")
    second = it.start()
    new = it.replace(second, [rule], "Use ruff format", scope="project")
    assert rule not in it.active_ids() and new in it.active_ids()
    assert new in it.active_ids(first)  # project-scope claims show in every task's view


def test_a_task_scoped_claim_is_displaced_only_from_its_own_task(it: Intent):
    first = it.start()
    mine = it.add(first, "Use tabs in this task")
    second = it.start()
    for call in (lambda: it.replace(second, [mine], "Use spaces"),
                 lambda: it.run(p.IntentClaimInvalidate(task_id=second, claim_id=mine)),
                 lambda: it.run(p.IntentClaimConfirm(task_id=second, claim_id=mine))):
        error = refused(call, ErrorCode.RULE_VIOLATION)
        assert first in error.message and "from that task" in error.message
    assert mine in it.active_ids(first)
    assert it.replace(first, [mine], "Use spaces")


def test_timestamps_must_be_rfc3339_date_times_not_other_iso_forms(it: Intent, task):
    for bad in ("20260101T000000Z", "2026-01-01Z", "2026-01-01 00:00:00Z", "2026-01-01T00:00Z"):
        err = refused(lambda: it.add(task, "dated", valid_from=bad))
        assert bad in err.message and "RFC 3339" in err.message
    claim = it.add(task, "fraction", valid_from="2026-01-01T00:00:00.250Z")
    assert {c.claim_id: c.valid_from for c in it.audit(task).claims}[claim] == "2026-01-01T00:00:00.250000Z"


def test_a_replacement_earlier_by_a_fraction_of_a_second_is_refused(it: Intent, task):
    # "...00Z" sorts after "...00.500000Z" as text; the rule compares instants.
    old = it.add(task, "later claim", valid_from="2026-01-01T00:00:00.500000Z")
    err = refused(lambda: it.replace(task, [old], "earlier replacement", valid_from="2026-01-01T00:00:00Z"))
    assert err.details["field"] == "valid_from"


def test_a_malformed_superseded_id_is_named_as_supersedes(it: Intent, task):
    err = refused(lambda: it.replace(task, ["not-a-uuid"], "new"))
    assert err.details["field"] == "supersedes" and "not-a-uuid" in err.message


def test_an_empty_label_says_what_a_label_needs(it: Intent):
    err = refused(lambda: it.start(label="   "))
    assert err.message.startswith("label:") and "claim" not in err.message and "200" in err.message
