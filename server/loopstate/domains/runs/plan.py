"""A command's events under construction, each carrying the complete after-state.

A Plan starts from the folded state, and every ``emit`` writes one audit event
with the audit envelope (event id, run id, lease id and generation, type,
actor, at, data) and the complete projection (run, lease, pending operation)
as it stands after that event. All events of one command share the command's
single injected timestamp. Duration proof is added once, before the first
event, for the open lease interval up to ``now`` (never beyond the lease's
prior expiry).

The state's records are plain JSON values (what the log decodes to), so the
Plan copies them with ``json_copy``, which walks only dicts and lists and
shares every immutable leaf, where ``copy.deepcopy`` also keeps a memo of
every object and dispatches on each one's type: ~12 against ~42 us for a run
record, and a command copies the run, lease and pending operation when it
starts and again for each event's projection.
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
_SHARED = (str, int, float, bool, type(None))  # immutable: shared between the copies


def _open_blocking(issue: dict[str, Any]) -> int:
    return 1 if issue["blocking"] and issue["status"] != "closed" else 0


class _Issues(dict[str, dict[str, Any]]):
    """The state's issues as a command changes them: a copy that notes which issue ids were set."""

    __slots__ = ("changed",)

    def __init__(self, issues: dict[str, dict[str, Any]]) -> None:
        super().__init__(issues)
        self.changed: set[str] = set()

    def __setitem__(self, issue_id: str, issue: dict[str, Any]) -> None:
        self.changed.add(issue_id)
        super().__setitem__(issue_id, issue)


def json_copy(value: Any) -> Any:
    """A deep copy of a JSON value (dicts and lists copied, immutable leaves shared).

    Anything else a caller put in (a tuple, a set) is handed to ``copy.deepcopy``,
    so the copy is as deep as deepcopy's whatever the value holds."""
    kind = type(value)
    if kind is dict:
        return {key: item if type(item) in _SHARED else json_copy(item) for key, item in value.items()}
    if kind is list:
        return [item if type(item) in _SHARED else json_copy(item) for item in value]
    if kind in _SHARED:
        return value
    return copy.deepcopy(value)


class Plan:
    def __init__(self, state: RunState, ctx: Context) -> None:
        self.state = state
        self.ctx = ctx
        self.now = ctx.now
        self.at = format_time(ctx.now)
        self.run: dict[str, Any] | None = json_copy(state.run)
        self.lease: dict[str, Any] | None = json_copy(state.lease)
        self.pending: dict[str, Any] | None = json_copy(state.pending)
        self.issues = _Issues(state.issues)
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
                "run": json_copy(self.run),
                "lease": json_copy(self.lease),
                "pending_operation": json_copy(self.pending),
            }
        event = {
            "schema_version": SCHEMA_VERSION,
            "event_id": self.ctx.new_id(),
            "run_id": self.state.run_id,
            "lease_id": None if envelope is None else envelope["lease_id"],
            "lease_generation": None if envelope is None else envelope["generation"],
            "type": type_,
            "actor": json_copy(actor or SYSTEM_ACTOR),
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
        """The run's count of blocking issues not closed, over every issue of the run.

        The folded run carries that count for the state's issues (every event that
        changes an issue carries its command's recount in its projection), so only the
        issues this command changed are looked at: O(changed), where a count over the
        whole ledger cost ~90-130 us at 1,000 issues on every issue event. A run whose
        count is not a plain non-negative integer is counted in full."""
        assert self.run is not None
        base = self.state.run.get("open_blocking_issues") if self.state.run is not None else 0
        if type(base) is not int or base < 0:
            self.run["open_blocking_issues"] = sum(map(_open_blocking, self.issues.values()))
            return
        before = self.state.issues
        for issue_id in self.issues.changed:
            old = before.get(issue_id)
            base += _open_blocking(self.issues[issue_id]) - (0 if old is None else _open_blocking(old))
        self.run["open_blocking_issues"] = base

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
