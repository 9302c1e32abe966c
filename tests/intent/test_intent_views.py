"""The indexed intent state (domains/intent/state.py) against the full filter it replaced.

For any history of commands (decided by the domain, refused ones left out), the
indexed views select exactly what a plain fold of every claim selects with the
old full filters: a task's active claims with the project-wide ones, a task's
audit with its edges, the active counts. A projection snapshot with its lazy
sections plus the tail folds to the full fold, decodes only what a read needs,
and the next snapshot re-encodes only the sections the tail changed.
"""

from __future__ import annotations

import datetime as dt
import itertools

import msgspec
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from intentkit import user_claim
from loopstate.core import snapshot
from loopstate.core.checkpoint import Checkpoint
from loopstate.core.clock import parse_time
from loopstate.core.errors import LoopstateError
from loopstate.domains.base import Context
from loopstate.domains.intent import DOMAIN as INTENT
from loopstate.domains.intent.evolve import evolve
from loopstate.domains.intent.handoff import FACET_ORDER, STATUS_ORDER
from loopstate.domains.intent.projections import active_claims
from loopstate.domains.intent.state import IntentState
from loopstate_protocol import intent as p
from loopstate_protocol.errors import ErrorCode

pytestmark = pytest.mark.both_stores  # docs/storage.md, *Which tests run on PostgreSQL*

PROJECT = "f" * 64
NOW = parse_time("2026-03-01T09:00:00Z")
BINDING = Checkpoint(dev=1, ino=2, line_start=0, offset=10, sequence=1, hash="h", prefix_sha256="p", first_hash="f")


class History:
    """Commands decided and folded in memory, as the service would (the refused ones leave nothing)."""

    def __init__(self) -> None:
        self.state = INTENT.initial("intent")
        self.events: list[dict] = []
        self.ids = (f"00000000-0000-4000-8000-{n:012x}" for n in itertools.count(1))

    def ctx(self, n: int) -> Context:
        return Context(now=NOW + dt.timedelta(minutes=n), new_id=lambda: next(self.ids), project_id=PROJECT,
                       project_root="/ws", request_id=f"req-{len(self.events)}-{n}")

    def run(self, command, n: int = 0) -> list[dict]:
        try:
            events = INTENT.decide(self.state, command, self.ctx(n))
        except LoopstateError:
            return []
        for event in events:
            event["sequence"] = len(self.events) + 1
            event["event_hash"] = f"{event['sequence']:064x}"
            INTENT.evolve(self.state, event)
            self.events.append(msgspec.json.decode(msgspec.json.encode(event)))  # as a reader decodes it
        return events


OPS = st.lists(
    st.tuples(
        st.sampled_from(["task", "add", "add_wide", "replace", "replace_wide", "invalidate", "confirm", "import", "off"]),
        st.integers(0, 40), st.integers(0, 40),
    ),
    min_size=1, max_size=30,
)


def play(ops) -> History:
    h = History()
    tasks = [h.run(p.IntentTaskStart(initial_claims=[user_claim("first rule")]))[0]["task_id"]]
    claims: list[str] = []
    for n, (op, pick, acting) in enumerate(ops):
        task = tasks[acting % len(tasks)]
        scope = "project" if op.endswith("_wide") else "task"
        if op == "task":
            started = h.run(p.IntentTaskStart(initial_claims=[user_claim(f"initial {n}", scope="project"),
                                                              user_claim(f"own {n}")]), n)
            tasks.append(started[0]["task_id"])
            claims += [c["claim_id"] for c in started[0]["payload"]["initial_claims"]]
            continue
        if op == "off":
            h.run(p.IntentModeSet(task_id=task, mode="off"), n)
            continue
        if op == "import":
            graph = INTENT.query(h.state, p.IntentExport(task_id=task), h.ctx(n))
            for event in h.run(p.IntentImport(graph=graph), n):
                tasks += [t["task_id"] for t in event["payload"]["tasks"]]
                claims += [c["claim_id"] for c in event["payload"]["claims"]]
            continue
        if op.startswith("add") or not claims:
            made = h.run(p.IntentClaimAdd(task_id=task, claim=user_claim(f"claim {n}", scope=scope)), n)
        elif op.startswith("replace"):
            old = claims[pick % len(claims)]  # any claim: retired ones and other tasks' are refused
            made = h.run(p.IntentClaimReplace(task_id=task, supersedes=[old], claim=user_claim(f"new {n}", scope=scope)), n)
        elif op == "confirm":
            made = h.run(p.IntentClaimConfirm(task_id=task, claim_id=claims[pick % len(claims)]), n)
        else:
            made = h.run(p.IntentClaimInvalidate(task_id=task, claim_id=claims[pick % len(claims)]), n)
        claims += [e["payload"]["claim"]["claim_id"] for e in made if "claim" in e["payload"]]
    return h


