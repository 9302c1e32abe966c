"""A command's events under construction, each carrying the complete after-state.

A Plan starts from the folded state, and every ``emit`` writes one audit event
with the audit envelope (event id, run id, lease id and generation, type,
actor, at, data) and the complete projection (run, lease, pending operation)
as it stands after that event. All events of one command share the command's
single injected timestamp. Duration proof is added once, before the first
event, for the open lease interval up to ``now`` (never beyond the lease's
prior expiry).
"""

from __future__ import annotations

import copy
from typing import Any

from loopstate.core.clock import format_time, parse_time
from loopstate.domains.base import Context
from loopstate.domains.runs import budgets
from loopstate.domains.runs.records import SCHEMA_VERSION
from loopstate.domains.runs.state import RECORD_FIELD, RunState

SYSTEM_ACTOR = {"harness": "manual", "actor": "loopstate", "session_id": "loopstate"}


class Plan:
    def __init__(self, state: RunState, ctx: Context) -> None:
        self.state = state
        self.ctx = ctx
        self.now = ctx.now
        self.at = format_time(ctx.now)
        self.run: dict[str, Any] | None = copy.deepcopy(state.run)
        self.lease: dict[str, Any] | None = copy.deepcopy(state.lease)
        self.pending: dict[str, Any] | None = copy.deepcopy(state.pending)
        self.issues = dict(state.issues)
        self.events: list[dict[str, Any]] = []
        self.revoked_markers = set(state.revoked_markers)
        self._accrued = False

    # time -------------------------------------------------------------------------

    def lease_expired(self) -> bool:
        return self.lease is not None and self.now >= parse_time(self.lease["expires_at"], field="lease.expires_at")

    def accrue(self) -> None:
        """Add the time proven since the interval's anchor, capped at the lease's expiry."""
        if self._accrued:
            return
        self._accrued = True
        anchor = self.state.anchor()
        if anchor is None or self.run is None or self.lease is None:
            return
        end = min(self.now, parse_time(self.lease["expires_at"], field="lease.expires_at"))
        budgets.add_duration(self.run["usage"], anchor, end)

    # emission ------------------------------------------------------------------------

    def emit(self, type_: str, data: dict[str, Any], *, actor: dict[str, Any] | None = None,
             envelope: dict[str, Any] | None = None, record: dict[str, Any] | None = None,
             at: str | None = None, projection: dict[str, Any] | None = None) -> dict[str, Any]:
        """Append one event; ``envelope`` is the lease the event acts under (None: lease-independent)."""
        if projection is None:
            self.accrue()
            if self.run is not None:
                self.run["updated_at"] = self.at
            projection = {
                "run": copy.deepcopy(self.run),
                "lease": copy.deepcopy(self.lease),
                "pending_operation": copy.deepcopy(self.pending),
            }
        event = {
            "schema_version": SCHEMA_VERSION,
            "event_id": self.ctx.new_id(),
            "run_id": self.state.run_id,
            "lease_id": None if envelope is None else envelope["lease_id"],
            "lease_generation": None if envelope is None else envelope["generation"],
            "type": type_,
            "actor": copy.deepcopy(actor or SYSTEM_ACTOR),
            "at": at or self.at,
            "data": data,
            "projection": projection,
        }
        if record is not None:
            event[RECORD_FIELD] = record
        self.events.append(event)
        if type_ == "authority_revoked":
            self.revoked_markers.add(data["grant_id"])
        return event

    # projection helpers -------------------------------------------------------------

    def set_status(self, status: str, code: str | None = None, explanation: str | None = None) -> None:
        assert self.run is not None
        self.run["status"] = status
        if code is None:
            self.run["terminal_reason"] = None
        else:
            self.run["terminal_reason"] = {"code": code, "explanation": explanation or code}

    def recount_blocking(self) -> None:
        assert self.run is not None
        self.run["open_blocking_issues"] = sum(
            1 for issue in self.issues.values() if issue["blocking"] and issue["status"] != "closed"
        )

    def exhausted(self) -> list[tuple[str, str | None]]:
        assert self.run is not None
        return budgets.exhausted_keys(self.run["budgets"], self.run["usage"])

    def fail_if_exhausted(self, *, also_expired: bool = False) -> bool:
        """Project failed with the first stable-priority budget (or lease expiry) as primary reason."""
        keys = self.exhausted()
        if keys:
            field = keys[0][0]
            self.set_status("failed", f"budget_reached:{field}", f"the frozen {field} budget was reached")
            return True
        if also_expired:
            self.set_status("failed", "lease_expired", "the work returned at or after the lease's exact expiry")
            return True
        return False
