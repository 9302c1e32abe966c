"""Authority grants: levels, scope with exclusions first, invariants, expiry, revocation.

A grant is current when it exists, is not revoked and ``now`` is before its
``expires_at``. Scope matching: an explicit exclusion wins over every positive
entry, wildcard included; ``*`` in a positive list matches anything not
excluded. Only the exact pair (action ``local_write``, destination
``repository``) is local work; any other action or destination is external and
fails closed unless the grant names it and the run has an external-action budget.
"""

from __future__ import annotations

import datetime as dt
from typing import Any

from loopstate_protocol.errors import ErrorCode

from loopstate.core.clock import parse_time
from loopstate.core.errors import LoopstateError

LOCAL_PAIR = ("local_write", "repository")
WILDCARD = "*"


def is_local(action: str, destination: str) -> bool:
    return (action, destination) == LOCAL_PAIR


def in_scope(entries: list[str], exclusions: list[str], value: str) -> bool:
    if value in exclusions or WILDCARD in exclusions:
        return False
    return value in entries or WILDCARD in entries


def denied(message: str, **details: Any) -> LoopstateError:
    return LoopstateError(ErrorCode.AUTHORITY_DENIED, message, **details)


def require_current(grant: dict[str, Any] | None, grant_id: str, now: dt.datetime) -> dict[str, Any]:
    """The grant, if it may authorize work at ``now``; otherwise AUTHORITY_DENIED saying why."""
    if grant is None:
        raise denied(f"authority grant {grant_id} does not exist; create one with `loopstate run authority grant`",
                     grant_id=grant_id)
    if grant["revoked_at"] is not None:
        raise denied(
            f"authority grant {grant_id} was revoked at {grant['revoked_at']} by {grant['revoked_by']}; "
            "create a new grant (a revoked grant is never restored)",
            grant_id=grant_id,
        )
    if now >= parse_time(grant["expires_at"]):
        raise denied(f"authority grant {grant_id} expired at {grant['expires_at']}; create a new grant", grant_id=grant_id)
    return grant


def require_asset(grant: dict[str, Any], asset: str) -> None:
    scope = grant["scope"]
    if not in_scope(scope["assets"], scope["exclusions"], asset):
        raise denied(f"grant {grant['grant_id']} does not cover asset {asset!r} (or excludes it); use a grant whose scope "
                     "names the asset",
                     grant_id=grant["grant_id"], asset=asset)


def require_action(grant: dict[str, Any], action: str, destination: str) -> None:
    scope = grant["scope"]
    if not in_scope(scope["actions"], scope["exclusions"], action):
        raise denied(f"grant {grant['grant_id']} does not allow action {action!r} (or excludes it); an action outside "
                     "the grant needs a new grant that names it (exclusions always win)",
                     grant_id=grant["grant_id"], action=action)
    if not in_scope(scope["destinations"], scope["exclusions"], destination):
        raise denied(f"grant {grant['grant_id']} does not allow destination {destination!r} (or excludes it); a "
                     "destination outside the grant needs a new grant that names it (exclusions always win)",
                     grant_id=grant["grant_id"], destination=destination)
