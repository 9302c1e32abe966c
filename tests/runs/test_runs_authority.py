"""Authority grants, revocation markers, and revocation linearized against intents by the grant lock."""

from __future__ import annotations

import json

import pytest

from loopstate_protocol import runs as proto
from loopstate_protocol.errors import ErrorCode

from loopstate.core.errors import LoopstateError
from loopstate.service.engine import Service
from tests.runs.conftest import AGENT, LOCAL_SCOPE, as_json, lease_args, spawn

pytestmark = pytest.mark.both_stores  # docs/storage.md, *Which tests run on PostgreSQL*

INTEND = {"completion_event_type": "stage_started", "completion_data": {"stage": "build"},
          "action": "local_write", "destination": "repository"}


def refused(h, command, code: ErrorCode) -> LoopstateError:
    with pytest.raises(LoopstateError) as info:
        h.run(command)
    assert info.value.code == code, info.value
    return info.value


def grant_command(grant_id: str, **overrides) -> proto.AuthorityGrant:
    fields = dict(grant_id=grant_id, level="bounded", actor="synthetic-user", scope=LOCAL_SCOPE,
                  risks_shown=["Local files may change."], confirmation_text="CONFIRM", expires_at="2026-08-16T10:00:00Z")
    return proto.AuthorityGrant(**{**fields, **overrides})


def test_grant_is_recorded_with_all_eight_invariants_and_confirmation_time(h):
    grant_id = h.grant()
    grant = h.service.query(h.root, proto.GrantShow(grant_id=grant_id))
    assert grant["confirmed_at"] == "2026-08-16T08:00:00Z" and grant["revoked_at"] is None
    assert len(grant["permanent_invariants"]) == 8


def test_grant_omitting_an_invariant_is_refused(h):
    error = refused(h, grant_command(h.ids(), permanent_invariants=["audit_log", "leases"]), ErrorCode.VALIDATION_FAILED)
    assert error.details["rule"] == "permanent_invariants"


def test_grant_already_expired_is_refused(h):
    error = refused(h, grant_command(h.ids(), expires_at="2026-08-16T07:00:00Z"), ErrorCode.VALIDATION_FAILED)
    assert error.details["rule"] == "grant_expires"


def test_grant_never_changes_once_recorded(h):
    grant_id = h.grant()
    refused(h, grant_command(grant_id, level="full"), ErrorCode.CONFLICT)


def test_expired_grant_denies_acquisition(h):
    grant_id = h.grant(expires="2026-08-16T08:30:00Z")
    run_id = h.create(grant_id)
    h.clock.set("2026-08-16T08:30:00Z")
    error = refused(h, proto.Acquire(run_id=run_id, owner=AGENT), ErrorCode.AUTHORITY_DENIED)
    assert "expired" in error.message


def test_expired_grant_denies_new_intents(h):
    grant_id = h.grant(expires="2026-08-16T08:02:00Z")
    run_id, lease = h.leased(grant_id=grant_id)
    h.clock.advance(120)
    refused(h, proto.Intend(run_id=run_id, **INTEND, **lease_args(lease)), ErrorCode.AUTHORITY_DENIED)


def test_revocation_reduces_active_work_to_waiting_approval_with_one_marker_per_run(h):
    grant_id = h.grant()
    runs = [h.leased(grant_id=grant_id) for _ in range(2)]
    ready = h.create(grant_id)
    h.clock.advance(5)
    h.run(proto.AuthorityRevoke(grant_id=grant_id, revoked_by="synthetic-user"))
    for run_id, _ in runs:
        events = h.events(run_id)
        assert [e["type"] for e in events].count("authority_revoked") == 1
        assert events[-1]["data"] == {"grant_id": grant_id, "revoked_at": "2026-08-16T08:00:05Z", "revoked_by": "synthetic-user"}
        assert events[-1]["projection"]["run"]["status"] == "waiting_approval"
    ready_events = h.events(ready)
    assert ready_events[-1]["type"] == "authority_revoked"
    assert ready_events[-1]["projection"]["run"]["status"] == "ready"
    assert ready_events[-1]["projection"]["run"]["authority_grant_id"] == grant_id  # binding not rewritten


