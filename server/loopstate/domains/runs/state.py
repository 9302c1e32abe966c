"""What a run's audit stream (and a grant's stream) folds into.

``evolve`` is pure and never raises: a projection-continuity break (a later
event changing the run's identity or frozen budgets, usage going backwards
outside a known_not_started rollback, a first event that is not run_created,
authority changing outside recovery, an event between an intent and its
closure, a lease envelope that is not the projected lease, an active run not
owned by its lease's owner, time running backwards) is remembered in ``broken`` and every mutation refuses while it stands, just
as a broken digest chain does. Reads still show what is there.
"""

from __future__ import annotations

import datetime as dt
from typing import Any, Literal

import msgspec

from loopstate.core.clock import parse_time
from loopstate.domains.runs import budgets

# The field loopstate adds to evidence and issue events beside the compatible ones: the full record after the event.
RECORD_FIELD = "loopstate_record"


class Obligation(msgspec.Struct, frozen=True):
    """A budget marker sequence owed after a source event: its keys and how many are written."""

    source: dict[str, Any]
    keys: tuple[tuple[str, str | None], ...]
    done: int = 0

    @property
    def missing(self) -> tuple[tuple[str, str | None], ...]:
        return self.keys[self.done:]


class RunState(msgspec.Struct, frozen=True):
    run_id: str
    sequence: int = 0
    last: dict[str, Any] | None = None
    last_at: dt.datetime | None = None
    run: dict[str, Any] | None = None
    lease: dict[str, Any] | None = None
    pending: dict[str, Any] | None = None
    issues: dict[str, dict[str, Any]] = msgspec.field(default_factory=dict)
    evidence: dict[str, dict[str, Any]] = msgspec.field(default_factory=dict)
    obligation: Obligation | None = None
    revoked_markers: frozenset[str] = frozenset()
    broken: str | None = None
    # The stage started and not yet completed, with the sequence of its stage_started
    # event (a later start of the same stage is a retry and moves it); None when none is.
    open_stage: str | None = None
    open_stage_sequence: int | None = None

    @property
    def exists(self) -> bool:
        return self.run is not None

    def anchor(self) -> dt.datetime | None:
        """Where the open lease interval began or was last extended: the last event, if it left the run active under a live lease."""
        if self.last is None or self.run is None or self.lease is None or self.run["status"] != "active":
            return None
        if self.last_at is None or self.last_at >= parse_time(self.lease["expires_at"]):
            return None
        return self.last_at


STATE_LAYOUT = 2  # bumped whenever RunState changes shape: a snapshot of another layout is not decoded


class RunSnapshot(msgspec.Struct, kw_only=True):
    """A run state as its projection snapshot holds it, with the layout it was written in.

    Layout 1 (before open stages were folded) had no wrapper: its bytes do not decode
    as this type, so such a snapshot is ignored (a full fold) instead of read as a
    state that has no open stage."""

    layout: Literal[2]
    state: RunState


def _open_stage(state: RunState, event: dict[str, Any]) -> tuple[str | None, int | None]:
    """What stage is open after ``event``: a start opens its stage (replacing any other,
    as streams written before starts were checked may overlap), a completion of the open
    stage closes it, and nothing else changes it."""
    data = event.get("data") or {}
    if event.get("type") == "stage_started":
        return data.get("stage"), event.get("sequence")
    if event.get("type") == "stage_completed" and data.get("stage") == state.open_stage:
        return None, None
    return state.open_stage, state.open_stage_sequence


class GrantState(msgspec.Struct, frozen=True):
    grant_id: str
    sequence: int = 0
    grant: dict[str, Any] | None = None


def _is_source(state: RunState, event: dict[str, Any], keys: list) -> bool:
    """An event that must be followed by budget markers: the first to carry exhausted usage after work closed."""
    if not keys or event["type"] in ("budget_reached", "operation_intended"):
        return False
    if state.run is None:
        return False
    before = budgets.exhausted_keys(state.run["budgets"], state.run["usage"])
    return not before or (state.last is not None and state.last["type"] == "operation_intended")


