"""The runs Decider with plain values: given events, when a command, then events. No files, no clock."""

from __future__ import annotations

import pytest

from loopstate_protocol import runs as proto

from loopstate.core.chain import Position, seal
from loopstate.core.clock import parse_time
from loopstate.core.ids import SequentialIds
from loopstate.domains.base import Context
from loopstate.domains.runs import DOMAIN, LAYOUT
from loopstate.domains.runs.machine import KILLABLE
from tests.runs.conftest import AGENT, ASSET, LOCAL_SCOPE, USER

RUN_ID = "00000000-0000-4000-8000-0000000000aa"
GRANT = {
    "schema_version": "1.0", "grant_id": "00000000-0000-4000-8000-0000000000bb", "level": "bounded",
    "actor": "synthetic-user", "scope": LOCAL_SCOPE, "risks_shown": ["r"], "confirmation_text": "C",
    "confirmed_at": "2026-08-16T07:00:00Z", "expires_at": "2026-08-16T18:00:00Z", "revoked_at": None, "revoked_by": None,
    "permanent_invariants": ["visible_authority", "audit_log", "evidence_required", "run_ownership", "leases",
                             "external_kill_switch", "faithful_failure", "no_silent_elevation"],
}
SWITCH = {"path": ".loopstate/STOP", "state": "present"}


class Given:
    """Folds the events each decided command returns, sealed as the core would seal them."""

    def __init__(self) -> None:
        self.state = DOMAIN.initial(f"runs.{RUN_ID}")
        self.position = Position()
        self.ids = SequentialIds(prefix=3)

    def ctx(self, at: str, **extra) -> Context:
        return Context(now=parse_time(at), new_id=self.ids, project_id="p", project_root="/nonexistent",
                       request_id="r", extra={"grant": GRANT, **extra})

    def when(self, command, at: str = "2026-08-16T08:00:00Z", **extra) -> list[dict]:
        events = DOMAIN.decide(self.state, command, self.ctx(at, **extra))
        for event in events:
            sealed, _ = seal(event, LAYOUT, self.position)
            self.position = Position(0, sealed["sequence"], sealed["event_digest"])
            self.state = DOMAIN.evolve(self.state, sealed)
        return events


def active_run() -> tuple[Given, dict]:
    g = Given()
    g.when(proto.Create(run_id=RUN_ID, asset=ASSET, objective="o", done_gate=["d"], authority_grant_id=GRANT["grant_id"],
                        actor=USER))
    g.when(proto.Acquire(run_id=RUN_ID, owner=AGENT))
    lease = g.state.lease
    return g, {"lease_id": lease["lease_id"], "generation": lease["generation"]}


def in_status(status: str) -> Given:
    if status == "ready":
        g = Given()
        g.when(proto.Create(run_id=RUN_ID, asset=ASSET, objective="o", done_gate=["d"],
                            authority_grant_id=GRANT["grant_id"], actor=USER))
        return g
    g, held = active_run()
    if status == "halted_kill_switch":
        g.when(proto.Sync(run_id=RUN_ID), kill_switch=SWITCH)
    elif status != "active":
        g.when(proto.Transition(run_id=RUN_ID, to=status, reason="x", **held))
    assert g.state.run["status"] == status
    return g


ALL = ["ready", "active", "waiting_approval", "waiting_external", "blocked", "failed", "halted_kill_switch",
       "complete", "cancelled"]


@pytest.mark.parametrize("status", ALL)
def test_kill_switch_reducer_table(status):
    g = in_status(status)
    events = g.when(proto.Sync(run_id=RUN_ID), at="2026-08-16T08:00:01Z", kill_switch=SWITCH)
    if status in KILLABLE:
        assert [e["type"] for e in events][-1] == "kill_switch_detected"
        assert events[-1]["projection"]["run"]["status"] == "halted_kill_switch"
    else:
        assert events == []


@pytest.mark.parametrize("status", ALL)
def test_recovery_table(status):
    g = in_status(status)
    held = {} if g.state.lease is None else {"lease_id": g.state.lease["lease_id"], "generation": g.state.lease["generation"]}
    recoverable = status in ("waiting_approval", "waiting_external", "blocked", "failed", "halted_kill_switch")
    if recoverable:
        events = g.when(proto.Resume(run_id=RUN_ID, owner=AGENT, reason="r", **held), at="2026-08-16T08:00:01Z")
        assert events[-1]["type"] == "recovery_started" and events[-1]["projection"]["run"]["status"] == "active"
    else:
        from loopstate.core.errors import LoopstateError

        with pytest.raises(LoopstateError):
            g.when(proto.Resume(run_id=RUN_ID, owner=AGENT, reason="r", **held), at="2026-08-16T08:00:01Z")


def test_decide_is_deterministic_for_the_same_state_time_and_ids():
    first, held = active_run()
    second, _ = active_run()
    command = proto.StageStart(run_id=RUN_ID, stage="build", **held)
    assert first.when(command, at="2026-08-16T08:01:00Z") == second.when(command, at="2026-08-16T08:01:00Z")


def test_a_refusal_after_a_safety_write_is_left_for_the_service_in_ctx():
    g, held = active_run()
    ctx = g.ctx("2026-08-16T08:00:01Z", kill_switch=SWITCH)
    events = DOMAIN.decide(g.state, proto.StageStart(run_id=RUN_ID, stage="build", **held), ctx)
    assert [e["type"] for e in events] == ["kill_switch_detected"]
    assert ctx.extra["refusal"].code.value == "KILL_SWITCH"