def test_revoking_again_changes_nothing_and_never_duplicates_a_marker(h):
    grant_id = h.grant()
    run_id, _ = h.leased(grant_id=grant_id)
    h.run(proto.AuthorityRevoke(grant_id=grant_id, revoked_by="synthetic-user"))
    again = h.run(proto.AuthorityRevoke(grant_id=grant_id, revoked_by="someone-else"))
    assert again.events == []
    assert [e["type"] for e in h.events(run_id)].count("authority_revoked") == 1
    assert h.service.query(h.root, proto.GrantShow(grant_id=grant_id))["revoked_by"] == "synthetic-user"


def test_revoked_grant_denies_acquisition_and_the_ready_run_keeps_its_binding(h):
    grant_id = h.grant()
    run_id = h.create(grant_id)
    h.run(proto.AuthorityRevoke(grant_id=grant_id, revoked_by="synthetic-user"))
    error = refused(h, proto.Acquire(run_id=run_id, owner=AGENT), ErrorCode.AUTHORITY_DENIED)
    assert "continue with a new run created under a current grant" in error.message
    error = refused(h, proto.Resume(run_id=run_id, owner=AGENT, reason="try"), ErrorCode.INVALID_TRANSITION)
    assert "was revoked" in error.message and "new run created under a current grant" in error.message
    events = h.events(run_id)
    assert [e["type"] for e in events] == ["run_created", "authority_granted", "authority_revoked"]
    assert events[-1]["projection"]["run"]["authority_grant_id"] == grant_id
    assert events[-1]["projection"]["run"]["status"] == "ready"


def test_a_missing_revocation_marker_is_repaired_before_use_is_denied(h, data_dir):
    grant_id = h.grant()
    run_id, lease = h.leased(grant_id=grant_id)
    # Revoke through a service without the runs effects' after-commit sweep: the marker is missing.
    from loopstate.domains.runs import grant_stream
    from loopstate.domains.runs import DOMAIN

    plain = Service(data_dir=data_dir, clock=h.clock, new_id=h.ids)
    project = plain.project(h.root)
    folded = plain.folded(project, DOMAIN, grant_stream(grant_id))
    from loopstate.domains.runs.grants import revoke

    with folded.ledger.mutation() as tx:
        tx.append(revoke(folded.state, proto.AuthorityRevoke(grant_id=grant_id, revoked_by="synthetic-user"),
                         plain.context(project)))
    assert "authority_revoked" not in [e["type"] for e in h.events(run_id)]
    error = refused(h, proto.Intend(run_id=run_id, **INTEND, **lease_args(lease)), ErrorCode.AUTHORITY_DENIED)
    assert [e["type"] for e in error.details["events"]] == ["authority_revoked"]
    refused(h, proto.Intend(run_id=run_id, **INTEND, **lease_args(lease)), ErrorCode.INVALID_TRANSITION)
    assert [e["type"] for e in h.events(run_id)].count("authority_revoked") == 1


def test_durable_intent_finishes_exactly_once_under_its_recorded_authority_then_the_marker_follows(h):
    grant_id = h.grant()
    run_id, lease = h.leased(grant_id=grant_id)
    pending = h.run(proto.Intend(run_id=run_id, **INTEND, **lease_args(lease))).events[0]["data"]
    h.run(proto.AuthorityRevoke(grant_id=grant_id, revoked_by="synthetic-user"))
    assert "authority_revoked" not in [e["type"] for e in h.events(run_id)]  # never between intent and closure
    events = h.run(proto.Complete(run_id=run_id, operation_id=pending["operation_id"], completion_event_type="stage_started",
                                  completion_data={"stage": "build"}, **lease_args(lease))).events
    assert [e["type"] for e in events] == ["stage_started", "authority_revoked"]
    assert events[-1]["projection"]["run"]["status"] == "waiting_approval"


def test_recovery_may_replace_a_revoked_grant_with_a_current_one(h):
    grant_id = h.grant()
    run_id, lease = h.leased(grant_id=grant_id)
    h.run(proto.AuthorityRevoke(grant_id=grant_id, revoked_by="synthetic-user"))
    refused(h, proto.Resume(run_id=run_id, owner=AGENT, reason="x", **lease_args(lease)), ErrorCode.AUTHORITY_DENIED)
    replacement = h.grant()
    events = h.run(proto.Resume(run_id=run_id, owner=AGENT, reason="new grant", authority_grant_id=replacement,
                                **lease_args(lease))).events
    assert events[-1]["projection"]["run"]["authority_grant_id"] == replacement
    assert events[-1]["projection"]["run"]["status"] == "active"
    assert [e["type"] for e in events] == ["recovery_started", "authority_granted"]  # the new binding is visible
    assert events[-1]["data"] == {"grant_id": replacement, "level": "bounded"}
    assert events[-1]["lease_id"] == events[0]["lease_id"]


