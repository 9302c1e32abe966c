"""What a purge leaves of the intent events: a pure rewrite, before re-chaining.

Purging one claim (with every re-issue of it by a user review, which copies
its statement) removes every event that only carries it and strips its id
from the events that mention it (initial claims, supersession lists, imported
graphs, result signals, promotion records). Purging a task removes every event
of the task and its claims' ids wherever other tasks mention them; what the
task's events did to other tasks' claims (supersede, invalidate) stays, as
invalidations under those claims' own tasks. Claims that
a purged claim had superseded are not revived: their supersession becomes an
invalidation whose reason says the superseding claim was purged.
A rewritten event's request fingerprint is replaced by a purge marker (the old
one was a digest over the purged text), so an exact retry of that request is
refused as REQUEST_ID_REUSED rather than silently re-applied. The caller
re-seals the result (new sequence and hashes).
"""

from __future__ import annotations

import copy
from dataclasses import dataclass, field
from typing import Any

from loopstate.core import canonical
from loopstate.core.chain import REQUEST_FINGERPRINT, REQUEST_ID
from loopstate.core.ids import derived_uuid

CHAIN_FIELDS = ("sequence", "prev_hash", "event_hash")
PURGED_SUPERSEDER = "the superseding claim was purged"
PURGED_TASK = "invalidated from a purged task"


@dataclass
class PurgeCounts:
    removed_events: int = 0
    rewritten_events: int = 0
    kept_events: int = 0
    removed_claims: int = 0
    removed_candidates: int = 0
    removed_ids: set[str] = field(default_factory=set)

    def summary(self) -> dict[str, int]:
        return {
            "removed_events": self.removed_events, "rewritten_events": self.rewritten_events,
            "kept_events": self.kept_events, "removed_claims": self.removed_claims,
            "removed_candidates": self.removed_candidates,
        }


def _claims_of_task(events: list[dict[str, Any]], task_id: str) -> tuple[set[str], set[str]]:
    claims: set[str] = set()
    candidates: set[str] = set()
    for event in events:
        payload = event.get("payload") or {}
        mine = event["task_id"] == task_id
        kind = event["event_type"]
        if kind == "task_started" and mine:
            claims.update(c["claim_id"] for c in payload.get("initial_claims", ()))
        elif kind in ("claim_added", "claim_replaced", "result_signal_observed") and mine and payload.get("claim"):
            claims.add(payload["claim"]["claim_id"])
        elif kind == "candidate_added" and mine:
            candidates.add(payload["candidate_id"])
        elif kind == "graph_imported":
            claims.update(c["claim_id"] for c in payload.get("claims", ()) if c["task_id"] == task_id)
            candidates.update(c["candidate_id"] for c in payload.get("candidates", ()) if c["task_id"] == task_id)
    return claims, candidates


def confirmation_family(events: list[dict[str, Any]], claim_id: str) -> set[str]:
    """A claim and every re-issue of it by a user review (intent.claim_confirm), both ways.

    A review copies the statement into a new claim, so purging one version
    alone would leave the same content at rest under another id.
    """
    links: dict[str, set[str]] = {}
    for event in events:
        payload = event.get("payload") or {}
        if event["event_type"] == "claim_replaced" and payload.get("confirmation"):
            new = payload["claim"]["claim_id"]
            for old in payload.get("superseded", ()):
                links.setdefault(new, set()).add(old)
                links.setdefault(old, set()).add(new)
    family, todo = {claim_id}, [claim_id]
    while todo:
        for other in links.get(todo.pop(), ()):
            if other not in family:
                family.add(other)
                todo.append(other)
    return family


def purge_events(events: list[dict[str, Any]], target: str, target_id: str) -> tuple[list[dict[str, Any]], PurgeCounts]:
    """Return the kept events (chain fields removed) and what was removed."""
    if target == "task":
        claims, candidates = _claims_of_task(events, target_id)
    else:
        claims, candidates = confirmation_family(events, target_id), {target_id}
    gone = claims | candidates
    owners = _claim_owners(events)
    counts = PurgeCounts(removed_ids=set(gone) | ({target_id} if target == "task" else set()))
    kept: list[dict[str, Any]] = []
    for original in events:
        event = {k: v for k, v in original.items() if k not in CHAIN_FIELDS}
        if target == "task" and event["task_id"] == target_id and event["event_type"] != "graph_imported":
            rewritten = _carried_lifecycle(event, gone, owners)
        else:
            rewritten = _rewrite(copy.deepcopy(event), gone, target, target_id, counts)
        if not rewritten:
            counts.removed_events += 1
            continue
        if rewritten != [event]:
            counts.rewritten_events += 1
            for kept_event in rewritten:
                # The old fingerprint is a digest over parameters that held the purged text.
                if kept_event.get(REQUEST_FINGERPRINT):
                    kept_event[REQUEST_FINGERPRINT] = canonical.digest({"purged": True, "request_id": kept_event.get(REQUEST_ID)})
        kept.extend(rewritten)
    counts.kept_events = len(kept)
    return kept, counts