def full_fold(events: list[dict]) -> tuple[dict, list[tuple[str, str]]]:
    """Every claim (id -> its fields) and every edge, the way the unindexed state kept them."""
    claims: dict[str, dict] = {}
    edges: list[tuple[str, str]] = []

    def add(data: dict, task_id: str) -> None:
        claims[data["claim_id"]] = {**data, "task_id": task_id, "state": "active", "superseded_by": None}

    for event in events:
        payload, kind = event["payload"], event["event_type"]
        if kind == "task_started":
            for data in payload["initial_claims"]:
                add(data, event["task_id"])
        elif kind in ("claim_added", "claim_replaced"):
            add(payload["claim"], event["task_id"])
        if kind == "claim_replaced":
            for old in payload["superseded"]:
                claims[old].update(state="superseded", superseded_by=payload["claim"]["claim_id"])
                edges.append((payload["claim"]["claim_id"], old))
        elif kind == "claim_invalidated":
            claims[payload["claim_id"]]["state"] = "invalidated"
        elif kind == "graph_imported":
            for data in payload["claims"]:
                add(data, data["task_id"])
                if data["lifecycle"]["state"] == "invalidated":
                    claims[data["claim_id"]]["state"] = "invalidated"
            for data in payload["claims"]:
                for old in data["supersedes"]:
                    claims[old].update(state="superseded", superseded_by=data["claim_id"])
                    edges.append((data["claim_id"], old))
    return claims, edges


def _order(claim) -> tuple:
    """The handoff order as the unindexed views computed it, per claim: the index's keys must sort the same."""
    facet = min((FACET_ORDER[f] for f in claim.facets), default=len(FACET_ORDER))
    return (not claim.direct_user, STATUS_ORDER.get(claim.epistemic_status, 9), facet, parse_time(claim.valid_from),
            claim.claim_id)


def expected_active(state: IntentState, claims: dict, task_id: str | None) -> list[str]:
    """The old full filter: every claim of the project, active and in the task's scope, in handoff order."""
    chosen = [
        state.find_claim(cid) for cid, c in claims.items()
        if c["state"] == "active" and (task_id is None or c["task_id"] == task_id or c["scope"] in ("project", "long_term"))
    ]
    return [c.claim_id for c in sorted(chosen, key=_order)]