@pytest.mark.jsonl_only("holds the grant's lock file from another process")
def test_revocation_waits_for_an_intent_holding_the_shared_grant_lock(h):
    grant_id = h.grant()
    holder = spawn(h, "hold", h.root, f"grants.{grant_id}", "shared")
    try:
        assert holder.stdout.readline().strip() == "held"
        quick = Service(data_dir=h.data_dir, clock=h.clock, new_id=h.ids, lock_timeout=0.3)
        with pytest.raises(LoopstateError) as info:
            quick.execute(h.root, proto.AuthorityRevoke(grant_id=grant_id, revoked_by="u"), "revoke-1")
        assert info.value.code == ErrorCode.LOCK_TIMEOUT
    finally:
        holder.kill()
        holder.wait()


def test_intent_waits_while_a_revocation_holds_the_grant_lock_exclusively(h):
    grant_id = h.grant()
    run_id, lease = h.leased(grant_id=grant_id)
    holder = spawn(h, "hold", h.root, f"grants.{grant_id}", "exclusive")
    try:
        assert holder.stdout.readline().strip() == "held"
        quick = Service(data_dir=h.data_dir, clock=h.clock, new_id=h.ids, lock_timeout=0.3)
        with pytest.raises(LoopstateError) as info:
            quick.execute(h.root, proto.Intend(run_id=run_id, **INTEND, **lease_args(lease)), "intend-1")
        assert info.value.code == ErrorCode.LOCK_TIMEOUT
    finally:
        holder.kill()
        holder.wait()
    assert h.status(run_id).pending_operation is None


@pytest.mark.slow
@pytest.mark.parametrize("attempt", range(4))
def test_revocation_racing_an_intent_from_another_process_lands_on_exactly_one_side(h, attempt):
    grant_id = h.grant()
    run_id, lease = h.leased(grant_id=grant_id)
    now = "2026-08-16T08:00:01Z"
    children = [
        spawn(h, "exec", h.root, now, as_json(proto.Intend(run_id=run_id, **INTEND, **lease_args(lease))), "go"),
        spawn(h, "exec", h.root, now, as_json(proto.AuthorityRevoke(grant_id=grant_id, revoked_by="u")), "go"),
    ]
    for child in children:
        assert child.stdout.readline().strip() == "ready"
    for child in children:
        child.stdin.write("go\n")
        child.stdin.flush()
    intent, revocation = (json.loads(child.communicate(timeout=60)[0]) for child in children)
    assert revocation == {"ok": ["grant_revoked"]}
    types = [e["type"] for e in h.events(run_id)]
    if "ok" in intent:  # the intent won: it is durable, the marker waits for its closure
        assert intent["ok"] == ["operation_intended"] and "authority_revoked" not in types
        assert h.status(run_id).pending_operation is not None
    else:  # the revocation won: the intent was refused and the marker is written exactly once
        assert intent["error"] in ("AUTHORITY_DENIED", "INVALID_TRANSITION")
        assert "operation_intended" not in types and types.count("authority_revoked") == 1
    h.clock.set("2026-08-16T08:00:02Z")
    h.run(proto.Sync(run_id=run_id))
    assert [e["type"] for e in h.events(run_id)].count("authority_revoked") == (0 if "ok" in intent else 1)


def test_stop_and_revoke_together_end_halted_with_both_truths(h, root):
    grant_id = h.grant()
    run_id, lease = h.leased(grant_id=grant_id)
    (root / ".loopstate").mkdir()
    (root / ".loopstate" / "STOP").touch()
    h.run(proto.AuthorityRevoke(grant_id=grant_id, revoked_by="synthetic-user"))
    events = h.events(run_id)
    assert [e["type"] for e in events][-2:] == ["authority_revoked", "kill_switch_detected"]
    assert events[-2]["projection"]["run"]["status"] == "active"  # kill-switch truth decides the final state
    assert events[-1]["projection"]["run"]["status"] == "halted_kill_switch"
