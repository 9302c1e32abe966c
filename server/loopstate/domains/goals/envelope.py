"""What the fold needs to know of a goal event: its envelope, its kinds and its body digest.

Split from ``events`` (the payload Structs and their validation, which only a
decision needs) so that a reader that folds a stream and shows the board does
not define fourteen payload types to do it.
"""

from __future__ import annotations

import operator
import re
from typing import Any

from loopstate.core import canonical
from loopstate.core.chain import SchemaVerdict

SCHEMA_VERSION = "loopx_state_event_v0"
PROJECTION_VERSION = "goals_projection_v0"
PROJECTION_SCHEMA = "loopx_state_projection_v0"
_SCHEMA = re.compile(r"^loopx_state_event_v(0|[1-9][0-9]*)$")

EVENT_TYPES = (
    "todo_added", "todo_claimed", "todo_updated", "todo_blocked", "todo_deferred", "todo_completed", "gate_added",
    "gate_resolved", "run_recorded", "refresh_recorded", "quota_spent", "evidence_attached", "projection_rendered",
    "snapshot_compacted",
)
# Events about projections rather than sources of them.
BOOKKEEPING = frozenset({"projection_rendered", "snapshot_compacted"})

# Store-assigned fields: never part of an event's normalized body.
CHAIN_FIELDS = ("append_sequence", "prev_hash", "event_hash", "request_id", "request_fingerprint")
BODY_FIELDS = (
    "schema_version", "event_id", "goal_id", "event_type", "producer", "privacy",
    "projection_version", "refs", "payload",
)


def classify_schema(value: Any) -> SchemaVerdict:
    """``ok`` for v0, ``future`` for a later version, ``invalid`` otherwise."""
    match = _SCHEMA.match(value) if isinstance(value, str) else None
    if match is None:
        return "invalid"
    return "ok" if match.group(1) == "0" else "future"


_body = operator.itemgetter(*BODY_FIELDS)


def body_digest(event: dict[str, Any]) -> str:
    """The digest of an event's normalized body (its fields minus store-assigned ones
    and ``recorded_at``): what event-id idempotency compares, with ``recorded_at``
    compared on its own. The fields are encoded as a tuple in BODY_FIELDS order
    (nested objects with sorted keys), which is as canonical as the dict and cheaper
    on every replayed event."""
    try:
        values = _body(event)
    except KeyError:
        values = tuple(event.get(name) for name in BODY_FIELDS)
    return canonical.sha256_hex(canonical.encode(values))[:32]
