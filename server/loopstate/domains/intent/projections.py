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

The views read the state's handoff-ordered index (handoff.py, ``IntentState.view``):
a page and the hook context decode and format only the claims they show, and
count the rest from the index's flag bytes.
"""

from __future__ import annotations

import datetime as dt

from loopstate_protocol import intent as p
from loopstate_protocol.intent import FACETS, STATUSES

from loopstate.core.clock import parse_time
from loopstate.domains.intent import paging
from loopstate.domains.intent.handoff import KIND_MASK, KINDS, TEXT, View, hook_line, is_disputed, lead_facet, order_key
from loopstate.domains.intent.records import STALE_DAYS, Claim, Task
from loopstate.domains.intent.state import IntentState


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


def task_view(state: IntentState, task: Task, current_id: str | None = None) -> p.TaskView:
    """``current_id``: the project's current task (decide.current_task), to mark it; None marks none."""
    return p.TaskView(
        task_id=task.task_id, mode=task.mode, started_at=task.started_at, label=task.label,
        history_incomplete=task.history_incomplete,
        active_claims=state.active_count(task.task_id), current=task.task_id == current_id,
    )


def active_claims(state: IntentState, task_id: str | None) -> list[Claim]:
    """The active claims of a task's view (its own, and the project's project-wide and long-term claims), in
    handoff order; every active claim of the project for None."""
    return state.view(task_id).claims()


def _snapshot_page(
    state: IntentState, view: View, task_id: str | None, limit: int, cursor: str | None,
) -> tuple[list[Claim], int, str | None]:
    """One page of the view's active claims in handoff order, after the claim the cursor ended at: the page,
    how many claims follow it, and the next page's cursor."""
    paging.check_limit(limit)
    scope = task_id or "project"
    after, shown = None, 0
    if cursor is not None:
        shown, last_id = paging.parse_cursor(cursor, listing="snapshot", scope=scope)
        last = state.find_claim(last_id, task_id)
        if last is None:
            raise paging.bad_cursor(cursor, "ends at a claim this project no longer holds (a purge removed it)")
        after = order_key(last)
    chosen, remaining = view.page(after, limit)
    following = paging.make_cursor("snapshot", scope, shown + len(chosen), chosen[-1].claim_id) if remaining and chosen else None
    return chosen, remaining, following


def current(
    state: IntentState, project_id: str, task_id: str | None, now: dt.datetime, *, limit: int, cursor: str | None,
) -> p.CurrentView:
    """One page of the view (``limit`` active claims in handoff order); its disagreements, stale warnings and
    counts are of every active claim, so a dispute or a stale record is never hidden on a later page."""
    active = state.view(task_id)  # once: it orders the other tasks' project-wide claims
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
    current_id = state.current_task()[0]
    tasks = [task_view(state, t, current_id) for t in state.tasks.values() if task_id is None or t.task_id == task_id]
    # Only a long-term claim can be stale, and every long-term claim is project-wide: in every view.
    stale = sorted((c for c in state.wide.values() if is_stale(c, now)), key=order_key)
    return p.CurrentView(
        project_id=project_id, task_id=task_id, sequence=state.sequence, tasks=tasks, current_task_id=current_id,
        by_facet=by_facet,
        disagreements=[
            p.Disagreement(claim_id=c.claim_id, statement=c.statement, epistemic_status=c.epistemic_status)
            for c in active.disputed()
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
    disputes = [c for c in candidates if is_disputed(c)]
    dispute_chars = sum(len(c.statement) for c in disputes)
    include_disputes = len(disputes) <= max_records and dispute_chars <= max_chars
    if include_disputes:
        for claim in disputes:
            items.append(_item(claim))
            chars += len(claim.statement)
    elif disputes:
        omitted["disputes_over_budget"] = len(disputes)
    for claim in candidates:
        if is_disputed(claim):
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
    return p.CompactItem(
        claim_id=claim.claim_id, facet=lead_facet(claim), epistemic_status=claim.epistemic_status, statement=claim.statement,
        direct_user=claim.direct_user,
    )


# No hook-context line is shorter than "- [" + the shortest facet + "] ": below that budget nothing more fits.
SHORTEST_LINE = len("- [] ") + min(len(f) for f in FACETS)
HEADER = "User-stated intent (verbatim claims from the user's own messages):"


def hook_context(state: IntentState, task: Task, max_chars: int, now: dt.datetime) -> p.HookContext:
    """Only the user's own explicit words as text; everything else is a count.

    A private or off task injects nothing. The budget only drops whole claims
    (counted), never resolves or rewrites one. The lines fill the budget first
    fit in handoff order: the index gives each claim's kind and line width, so
    only the claims shown are decoded, and once no line could fit the rest are
    counted, not tried.
    """
    view = state.view(task.task_id)
    if task.mode != "on":
        return p.HookContext(task_id=task.task_id, text="", claim_ids=[], omitted={"task_" + task.mode: len(view)}, open_disputes=0)
    omitted = {kind: n for code, kind in enumerate(KINDS) if code != TEXT and (n := view.count(code))}
    used = len(HEADER)
    lines: list[str] = []
    ids: list[str] = []
    tried = over = 0
    for place in view.places():
        if max_chars - used - 1 < SHORTEST_LINE:
            break
        part, pos = view.parts[place[1]], place[2]
        if part.flags[pos] & KIND_MASK != TEXT:
            continue
        tried += 1
        width = part.widths[pos]
        if used + 1 + width > max_chars:
            over += 1
            continue
        claim = part.at(pos)
        lines.append(hook_line(claim))
        ids.append(claim.claim_id)
        used += 1 + width
    over += view.count(TEXT) - tried
    if over:
        omitted["over_budget"] = over
    text = "\n".join([HEADER, *lines]) if lines else ""
    return p.HookContext(task_id=task.task_id, text=text, claim_ids=ids, omitted=omitted, open_disputes=view.disputes())


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