def _continuity(state: RunState, event: dict[str, Any]) -> str | None:
    projection = event.get("projection") or {}
    run = projection.get("run")
    if not isinstance(run, dict) or run.get("run_id") != state.run_id or event.get("run_id") != state.run_id:
        return f"event {event.get('sequence')} does not project run {state.run_id}"
    if state.run is None:
        return None if event.get("type") == "run_created" else "the first event is not run_created"
    if event.get("type") == "run_created":
        return f"event {event.get('sequence')} repeats run_created"
    if run.get("budgets") != state.run["budgets"]:
        return f"event {event.get('sequence')} changes the frozen budgets"
    for key in ("asset", "objective", "done_gate", "mode", "created_at"):
        if run.get(key) != state.run.get(key):
            return f"event {event.get('sequence')} changes the mission identity ({key})"
    rollback = event.get("type") == "operation_reconciled" and event["data"].get("outcome") == "known_not_started"
    if not rollback and not budgets.usage_monotonic(state.run["usage"], run["usage"]):
        return f"event {event.get('sequence')} moves usage backwards"
    if run.get("authority_grant_id") != state.run["authority_grant_id"] and event.get("type") != "recovery_started":
        return f"event {event.get('sequence')} changes authority outside recovery"
    last = state.last or {}
    if last.get("type") == "operation_intended" and event.get("type") not in (
        last["data"].get("completion_event_type"), "operation_reconciled",
    ):
        return f"event {event.get('sequence')} ({event.get('type')}) comes between an intent and its closure"
    return None


def _envelope(event: dict[str, Any]) -> str | None:
    """The lease envelope must name the projected lease; an active run's owner is its lease's owner."""
    projection = event["projection"]
    lease, run = projection.get("lease"), projection["run"]
    if event.get("lease_id") is not None:
        if lease is None or (lease.get("lease_id"), lease.get("generation")) != (event["lease_id"], event.get("lease_generation")):
            return f"event {event.get('sequence')}'s lease envelope does not match its projected lease"
    if run.get("status") == "active" and (lease is None or run.get("owner") != lease.get("owner")):
        return f"event {event.get('sequence')} projects an active run whose owner is not its lease's owner"
    return None


def evolve_run(state: RunState, event: dict[str, Any]) -> RunState:
    broken = state.broken or _continuity(state, event)
    projection = event["projection"]
    run, lease, pending = projection["run"], projection["lease"], projection["pending_operation"]
    broken = broken or _envelope(event)
    try:
        at = parse_time(event["at"], field="at")
    except Exception:
        at = None
        broken = broken or f"event {event.get('sequence')} has an unparsable time"
    if at is not None and state.last_at is not None and at < state.last_at:
        broken = broken or f"event {event.get('sequence')} is timed before the event it follows"
    issues, evidence = state.issues, state.evidence
    record = event.get(RECORD_FIELD)
    if event["type"] in ("issue_opened", "issue_transitioned") and isinstance(record, dict):
        issues = {**issues, record["issue_id"]: record}
    elif event["type"] == "evidence_recorded" and isinstance(record, dict):
        evidence = {**evidence, record["evidence_id"]: record}
    obligation = state.obligation
    if event["type"] == "budget_reached":
        if obligation is not None:
            obligation = msgspec.structs.replace(obligation, done=obligation.done + 1)
            if not obligation.missing:
                obligation = None
    else:
        keys = budgets.exhausted_keys(run["budgets"], run["usage"])
        if _is_source(state, event, keys):
            obligation = Obligation(source=event, keys=tuple(keys))
    revoked = state.revoked_markers
    if event["type"] == "authority_revoked":
        revoked = revoked | {event["data"]["grant_id"]}
    open_stage, open_stage_sequence = _open_stage(state, event)
    return RunState(
        run_id=state.run_id, sequence=event["sequence"], last=event, last_at=at, run=run, lease=lease,
        pending=pending, issues=issues, evidence=evidence, obligation=obligation, revoked_markers=revoked,
        broken=broken, open_stage=open_stage, open_stage_sequence=open_stage_sequence,
    )


def evolve_grant(state: GrantState, event: dict[str, Any]) -> GrantState:
    return GrantState(grant_id=state.grant_id, sequence=event["sequence"], grant=event.get("grant"))
