"""Views computed from the folded state; none of them is stored or authoritative.

- current: active claims by facet and status, disagreements, unknowns, minimal
  sources and stale long-term warnings;
- audit: every claim with its lifecycle, and the supersession edges;
- compact: the manual handoff, capped by record count and characters, leaving
  stale long-term inferences out;
- hook context: what a hook may inject. Only direct user-event, user-explicit
  claims appear as text; everything else is an omitted count, so stored
  content never becomes a later instruction channel.
No view resolves a conflict to fit its budget: a dispute is never dropped while
one side of it is shown, and open disputes are always counted.
"""

from __future__ import annotations

import datetime as dt
import heapq

from loopstate_protocol import intent as p

from loopstate.core.clock import parse_time
from loopstate.domains.intent import paging
from loopstate.domains.intent.records import FACETS, STALE_DAYS, STATUSES, Claim, Task
from loopstate.domains.intent.state import IntentState

# Handoff priority: what the user said first, then hard limits, then goals.
FACET_ORDER = {facet: i for i, facet in enumerate((
    "hard_constraint", "outcome", "success_signal", "failure_signal", "disagreement", "unknown",
    "soft_constraint", "tradeoff", "result_feedback",
))}
STATUS_ORDER = {status: i for i, status in enumerate(("explicit", "disputed", "unknown", "evidence", "inferred"))}


def days_unconfirmed(claim: Claim, now: dt.datetime) -> int:
    since = parse_time(claim.last_confirmed or claim.valid_from, field="last_confirmed")
    return max(0, (now - since).days)


def is_stale(claim: Claim, now: dt.datetime) -> bool:
    """An inferred long-term record unconfirmed for 90 days is stale until reviewed."""
    return claim.scope == "long_term" and claim.epistemic_status == "inferred" and days_unconfirmed(claim, now) >= STALE_DAYS


def claim_view(claim: Claim, now: dt.datetime, *, minimal_source: bool = False) -> p.ClaimView:
    ref = claim.source_ref or {}
    source = p.SourceRef(
        kind=ref.get("kind", ""), event_id=ref.get("event_id"), sha256=ref.get("sha256"),
        excerpt=None if minimal_source else ref.get("excerpt"),
    )
    return p.ClaimView(
        claim_id=claim.claim_id, task_id=claim.task_id, statement=claim.statement, role=claim.role,
        epistemic_status=claim.epistemic_status, scope=claim.scope, facets=list(claim.facets),
        valid_from=claim.valid_from, last_confirmed=claim.last_confirmed, confidence=claim.confidence,
        supersedes=list(claim.supersedes), source_ref=source, direct_user=claim.direct_user,
        # msgspec's omit_defaults omits a str default by identity: a state read back from a
        # projection snapshot is an equal but distinct "active", so the default is left to it.
        **({} if claim.state == "active" else {"state": claim.state}),
        superseded_by=claim.superseded_by, invalidated_at=claim.invalidated_at,
        invalidation_reason=claim.invalidation_reason, stale=is_stale(claim, now), imported=claim.imported,
    )


def task_view(state: IntentState, task: Task) -> p.TaskView:
    return p.TaskView(
        task_id=task.task_id, mode=task.mode, started_at=task.started_at, label=task.label,
        history_incomplete=task.history_incomplete,
        active_claims=state.active_count(task.task_id),
    )


def _order(claim: Claim) -> tuple:
    """A claim's place in handoff order, unique (the claim id breaks ties).

    ``valid_from`` is a canonical UTC ``Z`` time the server wrote (its
    fractional seconds only when present, so the text alone does not sort):
    ``fromisoformat`` reads it without ``parse_time``'s checks, a cost every
    claim of a view pays.
    """
    facets = claim.facets
    facet = FACET_ORDER[facets[0]] if len(facets) == 1 else min((FACET_ORDER[f] for f in facets), default=len(FACETS))
    return (not claim.direct_user, STATUS_ORDER.get(claim.epistemic_status, 9), facet,
            dt.datetime.fromisoformat(claim.valid_from), claim.claim_id)


def active_claims(state: IntentState, task_id: str | None) -> list[Claim]:
    """The active claims of a task's view (its own, and the project's project-wide and long-term claims), in
    handoff order; every active claim of the project for None. Read from the state's indexes: O(what it returns)."""
    return sorted(state.visible_active(task_id), key=_order)


