"""evolve(state, event) -> state: fold one verified intent event into the state.

Lifecycle is event-derived: claim_invalidated makes a claim inactive,
claim_replaced adds a claim and marks the ids it supersedes. The state object
is owned by the one ledger reader that folds it, so it is updated in place,
through the state's own methods, which keep its indexes (state.py).
"""

from __future__ import annotations

from typing import Any

from loopstate.domains.intent.records import Candidate, Claim, Task
from loopstate.domains.intent.state import IntentState
from loopstate.domains.intent.rules import direct_user


def _claim(
    state: IntentState, event: dict[str, Any], data: dict[str, Any], task_id: str, *, index: int = 0, imported: bool = False,
) -> Claim:
    ref = data.get("source_ref") or {}
    task = state.tasks.get(task_id)
    if task is not None:
        task_id = task.task_id  # one string per task, not one per claim (and per edge)
    claim = Claim(
        claim_id=data["claim_id"], task_id=task_id, statement=data["statement"], role=data["role"],
        epistemic_status=data["epistemic_status"], scope=data.get("scope", "task"), facets=list(data["facets"]),
        valid_from=data["valid_from"], last_confirmed=data.get("last_confirmed"), confidence=data.get("confidence"),
        supersedes=list(data.get("supersedes") or []), source_ref=ref,
        # A claim is the user's own words only when the user made it (role) from the user's own event:
        # a promotion the user confirmed stays a system inference.
        direct_user=(not imported) and data["role"] == "user" and direct_user(event["actor"], ref),
        added_sequence=event.get("sequence", 0), added_index=index,
        imported=imported,
    )
    state.add_claim(claim)
    return claim


def _supersede(state: IntentState, new: Claim | None, new_id: str, old_ids: list[str], task_id: str, near: dict[str, Claim]) -> None:
    """``near``: claims the event itself added (an import's), looked up before the state."""
    for old_id in old_ids:
        old = near.get(old_id) or state.find_claim(old_id, task_id)
        if old is not None:
            state.retire(old, "superseded", superseded_by=new_id)
        state.add_edge(new, new_id, old, old_id, task_id)


def _task(state: IntentState, event: dict[str, Any], payload: dict[str, Any]) -> Task:
    task = Task(
        task_id=event["task_id"], project_id=event["project_id"], mode=payload.get("mode", "on"),
        started_at=event["occurred_at"], label=payload.get("label"), sequence=event.get("sequence", 0),
    )
    state.tasks[task.task_id] = task
    state.project_ids.add(task.project_id)
    return task


def evolve(state: IntentState, event: dict[str, Any]) -> IntentState:
    kind = event["event_type"]
    payload = event.get("payload") or {}
    task_id = event["task_id"]
    if kind == "task_started":
        _task(state, event, payload)
        for index, data in enumerate(payload.get("initial_claims", ())):
            _claim(state, event, data, task_id, index=index)
    elif kind == "mode_set":
        task = state.tasks.get(task_id)
        if task is not None:
            task.mode = payload["mode"]
    elif kind == "claim_added":
        _claim(state, event, payload["claim"], task_id)
    elif kind == "claim_replaced":
        claim = _claim(state, event, payload["claim"], task_id)
        _supersede(state, claim, claim.claim_id, payload.get("superseded", claim.supersedes), task_id, {})
    elif kind == "claim_invalidated":
        claim = state.find_claim(payload["claim_id"], task_id)
        if claim is not None:
            state.retire(claim, "invalidated", invalidated_at=event["occurred_at"], invalidation_reason=payload.get("reason"))
    elif kind == "candidate_added":
        state.candidates[payload["candidate_id"]] = Candidate(
            candidate_id=payload["candidate_id"], task_id=task_id, signal_key=payload["signal_key"],
            statement=payload["statement"], facets=list(payload["facets"]), source_ref=payload.get("source_ref") or {},
        )
    elif kind == "result_signal_observed":
        if payload.get("claim"):
            _claim(state, event, payload["claim"], task_id)
    elif kind == "graph_imported":
        _import(state, event, payload)
    if kind == "claim_added" and payload.get("promoted_from"):
        for candidate in state.candidates.values():
            if candidate.signal_key == payload["promoted_from"]["signal_key"]:
                candidate.promoted = True
    state.sequence = event.get("sequence", state.sequence + 1)
    state.head = event.get("event_hash")
    return state


def _import(state: IntentState, event: dict[str, Any], payload: dict[str, Any]) -> None:
    state.project_ids.add(event["project_id"])
    for data in payload.get("tasks", ()):
        state.tasks[data["task_id"]] = Task(
            task_id=data["task_id"], project_id=event["project_id"], mode=data.get("mode", "on"),
            started_at=data.get("started_at", event["occurred_at"]), label=data.get("label"),
            history_incomplete=True, sequence=event.get("sequence", 0),
        )
    added: dict[str, Claim] = {}
    for index, data in enumerate(payload.get("claims", ())):
        claim = added[data["claim_id"]] = _claim(state, event, data, data["task_id"], index=index, imported=True)
        lifecycle = data.get("lifecycle") or {}
        if lifecycle.get("state") == "invalidated":
            state.retire(
                claim, "invalidated", invalidated_at=lifecycle.get("invalidated_at"), invalidation_reason=lifecycle.get("reason"),
            )
    for data in payload.get("claims", ()):
        if data.get("supersedes"):
            _supersede(state, added.get(data["claim_id"]), data["claim_id"], data["supersedes"], data["task_id"], added)
    for data in payload.get("candidates", ()):
        state.candidates[data["candidate_id"]] = Candidate(
            candidate_id=data["candidate_id"], task_id=data["task_id"], signal_key=data["signal_key"],
            statement=data["statement"], facets=list(data["facets"]), source_ref=data.get("source_ref") or {},
            promoted=bool(data.get("promoted")),
        )
