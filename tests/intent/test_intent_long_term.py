"""Long-term memory: direct declarations, candidates across three tasks, confirmation, 90-day staleness."""

from __future__ import annotations

import pytest

from intentkit import Intent
from loopstate.core.errors import LoopstateError
from loopstate_protocol import intent as p
from loopstate_protocol.errors import ErrorCode

DAY = 86400


def refused(call, code: ErrorCode) -> LoopstateError:
    with pytest.raises(LoopstateError) as err:
        call()
    assert err.value.code == code, err.value.message
    return err.value


def signal(it: Intent, task: str, text: str = "Prefers pnpm over npm") -> str:
    event = it.run(p.IntentCandidateAdd(task_id=task, statement=text, facets=["soft_constraint"], actor="agent")).events[0]
    return event["payload"]["signal_key"]


def promote(it: Intent, task: str, key: str, confirmation: str = "explicit", actor: str = "user"):
    return it.run(p.IntentCandidatePromote(task_id=task, signal_key=key, confirmation=confirmation, confidence=0.8, actor=actor))


def test_direct_user_declaration_makes_a_long_term_explicit_claim(it: Intent):
    task = it.start()
    claim = it.add(task, "Always write commit messages in English", scope="long_term", facets=("hard_constraint",))
    other = it.start()
    (view,) = [c for c in it.audit(task).claims if c.claim_id == claim]
    assert view.scope == "long_term" and view.epistemic_status == "explicit"
    assert claim in it.active_ids(other)  # long-term claims reach later tasks


def test_a_signal_needs_three_distinct_tasks(it: Intent):
    first = it.start()
    key = signal(it, first)
    assert signal(it, first, "prefers   PNPM over npm") == key  # case and spacing do not split a signal
    second = it.start()
    signal(it, second)
    error = refused(lambda: promote(it, second, key), ErrorCode.RULE_VIOLATION)
    assert error.details["distinct_tasks"] == 2
    groups = it.ask(p.IntentCandidates())
    assert groups[0].distinct_tasks == 2 and not groups[0].promotable


@pytest.mark.parametrize("confirmation", ["acceptance", "silence", "single_choice"])
def test_acceptance_silence_and_a_single_choice_never_confirm(it: Intent, confirmation):
    tasks = [it.start() for _ in range(3)]
    key = [signal(it, t) for t in tasks][0]
    refused(lambda: promote(it, tasks[2], key, confirmation), ErrorCode.RULE_VIOLATION)
    assert not [c for c in it.audit().claims if c.scope == "long_term"]


def test_only_the_user_confirms_a_candidate(it: Intent):
    tasks = [it.start() for _ in range(3)]
    key = [signal(it, t) for t in tasks][0]
    refused(lambda: promote(it, tasks[2], key, actor="agent"), ErrorCode.RULE_VIOLATION)


def test_explicit_confirmation_after_three_tasks_promotes_once(it: Intent):
    tasks = [it.start() for _ in range(3)]
    key = [signal(it, t) for t in tasks][0]
    assert it.ask(p.IntentCandidates())[0].promotable
    event = promote(it, tasks[2], key).events[0]
    claim = event["payload"]["claim"]
    assert event["event_type"] == "claim_added" and claim["scope"] == "long_term"
    assert claim["epistemic_status"] == "inferred" and claim["last_confirmed"] == "2026-01-01T00:00:00Z"
    assert event["payload"]["promoted_from"]["distinct_tasks"] == 3
    assert it.ask(p.IntentCandidates())[0].promoted
    refused(lambda: promote(it, tasks[2], key), ErrorCode.CONFLICT)
    refused(lambda: promote(it, tasks[2], "0" * 64), ErrorCode.NOT_FOUND)


def test_unconfirmed_inferred_long_term_record_goes_stale_after_90_days(it: Intent, clock):
    tasks = [it.start() for _ in range(3)]
    key = [signal(it, t) for t in tasks][0]
    claim = promote(it, tasks[2], key).events[0]["payload"]["claim"]["claim_id"]
    explicit = it.add(tasks[2], "Never push to main", scope="long_term", facets=("hard_constraint",))
    clock.advance(89 * DAY)
    assert it.snapshot(tasks[2]).stale == []
    clock.advance(1 * DAY)
    view = it.snapshot(tasks[2])
    assert [(w.claim_id, w.days_unconfirmed) for w in view.stale] == [(claim, 90)]
    compact = it.ask(p.IntentCompact(task_id=tasks[2]))
    assert claim not in [i.claim_id for i in compact.items] and compact.omitted == {"stale_long_term": 1}
    assert explicit in [i.claim_id for i in compact.items]  # explicit records never go stale
    # A review by the user makes it current again.
    it.run(p.IntentClaimConfirm(task_id=tasks[2], claim_id=claim))
    assert it.snapshot(tasks[2]).stale == []
    assert len(it.ask(p.IntentCompact(task_id=tasks[2])).items) == 2


def test_the_same_task_three_times_is_one_distinct_task(it: Intent):
    task = it.start()
    key = [signal(it, task) for _ in range(3)][0]
    error = refused(lambda: promote(it, task, key), ErrorCode.RULE_VIOLATION)
    assert error.details["distinct_tasks"] == 1 and "3" in error.message


def test_a_promotion_by_a_non_user_says_who_may_confirm(it: Intent):
    tasks = [it.start() for _ in range(3)]
    key = [signal(it, t) for t in tasks][0]
    error = refused(lambda: promote(it, tasks[2], key, actor="agent"), ErrorCode.RULE_VIOLATION)
    assert "direct user event" in error.message and "'explicit' is not a confirmation" not in error.message


def test_a_promoted_claim_stays_an_inference_never_the_users_own_words(it: Intent):
    tasks = [it.start() for _ in range(3)]
    key = [signal(it, t) for t in tasks][0]
    claim = promote(it, tasks[2], key).events[0]["payload"]["claim"]["claim_id"]
    (view,) = [c for c in it.audit().claims if c.claim_id == claim]
    assert view.role == "system" and not view.direct_user
    hook = it.ask(p.IntentHookContext(task_id=tasks[2]))
    assert claim not in hook.claim_ids and hook.omitted == {"inferred": 1}


def test_staleness_starts_at_exactly_90_days(it: Intent, clock):
    tasks = [it.start() for _ in range(3)]
    key = [signal(it, t) for t in tasks][0]
    claim = promote(it, tasks[2], key).events[0]["payload"]["claim"]["claim_id"]
    clock.advance(90 * DAY - 1)
    assert it.snapshot(tasks[2]).stale == []
    assert claim in [i.claim_id for i in it.ask(p.IntentCompact(task_id=tasks[2])).items]
    clock.advance(1)
    assert [w.claim_id for w in it.snapshot(tasks[2]).stale] == [claim]


def test_a_signal_key_is_matched_whatever_its_case(it: Intent):
    tasks = [it.start() for _ in range(3)]
    key = [signal(it, t) for t in tasks][0]
    event = promote(it, tasks[2], key.upper()).events[0]
    assert event["payload"]["promoted_from"]["signal_key"] == key