def _rewrite(event: dict[str, Any], gone: set[str], target: str, target_id: str, counts: PurgeCounts) -> list[dict[str, Any]]:
    kind = event["event_type"]
    payload = event["payload"]
    if kind == "task_started":
        before = len(payload.get("initial_claims", ()))
        payload["initial_claims"] = [c for c in payload.get("initial_claims", ()) if c["claim_id"] not in gone]
        counts.removed_claims += before - len(payload["initial_claims"])
        return [event]
    if kind == "claim_added":
        if payload["claim"]["claim_id"] in gone:
            counts.removed_claims += 1
            return []
        if payload.get("promoted_from"):
            payload["promoted_from"]["candidate_ids"] = [c for c in payload["promoted_from"]["candidate_ids"] if c not in gone]
        return [event]
    if kind == "claim_replaced":
        claim = payload["claim"]
        olds = [c for c in payload.get("superseded", claim.get("supersedes", [])) if c not in gone]
        if claim["claim_id"] in gone:
            counts.removed_claims += 1
            return [_invalidation(event, old) for old in olds]
        claim["supersedes"] = [c for c in claim.get("supersedes", []) if c not in gone]
        if not olds:
            event["event_type"] = "claim_added"
            event["payload"] = {"claim": claim}
            return [event]
        payload["superseded"] = olds
        return [event]
    if kind == "claim_invalidated":
        return [] if payload["claim_id"] in gone else [event]
    if kind == "candidate_added":
        if payload["candidate_id"] in gone:
            counts.removed_candidates += 1
            return []
        return [event]
    if kind == "result_signal_observed":
        if payload.get("claim") and payload["claim"]["claim_id"] in gone:
            counts.removed_claims += 1
            del payload["claim"]
        return [event]
    if kind == "graph_imported":
        return _rewrite_import(event, gone, target, target_id, counts)
    return [event]


def _invalidation(event: dict[str, Any], old: str, *, task_id: str | None = None, reason: str = PURGED_SUPERSEDER) -> dict[str, Any]:
    return {
        **{k: v for k, v in event.items() if k != "payload"},
        "event_id": derived_uuid("intent-purge:" + event["event_id"], old),
        "event_type": "claim_invalidated",
        "task_id": task_id or event["task_id"],
        "payload": {"claim_id": old, "reason": reason},
    }


def _claim_owners(events: list[dict[str, Any]]) -> dict[str, str]:
    """Which task each claim belongs to."""
    owners: dict[str, str] = {}
    for event in events:
        payload = event.get("payload") or {}
        for claim in payload.get("initial_claims", ()):
            owners[claim["claim_id"]] = event["task_id"]
        if isinstance(payload.get("claim"), dict):
            owners[payload["claim"]["claim_id"]] = event["task_id"]
        if event["event_type"] == "graph_imported":
            for claim in payload.get("claims", ()):
                owners[claim["claim_id"]] = claim["task_id"]
    return owners


def _carried_lifecycle(event: dict[str, Any], gone: set[str], owners: dict[str, str]) -> list[dict[str, Any]]:
    """What a purged task's event did to other tasks' claims, kept as plain invalidations.

    A purged task may have superseded or invalidated another task's claim;
    dropping that event would revive the claim, so it becomes an invalidation
    recorded under the claim's own task, with a fixed reason (the original
    reason is the purged task's text).
    """
    payload = event["payload"]
    if event["event_type"] == "claim_replaced":
        olds = [o for o in payload.get("superseded", payload["claim"].get("supersedes", [])) if o not in gone]
        return [_invalidation(event, old, task_id=owners.get(old)) for old in olds]
    if event["event_type"] == "claim_invalidated" and payload["claim_id"] not in gone:
        return [_invalidation(event, payload["claim_id"], task_id=owners.get(payload["claim_id"]), reason=PURGED_TASK)]
    return []


def _rewrite_import(event: dict[str, Any], gone: set[str], target: str, target_id: str, counts: PurgeCounts) -> list[dict[str, Any]]:
    payload = event["payload"]
    if target == "task":
        payload["tasks"] = [t for t in payload["tasks"] if t["task_id"] != target_id]
    claims = []
    for claim in payload.get("claims", ()):
        if claim["claim_id"] in gone:
            counts.removed_claims += 1
            continue
        claim["supersedes"] = [c for c in claim.get("supersedes", []) if c not in gone]
        claims.append(claim)
    payload["claims"] = claims
    still_superseded = {old for claim in claims for old in claim["supersedes"]}
    for claim in claims:
        if (claim.get("lifecycle") or {}).get("state") == "superseded" and claim["claim_id"] not in still_superseded:
            claim["lifecycle"] = {"state": "invalidated", "invalidated_at": event["occurred_at"], "reason": PURGED_SUPERSEDER}
    before = len(payload.get("candidates", ()))
    payload["candidates"] = [c for c in payload.get("candidates", ()) if c["candidate_id"] not in gone]
    counts.removed_candidates += before - len(payload["candidates"])
    if not payload["tasks"]:
        return []
    if event["task_id"] == target_id:
        event["task_id"] = payload["tasks"][0]["task_id"]
    payload["counts"] = {"tasks": len(payload["tasks"]), "claims": len(claims), "candidates": len(payload["candidates"])}
    return [event]