@settings(max_examples=120, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(ops=OPS)
def test_the_indexed_views_select_what_the_full_filter_selects(ops) -> None:
    h = play(ops)
    state, ctx = h.state, h.ctx(0)
    claims, edges = full_fold(h.events)
    for task_id in [None, *state.tasks]:
        assert [c.claim_id for c in active_claims(state, task_id)] == expected_active(state, claims, task_id)
        audit = INTENT.query(state, p.IntentAudit(task_id=task_id, limit=1000), ctx)
        own = [cid for cid, c in claims.items() if task_id is None or c["task_id"] == task_id]
        assert [c.claim_id for c in audit.claims] == own
        assert [(c.state, c.superseded_by) for c in audit.claims] == [(claims[i]["state"], claims[i]["superseded_by"]) for i in own]
        assert [(e.new, e.old) for e in audit.edges] == [(n, o) for n, o in edges if n in own or o in own]
        assert (audit.total, audit.remaining, audit.next_cursor) == (len(own), 0, None)
    for view in INTENT.query(state, p.IntentTasks(), ctx):
        assert view.active_claims == sum(1 for c in claims.values() if c["task_id"] == view.task_id and c["state"] == "active")


def through_snapshot(state: IntentState) -> IntentState:
    """``state`` written to snapshot bytes and read back, as a cold reader gets it."""
    box = [state]
    codec = snapshot.codec_for(INTENT, "intent", lambda: box[0], lambda restored: box.__setitem__(0, restored))
    data = snapshot.encode("intent", BINDING, codec)
    _, obj = snapshot.decode(data, "intent", codec)
    codec.restore(obj)
    return box[0]


def fold(events: list[dict], state: IntentState | None = None) -> IntentState:
    state = INTENT.initial("intent") if state is None else state
    for event in events:
        INTENT.evolve(state, event)
    return state


def views(state: IntentState, ctx: Context) -> bytes:
    queries = [p.IntentAudit(limit=1000), p.IntentSnapshot(), p.IntentTasks(), p.IntentExport()]
    for task_id in state.tasks:
        queries += [p.IntentAudit(task_id=task_id, limit=3), p.IntentSnapshot(task_id=task_id),
                    p.IntentHookContext(task_id=task_id), p.IntentCompact(task_id=task_id)]
    return b"\n".join(msgspec.json.encode(INTENT.query(state, q, ctx)) for q in queries)


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(ops=OPS, cut=st.integers(0, 200))
def test_lazy_sections_plus_the_tail_fold_to_the_full_fold(ops, cut) -> None:
    h = play(ops)
    cut = cut % (len(h.events) + 1)
    restored = fold(h.events[cut:], through_snapshot(fold(h.events[:cut])))
    assert restored == h.state
    assert views(restored, h.ctx(0)) == views(h.state, h.ctx(0))
    # And again through a second snapshot of the restored state (clean sections kept as their bytes).
    again = through_snapshot(restored)
    assert again == h.state
    assert views(again, h.ctx(0)) == views(h.state, h.ctx(0))


def test_a_cold_read_of_one_task_decodes_that_task_section_only() -> None:
    h = History()
    tasks = [h.run(p.IntentTaskStart(initial_claims=[user_claim(f"rule of {n}")]))[0]["task_id"] for n in range(30)]
    wide = h.run(p.IntentClaimAdd(task_id=tasks[3], claim=user_claim("project rule", scope="project")))[0]
    restored = through_snapshot(h.state)
    assert restored._sections == {}  # nothing decoded by the restore itself
    context = INTENT.query(restored, p.IntentHookContext(task_id=tasks[7]), h.ctx(0))
    assert set(restored._sections) == {tasks[7]}
    assert "rule of 7" in context.text and "project rule" in context.text  # the wide claim comes from the index
    assert wide["payload"]["claim"]["claim_id"] in context.claim_ids
    INTENT.query(restored, p.IntentSnapshot(task_id=tasks[9]), h.ctx(0))
    INTENT.query(restored, p.IntentAudit(task_id=tasks[9]), h.ctx(0))
    assert set(restored._sections) == {tasks[7], tasks[9]}


def test_claims_a_tail_adds_to_another_task_leave_its_section_encoded_until_it_is_read() -> None:
    h = History()
    busy, quiet = (h.run(p.IntentTaskStart(initial_claims=[user_claim(f"rule of {n}")]))[0]["task_id"] for n in range(2))
    restored = through_snapshot(h.state)
    h.state = restored
    h.run(p.IntentClaimAdd(task_id=busy, claim=user_claim("a rule the tail adds")))  # folded as a cold read folds a tail
    context = INTENT.query(restored, p.IntentHookContext(task_id=quiet), h.ctx(0))
    assert "rule of 1" in context.text
    assert set(restored._sections) == {quiet}  # the busy task's section is still its snapshot bytes
    assert restored.active_count(busy) == 2
    again = through_snapshot(restored)  # the next snapshot holds the added claim, read or not
    for state in (again, restored):
        shown = INTENT.query(state, p.IntentHookContext(task_id=busy), h.ctx(0))
        assert "rule of 0" in shown.text and "a rule the tail adds" in shown.text
    assert again == restored == fold(h.events)


def test_the_next_snapshot_re_encodes_only_the_sections_that_changed() -> None:
    h = History()
    tasks = [h.run(p.IntentTaskStart(initial_claims=[user_claim(f"rule of {n}")]))[0]["task_id"] for n in range(20)]
    restored = through_snapshot(h.state)
    before = dict(restored._encoded)
    old = INTENT.query(restored, p.IntentAudit(task_id=tasks[2]), h.ctx(0)).claims[0].claim_id
    h.state = restored
    h.run(p.IntentClaimReplace(task_id=tasks[2], supersedes=[old], claim=user_claim("rule of 2, revised")))
    h.run(p.IntentClaimAdd(task_id=tasks[5], claim=user_claim("another rule of 5")))
    form = INTENT.snapshot_state(restored)
    changed = {t for t in tasks if form.sections[t] is not before[t]}
    assert changed == {tasks[2], tasks[5]}  # every other section is the very bytes the last snapshot read
    assert bytes(form.sections[tasks[2]]) != bytes(before[tasks[2]])
    assert through_snapshot(restored) == restored


def test_a_retired_claim_folded_from_memory_is_held_as_bytes_and_read_back_whole() -> None:
    """Events folded without a place in a stream (a private task's) keep a retired claim as its bytes."""
    h = History()
    task = h.run(p.IntentTaskStart(initial_claims=[user_claim("keep the API")]))[0]["task_id"]
    old = h.state.task_claims(task)[0].claim_id
    new = h.run(p.IntentClaimReplace(task_id=task, supersedes=[old], claim=user_claim("keep the API v2")))
    section = h.state.section(task)
    assert isinstance(section.kept[old], msgspec.Raw) and old not in section.active and not section.retired
    claim = h.state.find_claim(old)
    assert (claim.statement, claim.state, claim.superseded_by) == ("keep the API", "superseded", new[0]["payload"]["claim"]["claim_id"])
    with pytest.raises(LoopstateError) as refused:  # and a command on it is refused for what it is
        INTENT.decide(h.state, p.IntentClaimInvalidate(task_id=task, claim_id=old), h.ctx(1))
    assert refused.value.code == ErrorCode.INVALID_TRANSITION


def placed_fold(events: list[dict], stream: list[dict], state: IntentState | None = None) -> IntentState:
    """``fold`` as the engine does it from a stream: each event at its own offset (retired claims become entries),
    read back from ``stream`` through a reader that checks the digest the entry kept."""
    by_offset = {1000 * e["sequence"]: e for e in stream}

    def read(offset: int, digest: bytes) -> dict:
        event = by_offset[offset]
        assert bytes.fromhex(event["event_hash"][:16]) == digest
        return event

    state = INTENT.initial("intent") if state is None else state
    state.reader = read
    for event in events:
        evolve(state, event, 1000 * event["sequence"])
    return state


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(ops=OPS, cut=st.integers(0, 200))
def test_retired_claims_kept_as_places_show_what_claims_kept_whole_show(ops, cut) -> None:
    h = play(ops)
    cut = cut % (len(h.events) + 1)
    placed = placed_fold(h.events, h.events)
    assert not any(placed.section(t).kept for t in placed.section_ids())  # every retired claim is an entry
    assert views(placed, h.ctx(0)) == views(h.state, h.ctx(0))
    head = through_snapshot(placed_fold(h.events[:cut], h.events))
    restored = placed_fold(h.events[cut:], h.events, head)
    assert restored == placed
    assert views(restored, h.ctx(0)) == views(h.state, h.ctx(0))