def _snapshot_page(
    state: IntentState, active: list[Claim], task_id: str | None, limit: int, cursor: str | None,
) -> tuple[list[Claim], int, str | None]:
    """One page of the view's active claims in handoff order, after the claim the cursor ended at."""
    scope = task_id or "project"
    after, shown = None, 0
    if cursor is not None:
        shown, last_id = paging.parse_cursor(cursor, listing="snapshot", scope=scope)
        last = state.find_claim(last_id, task_id)
        if last is None:
            raise paging.bad_cursor(cursor, "ends at a claim this project no longer holds (a purge removed it)")
        after = _order(last)
    return paging.keyset_page(
        ((_order(c), c) for c in active), _claim_id, after, shown, listing="snapshot", scope=scope, limit=limit,
    )


def _claim_id(claim: Claim) -> str:
    return claim.claim_id


def current(
    state: IntentState, project_id: str, task_id: str | None, now: dt.datetime, *, limit: int, cursor: str | None,
) -> p.CurrentView:
    """One page of the view (``limit`` active claims in handoff order); its disagreements, stale warnings and
    counts are of every active claim, so a dispute or a stale record is never hidden on a later page."""
    active = list(state.visible_active(task_id))
    shown, remaining, following = _snapshot_page(state, active, task_id, limit, cursor)
    by_facet: dict[str, dict[str, list[p.ClaimView]]] = {}
    for claim in shown:
        view = claim_view(claim, now, minimal_source=True)
        for facet in claim.facets:
            by_facet.setdefault(facet, {}).setdefault(claim.epistemic_status, []).append(view)
    by_facet = {f: {s: by_facet[f][s] for s in STATUSES if s in by_facet[f]} for f in FACETS if f in by_facet}
    sources: dict[tuple, p.SourceRef] = {}
    for claim in shown:
        ref = claim.source_ref or {}
        key = (ref.get("kind"), ref.get("event_id"), ref.get("sha256"))
        sources.setdefault(key, p.SourceRef(kind=ref.get("kind", ""), event_id=ref.get("event_id"), sha256=ref.get("sha256")))
    tasks = [task_view(state, t) for t in state.tasks.values() if task_id is None or t.task_id == task_id]
    disputed = sorted((c for c in active if _disputed(c)), key=_order)
    stale = sorted((c for c in active if is_stale(c, now)), key=_order)
    return p.CurrentView(
        project_id=project_id, task_id=task_id, sequence=state.sequence, tasks=tasks, by_facet=by_facet,
        disagreements=[
            p.Disagreement(claim_id=c.claim_id, statement=c.statement, epistemic_status=c.epistemic_status)
            for c in disputed
        ],
        unknowns=[claim_view(c, now, minimal_source=True) for c in shown if c.epistemic_status == "unknown" or "unknown" in c.facets],
        sources=sorted(sources.values(), key=lambda s: (s.kind, s.event_id or "", s.sha256 or "")),
        stale=[
            p.StaleWarning(
                claim_id=c.claim_id, statement=c.statement, last_confirmed=c.last_confirmed,
                days_unconfirmed=days_unconfirmed(c, now),
            )
            for c in stale
        ],
        active_count=len(active), remaining=remaining, next_cursor=following,
    )


def audit(
    state: IntentState, project_id: str, task_id: str | None, now: dt.datetime, *, limit: int, cursor: str | None,
) -> p.AuditView:
    """One page of the task's claims (the project's without a task) in ledger order, with the edges that touch them."""
    # A task's page reads the task's retired claims back from the stream (each record once);
    # the project's is in ledger order across tasks, which takes every claim.
    if task_id is None:
        listed, edges = state.all_claims(), None
    else:
        listed, edges = state.task_view(task_id)
    shown, remaining, following = paging.page(
        listed, lambda c: c.claim_id, listing="audit", scope=task_id or "project", limit=limit, cursor=cursor,
    )
    ids = {c.claim_id for c in shown}
    return p.AuditView(
        project_id=project_id, task_id=task_id, sequence=state.sequence,
        claims=[claim_view(c, now) for c in shown],
        edges=[p.Edge(new=e[1], old=e[3]) for e in (state.edges_touching(None) if edges is None else edges) if e[1] in ids or e[3] in ids],
        total=len(listed), remaining=remaining, next_cursor=following,
    )


def _disputed(claim: Claim) -> bool:
    return claim.epistemic_status == "disputed" or "disagreement" in claim.facets


