"""evolve(state, event) -> state: fold one verified intent event into the state.

Lifecycle is event-derived: claim_invalidated makes a claim inactive,
claim_replaced adds a claim and marks the ids it supersedes. The state object
is owned by the one ledger reader that folds it, so it is updated in place,
through the state's own methods, which keep its indexes (state.py).
"""

from __future__ import annotations

from typing import Any

from loopstate.domains.intent import retired
from loopstate.domains.intent.records import CURRENT_TASK_SET, Candidate, Claim, Task
from loopstate.domains.intent.state import IntentState


def _claim(
    state: IntentState, event: dict[str, Any], data: dict[str, Any], task_id: str, place: retired.Place | None,
    *, index: int = 0, imported: bool = False,
) -> Claim:
    task = state.tasks.get(task_id)
    if task is not None:
        task_id = task.task_id  # one string per task, not one per claim (and per edge)
    claim = retired.build_claim(event, data, task_id, index=index, imported=imported, place=place)
    state.add_claim(claim)
    return claim


def _supersede(
    state: IntentState, new: Claim | None, new_id: str, old_ids: list[str], task_id: str, near: dict[str, Claim],
    place: retired.Place | None, index: int,
) -> None:
    """``near``: claims the event itself added (an import's), looked up before the state; ``place`` and
    ``index``: the record that supersedes and the superseding claim's index in it."""
    new_task = new.task_id if new is not None else task_id
    for old_id in old_ids:
        old = near.get(old_id)
        edge = (new_id, new_task)
        if old is not None and old.active:
            state.retire(old, "superseded", place, index, edge=edge, superseded_by=new_id)
        elif not state.retire_id(old_id, old.task_id if old is not None else task_id, "superseded", place, index, edge=edge, superseded_by=new_id):
            state.add_missing_edge(new_id, new_task, old_id)


def _task(state: IntentState, event: dict[str, Any], payload: dict[str, Any]) -> Task:
    task = Task(
        task_id=event["task_id"], project_id=event["project_id"], mode=payload.get("mode", "on"),
        started_at=event["occurred_at"], label=payload.get("label"), sequence=event.get("sequence", 0),
    )
    state.tasks[task.task_id] = task
    state.project_ids.add(task.project_id)
    return task


def evolve(state: IntentState, event: dict[str, Any], at: int | None = None) -> IntentState:
    """``at``: the offset of the event's line in the stream, for
    claims retired later to keep that place instead of their content; None for an event folded from
    memory (a private task's)."""
    kind = event["event_type"]
    payload = event.get("payload") or {}
    task_id = event["task_id"]
    place = None if at is None else (at, event["event_hash"])
    if kind == "task_started":
        _task(state, event, payload)
        if payload.get("current"):
            state.current = (task_id, "started", event.get("sequence", state.sequence + 1))
        for index, data in enumerate(payload.get("initial_claims", ())):
            _claim(state, event, data, task_id, place, index=index)
    elif kind == "mode_set":
        task = state.tasks.get(task_id)
        if task is not None:
            task.mode = payload["mode"]
    elif kind == "claim_added":
        _claim(state, event, payload["claim"], task_id, place)
    elif kind == "claim_replaced":
        claim = _claim(state, event, payload["claim"], task_id, place)
        _supersede(state, claim, claim.claim_id, payload.get("superseded", claim.supersedes), task_id, {}, place, 0)
    elif kind == "claim_invalidated":
        state.retire_id(
            payload["claim_id"], task_id, "invalidated", place, 0,
            invalidated_at=event["occurred_at"], invalidation_reason=payload.get("reason"),
        )
    elif kind == "candidate_added":
        state.candidates[payload["candidate_id"]] = Candidate(
            candidate_id=payload["candidate_id"], task_id=task_id, signal_key=payload["signal_key"],
            statement=payload["statement"], facets=list(payload["facets"]), source_ref=payload.get("source_ref") or {},
        )
    elif kind == "result_signal_observed":
        if payload.get("claim"):
            _claim(state, event, payload["claim"], task_id, place)
    elif kind == "graph_imported":
        _import(state, event, payload, place)
    elif kind == CURRENT_TASK_SET:
        state.current = (task_id, payload["reason"], event.get("sequence", state.sequence + 1))
    if kind == "claim_added" and payload.get("promoted_from"):
        for candidate in state.candidates.values():
            if candidate.signal_key == payload["promoted_from"]["signal_key"]:
                candidate.promoted = True
    state.sequence = event.get("sequence", state.sequence + 1)
    state.head = event.get("event_hash")
    return state


def _import(state: IntentState, event: dict[str, Any], payload: dict[str, Any], place: retired.Place | None) -> None:
    state.project_ids.add(event["project_id"])
    for data in payload.get("tasks", ()):
        state.tasks[data["task_id"]] = Task(
            task_id=data["task_id"], project_id=event["project_id"], mode=data.get("mode", "on"),
            started_at=data.get("started_at", event["occurred_at"]), label=data.get("label"),
            history_incomplete=True, sequence=event.get("sequence", 0),
        )
    added: dict[str, Claim] = {}
    for index, data in enumerate(payload.get("claims", ())):
        claim = added[data["claim_id"]] = _claim(state, event, data, data["task_id"], place, index=index, imported=True)
        lifecycle = data.get("lifecycle") or {}
        if lifecycle.get("state") == "invalidated":
            state.retire(
                claim, "invalidated", place, index,
                invalidated_at=lifecycle.get("invalidated_at"), invalidation_reason=lifecycle.get("reason"),
            )
    for index, data in enumerate(payload.get("claims", ())):
        if data.get("supersedes"):
            _supersede(
                state, added.get(data["claim_id"]), data["claim_id"], data["supersedes"], data["task_id"], added, place, index,
            )
    for data in payload.get("candidates", ()):
        state.candidates[data["candidate_id"]] = Candidate(
            candidate_id=data["candidate_id"], task_id=data["task_id"], signal_key=data["signal_key"],
            statement=data["statement"], facets=list(data["facets"]), source_ref=data.get("source_ref") or {},
            promoted=bool(data.get("promoted")),
        )
