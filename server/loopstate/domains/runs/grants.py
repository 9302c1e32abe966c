"""decide for grant streams (``grants.<grant_id>``): record a grant once, revoke it for good.

A grant is immutable once recorded (no silent elevation); revocation is
irreversible truth. The grant stream's lock is the per-grant cooperative
lock: revocation holds it exclusively through the grant update, and every run
mutation holds it shared through its final grant check and its append.
"""

from __future__ import annotations

import datetime as dt
from typing import Any

from loopstate_protocol import runs as proto
from loopstate_protocol.errors import ErrorCode

from loopstate.core.clock import format_time, parse_time
from loopstate.core.errors import LoopstateError
from loopstate.core.ids import derived_uuid4
from loopstate.domains.base import Context
from loopstate.domains.runs import records
from loopstate.domains.runs.state import GrantState

DEFAULT_GRANT_HOURS = 24


def default_grant_id(run_id: str) -> str:
    """The grant a run created without one is bound to: one per run, so a retried create finds it."""
    return derived_uuid4("runs.default-grant", run_id.lower())


def default_grant(c: proto.Create, run_id: str, now: dt.datetime) -> proto.AuthorityGrant:
    """The default local authority for a create that names no grant: the narrowest grant that lets the run work.

    Level attended, scope this asset with only the exact local pair (local_write to
    repository), so every outward action stays fail-closed; it expires (no grant is
    non-expiring) and can be revoked like any other.
    """
    asset = c.asset["name"]  # the create's actor and asset are records by now (check_create)
    return proto.AuthorityGrant(
        grant_id=default_grant_id(run_id), level="attended", actor=c.actor["actor"],
        scope={"assets": [asset], "actions": ["local_write"], "destinations": ["repository"], "exclusions": []},
        risks_shown=[f"Files of asset {asset} inside the repository may be changed by the agent."],
        confirmation_text="default local authority (a run created without a grant)",
        expires_at=format_time(now + dt.timedelta(hours=DEFAULT_GRANT_HOURS)),
    )


def _event(type_: str, grant: dict[str, Any], ctx: Context) -> dict[str, Any]:
    return {"schema_version": records.SCHEMA_VERSION, "event_id": ctx.new_id(), "type": type_,
            "at": format_time(ctx.now), "grant": grant}


def grant(state: GrantState, c: proto.AuthorityGrant, ctx: Context) -> list[dict[str, Any]]:
    if state.grant is not None:
        raise LoopstateError(ErrorCode.CONFLICT, f"grant {state.grant_id} already exists; grants never change once "
                             "confirmed (no silent elevation): create a new grant", grant_id=state.grant_id)
    record = {
        "schema_version": records.SCHEMA_VERSION, "grant_id": state.grant_id, "level": c.level, "actor": c.actor,
        "scope": c.scope, "risks_shown": c.risks_shown, "confirmation_text": c.confirmation_text,
        "confirmed_at": format_time(ctx.now), "expires_at": c.expires_at, "revoked_at": None, "revoked_by": None,
        "permanent_invariants": list(c.permanent_invariants if c.permanent_invariants is not None else records.PERMANENT_INVARIANTS),
    }
    checked = records.to_dict(records.validate("grant", record))
    return [_event("grant_recorded", checked, ctx)]


def revoke(state: GrantState, c: proto.AuthorityRevoke, ctx: Context) -> list[dict[str, Any]]:
    if state.grant is None:
        raise LoopstateError(ErrorCode.NOT_FOUND, f"grant {state.grant_id} does not exist; check the id (`loopstate run authority grant` prints it)", grant_id=state.grant_id)
    if not c.revoked_by:
        raise records.refuse("revoke", "$.revoked_by", "length", "name who revokes the grant")
    if state.grant["revoked_at"] is not None:
        return []  # irreversible and already true; run markers are repaired after commit
    if ctx.now < parse_time(state.grant["confirmed_at"]):
        raise LoopstateError(ErrorCode.CLOCK_REVERSED, "the clock reads earlier than the grant's confirmation; mutation halts until the clock is right")
    revoked = {**state.grant, "revoked_at": format_time(ctx.now), "revoked_by": c.revoked_by}
    return [_event("grant_revoked", records.to_dict(records.validate("grant", revoked)), ctx)]


def decide_grant(state: GrantState, command: Any, ctx: Context) -> list[dict[str, Any]]:
    if isinstance(command, proto.AuthorityGrant):
        return grant(state, command, ctx)
    return revoke(state, command, ctx)
