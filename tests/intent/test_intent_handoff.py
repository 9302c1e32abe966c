"""The handoff-ordered index (domains/intent/handoff.py) against the plain computations it replaced.

For any set of active claims, in a state folded in memory or restored from a
projection snapshot (claims still encoded): the keys sort exactly as the
handoff order's tuple does, and the hook context, the snapshot page and the
counts equal what sorting every visible claim and filtering it would give.
"""

from __future__ import annotations

import pytest
import datetime as dt
import heapq
import uuid

import msgspec
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from loopstate_protocol.intent import FACETS, STATUSES

from loopstate.core import snapshot
from loopstate.core.checkpoint import Checkpoint
from loopstate.core.clock import format_time, parse_time
from loopstate.domains.intent import DOMAIN as INTENT
from loopstate.domains.intent import projections
from loopstate.domains.intent.handoff import FACET_ORDER, STATUS_ORDER, ActiveClaims, View, omission_kind, order_key
from loopstate.domains.intent.records import Claim, Task
from loopstate.domains.intent.state import IntentState

pytestmark = pytest.mark.both_stores  # docs/storage.md, *Which tests run on PostgreSQL*

NOW = parse_time("2026-06-01T00:00:00Z")
BINDING = Checkpoint(dev=1, ino=2, line_start=0, offset=10, sequence=1, hash="h", prefix_sha256="p", first_hash="f")
TASKS = [str(uuid.UUID(int=n, version=4)) for n in range(1, 4)]


def reference_order(claim: Claim) -> tuple:
    """The handoff order as the views computed it before the index: a tuple per claim."""
    facet = min((FACET_ORDER[f] for f in claim.facets), default=len(FACETS))
    return (not claim.direct_user, STATUS_ORDER.get(claim.epistemic_status, 9), facet,
            dt.datetime.fromisoformat(claim.valid_from), claim.claim_id)


# A few seconds apart, whole or not: ties and near-ties in time are where a text key could go wrong.
instants = st.builds(
    lambda s, us: dt.datetime(2026, 1, 1, tzinfo=dt.timezone.utc) + dt.timedelta(seconds=s, microseconds=us),
    st.integers(0, 3), st.sampled_from([0, 0, 1, 10, 500_000, 999_999]),
)
canonical = instants.map(format_time)  # as the server writes it (what the views parse)
# Also the same instant with another offset: the keys read it by fromisoformat.
any_offset = st.one_of(
    canonical,
    st.tuples(instants, st.integers(-12, 12)).map(
        lambda p: p[0].astimezone(dt.timezone(dt.timedelta(hours=p[1]))).isoformat()),
)


@st.composite
def claims(draw, task_ids=TASKS, valid_froms=canonical) -> Claim:
    status = draw(st.sampled_from(STATUSES))
    role = "user" if status == "explicit" else draw(st.sampled_from(["user", "agent", "system"]))
    facets = draw(st.lists(st.sampled_from(FACETS), min_size=1, max_size=3, unique=True))
    return Claim(
        claim_id=str(uuid.UUID(int=draw(st.integers(1, 2**64)), version=4)), task_id=draw(st.sampled_from(task_ids)),
        statement=draw(st.text(st.characters(codec="utf-8", exclude_categories=("Cs",)), min_size=1, max_size=60)),
        role=role, epistemic_status=status, scope=draw(st.sampled_from(["task", "task", "project", "long_term"])),
        facets=facets, valid_from=draw(valid_froms), last_confirmed=None, confidence=None, supersedes=[],
        source_ref={"kind": "user_event"}, direct_user=draw(st.booleans()), added_sequence=draw(st.integers(1, 10**6)),
        imported=draw(st.booleans()),
    )


def unique(found: list[Claim]) -> list[Claim]:
    return list({c.claim_id: c for c in found}.values())


def state_of(found: list[Claim], modes: dict[str, str]) -> IntentState:
    state = IntentState()
    for n, task_id in enumerate(TASKS):
        state.tasks[task_id] = Task(task_id=task_id, project_id="p" * 64, mode=modes.get(task_id, "on"),
                                    started_at="2026-01-01T00:00:00Z", sequence=n)
    for claim in found:
        state.add_claim(claim)
    return state


def through_snapshot(state: IntentState) -> IntentState:
    box = [state]
    codec = snapshot.codec_for(INTENT, "intent", lambda: box[0], lambda restored: box.__setitem__(0, restored))
    _, obj = snapshot.decode(snapshot.encode("intent", BINDING, codec), "intent", codec)
    codec.restore(obj)
    return box[0]


def visible(found: list[Claim], task_id: str | None) -> list[Claim]:
    """What a task's view shows, by the old full filter, in handoff order."""
    chosen = [c for c in found if task_id is None or c.task_id == task_id or c.scope != "task"]
    return sorted(chosen, key=reference_order)