def compact(state: IntentState, task_id: str, max_records: int, max_chars: int, now: dt.datetime) -> p.CompactView:
    """Deterministic: same state and caps, same bytes. Disputes go in whole or not at all."""
    omitted: dict[str, int] = {}
    items: list[p.CompactItem] = []
    chars = 0
    candidates = []
    for claim in active_claims(state, task_id):
        if is_stale(claim, now):
            omitted["stale_long_term"] = omitted.get("stale_long_term", 0) + 1
        else:
            candidates.append(claim)
    disputes = [c for c in candidates if _disputed(c)]
    dispute_chars = sum(len(c.statement) for c in disputes)
    include_disputes = len(disputes) <= max_records and dispute_chars <= max_chars
    if include_disputes:
        for claim in disputes:
            items.append(_item(claim))
            chars += len(claim.statement)
    elif disputes:
        omitted["disputes_over_budget"] = len(disputes)
    for claim in candidates:
        if _disputed(claim):
            continue
        if len(items) < max_records and chars + len(claim.statement) <= max_chars:
            items.append(_item(claim))
            chars += len(claim.statement)
        else:
            omitted["over_budget"] = omitted.get("over_budget", 0) + 1
    rank = {c.claim_id: i for i, c in enumerate(candidates)}
    items.sort(key=lambda item: rank[item.claim_id])
    return p.CompactView(task_id=task_id, items=items, omitted=omitted, chars=chars, open_disputes=len(disputes))


def _item(claim: Claim) -> p.CompactItem:
    facet = min(claim.facets, key=lambda f: FACET_ORDER[f])
    return p.CompactItem(
        claim_id=claim.claim_id, facet=facet, epistemic_status=claim.epistemic_status, statement=claim.statement,
        direct_user=claim.direct_user,
    )


def _omission_kind(claim: Claim) -> str | None:
    """Why a claim is only a count in the hook context, or None when it may appear as text.

    Only the user's own explicit words from a direct user event are text; an
    unknown or disputed record (by status) is a count whoever stated it.
    """
    if claim.imported:
        return "imported"
    if claim.epistemic_status != "explicit":
        return claim.epistemic_status
    if not (claim.direct_user and claim.user_explicit):
        return "explicit_not_direct"
    return None


# No hook-context line is shorter than "- [" + the shortest facet + "] ": below that budget nothing more fits.
SHORTEST_LINE = len("- [] ") + min(len(f) for f in FACETS)


def hook_context(state: IntentState, task: Task, max_chars: int, now: dt.datetime) -> p.HookContext:
    """Only the user's own explicit words as text; everything else is a count.

    A private or off task injects nothing. The budget only drops whole claims
    (counted), never resolves or rewrites one. The lines fill the budget first
    fit in handoff order, taken from a heap: only the claims tried are put in
    order, and once no line could fit the rest are counted, not formatted.
    """
    active = list(state.visible_active(task.task_id))
    if task.mode != "on":
        return p.HookContext(task_id=task.task_id, text="", claim_ids=[], omitted={"task_" + task.mode: len(active)}, open_disputes=0)
    omitted: dict[str, int] = {}
    disputes = 0
    text_kind: list[tuple[tuple, Claim]] = []
    for claim in active:
        disputes += _disputed(claim)
        kind = _omission_kind(claim)
        if kind is None:
            text_kind.append((_order(claim), claim))
        else:
            omitted[kind] = omitted.get(kind, 0) + 1
    heapq.heapify(text_kind)
    header = "User-stated intent (verbatim claims from the user's own messages):"
    used = len(header)
    lines: list[str] = []
    ids: list[str] = []
    while text_kind and max_chars - used - 1 >= SHORTEST_LINE:
        _, claim = heapq.heappop(text_kind)
        facet = min(claim.facets, key=lambda f: FACET_ORDER[f])
        line = f"- [{facet}] {claim.statement}"
        if used + 1 + len(line) > max_chars:
            omitted["over_budget"] = omitted.get("over_budget", 0) + 1
            continue
        lines.append(line)
        ids.append(claim.claim_id)
        used += 1 + len(line)
    if text_kind:
        omitted["over_budget"] = omitted.get("over_budget", 0) + len(text_kind)
    text = "\n".join([header, *lines]) if lines else ""
    return p.HookContext(task_id=task.task_id, text=text, claim_ids=ids, omitted=omitted, open_disputes=disputes)


def candidate_groups(state: IntentState) -> list[p.CandidateGroup]:
    from loopstate.domains.intent.records import PROMOTION_TASKS

    groups: dict[str, list] = {}
    for candidate in state.candidates.values():
        groups.setdefault(candidate.signal_key, []).append(candidate)
    out = []
    for key, members in groups.items():
        tasks = sorted({m.task_id for m in members})
        promoted = any(m.promoted for m in members)
        out.append(p.CandidateGroup(
            signal_key=key, statement=members[-1].statement, facets=list(members[-1].facets), task_ids=tasks,
            distinct_tasks=len(tasks), promotable=len(tasks) >= PROMOTION_TASKS and not promoted, promoted=promoted,
        ))
    return sorted(out, key=lambda g: (-g.distinct_tasks, g.signal_key))