def reference_hook(found: list[Claim], task: Task, max_chars: int) -> tuple:
    """The hook context as the views computed it before the index: a heap of every text claim, first fit."""
    shown = visible(found, task.task_id)
    if task.mode != "on":
        return "", [], {"task_" + task.mode: len(shown)}, 0
    omitted: dict[str, int] = {}
    text_kind = []
    for claim in shown:
        kind = omission_kind(claim)
        if kind is None:
            text_kind.append((reference_order(claim), claim))
        else:
            omitted[kind] = omitted.get(kind, 0) + 1
    heapq.heapify(text_kind)
    used, lines, ids = len(projections.HEADER), [], []
    while text_kind and max_chars - used - 1 >= projections.SHORTEST_LINE:
        _, claim = heapq.heappop(text_kind)
        line = f"- [{min(claim.facets, key=FACET_ORDER.__getitem__)}] {claim.statement}"
        if used + 1 + len(line) > max_chars:
            omitted["over_budget"] = omitted.get("over_budget", 0) + 1
            continue
        lines.append(line)
        ids.append(claim.claim_id)
        used += 1 + len(line)
    if text_kind:
        omitted["over_budget"] = omitted.get("over_budget", 0) + len(text_kind)
    disputes = sum(1 for c in shown if c.epistemic_status == "disputed" or "disagreement" in c.facets)
    return "\n".join([projections.HEADER, *lines]) if lines else "", ids, omitted, disputes


@pytest.mark.slow
@settings(max_examples=200, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(found=st.lists(claims(valid_froms=any_offset), max_size=40))
def test_keys_sort_as_the_handoff_tuple(found) -> None:
    found = unique(found)
    assert sorted(found, key=order_key) == sorted(found, key=reference_order)
    assert all(order_key(c).endswith(c.claim_id) for c in found)


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(found=st.lists(claims(), max_size=40), budget=st.integers(1, 400), cold=st.booleans(),
       modes=st.dictionaries(st.sampled_from(TASKS), st.sampled_from(["on", "off", "private"]), max_size=1))
def test_the_hook_context_is_what_sorting_every_claim_gives(found, budget, cold, modes) -> None:
    found = unique(found)
    state = state_of(found, modes)
    if cold:
        state = through_snapshot(state)  # the claims stay encoded until the context shows them
    for task_id in TASKS:
        task = state.tasks[task_id]
        hook = projections.hook_context(state, task, budget, NOW)
        text, ids, omitted, disputes = reference_hook(found, task, budget)
        assert (hook.text, hook.claim_ids, hook.omitted, hook.open_disputes) == (text, ids, omitted, disputes)
        assert len(hook.text) <= budget


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(found=st.lists(claims(), max_size=40), limit=st.integers(1, 7), cold=st.booleans())
def test_a_walk_of_snapshot_pages_lists_the_view_in_handoff_order(found, limit, cold) -> None:
    found = unique(found)
    state = through_snapshot(state_of(found, {})) if cold else state_of(found, {})
    for task_id in [None, *TASKS]:
        expected = visible(found, task_id)
        walked, cursor = [], None
        while True:
            page = projections.current(state, "p" * 64, task_id, NOW, limit=limit, cursor=cursor)
            walked += [v.claim_id for by_status in page.by_facet.values() for views in by_status.values() for v in views]
            assert page.active_count == len(expected)
            assert [d.claim_id for d in page.disagreements] == [
                c.claim_id for c in expected if c.epistemic_status == "disputed" or "disagreement" in c.facets]
            if page.next_cursor is None:
                assert page.remaining == 0
                break
            cursor = page.next_cursor
        assert sorted(set(walked)) == sorted(c.claim_id for c in expected)


@settings(max_examples=100, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(found=st.lists(claims(task_ids=TASKS[:1]), max_size=30), gone=st.sets(st.integers(0, 29)))
def test_an_index_restored_then_changed_holds_what_one_built_in_memory_holds(found, gone) -> None:
    found = unique(found)
    built = ActiveClaims.of(found)
    keys, raws, flags, widths = built.parts()
    restored = ActiveClaims.restore(keys, [msgspec.Raw(bytes(r)) for r in raws], flags, widths, {})
    for n in sorted(gone):
        if n < len(found):
            assert restored.pop(found[n].claim_id) == built.pop(found[n].claim_id) == found[n]
    assert restored.pop("no such claim") is None
    extra = Claim(claim_id=str(uuid.uuid4()), task_id=TASKS[0], statement="late", role="user",
                  epistemic_status="explicit", scope="task", facets=["outcome"], valid_from="2026-01-01T00:00:00Z",
                  last_confirmed=None, confidence=None, supersedes=[], source_ref={}, direct_user=True, added_sequence=9)
    restored.add(extra)
    built.add(extra)
    assert restored.parts()[0] == built.parts()[0] and restored.parts()[2:] == built.parts()[2:]
    assert restored.values() == built.values()
    for code in range(8):
        assert restored.count(code) == built.count(code)
    assert restored.disputes() == built.disputes() == sum(
        1 for c in built.values() if c.epistemic_status == "disputed" or "disagreement" in c.facets)
    assert View([restored]).claims() == sorted(built.values(), key=reference_order)
