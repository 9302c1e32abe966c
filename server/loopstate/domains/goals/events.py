"""The goal event envelope and the typed payload of each of its fourteen event types.

Every event a goal stream holds has the same envelope, LoopX's field for field (``schema_version``,
``event_id``, ``goal_id``, ``event_type``, ``recorded_at``, ``append_sequence``,
``producer``, ``privacy``, ``projection_version``, ``refs``, ``payload``);
loopstate's core adds ``prev_hash``, ``event_hash``, ``request_id`` and
``request_fingerprint``. Payloads are msgspec Structs with field constraints:
``make_event`` converts the payload through its Struct, so a payload that
would not decode from the wire is refused here too, and what is stored is the
normalized form that the event-id idempotency rule compares.
"""

from __future__ import annotations

import itertools
import re
import typing
from typing import Annotated, Any, Literal

import msgspec

from loopstate_protocol import goals as proto
from loopstate_protocol.errors import ErrorCode
from loopstate_protocol.goals import Body, Decision, GateKind, Label, Priority, RefId, RefreshKind, TargetKind

from loopstate.core.errors import LoopstateError
from loopstate.core.redaction import redact as redact_credentials
from loopstate.domains.goals import privacy
from loopstate.domains.goals.envelope import EVENT_TYPES, PROJECTION_VERSION, SCHEMA_VERSION, body_digest

DEFAULT_PRODUCER = "loopstate.goals"
BACKFILL_PRODUCER = "loopx.backfill"

REF_KEY = re.compile(r"^[a-z][a-z0-9_]{0,31}$")
MAX_REFS = 16
Sha = Annotated[str, msgspec.Meta(pattern=r"^sha256:[0-9a-f]{64}$")]
# One line of text as stored: no control or line-separator characters, and no
# leading or trailing whitespace (it would not survive a Markdown round trip).
_CHAR = r"[^\x00-\x1f\x7f\x85\u2028\u2029]"
_EDGE = r"[^\s\x00-\x1f\x7f\x85\u2028\u2029]"
_ONE_LINE = rf"^{_EDGE}(?:{_CHAR}*{_EDGE})?$"
Line = Annotated[str, msgspec.Meta(min_length=1, max_length=300, pattern=_ONE_LINE)]
Pointer = Annotated[str, msgspec.Meta(min_length=1, max_length=500, pattern=_ONE_LINE)]
Order = Annotated[int, msgspec.Meta(ge=0, le=1_000_000_000)]
# Compact means bounded: a payload never grows without limit.
MAX_ITEMS = 64
Metadata = Annotated[dict[Label, Line], msgspec.Meta(max_length=32)]
Ids = Annotated[list[RefId], msgspec.Meta(max_length=MAX_ITEMS)]
Lines = Annotated[list[Line], msgspec.Meta(max_length=MAX_ITEMS)]
Sequence = Annotated[int, msgspec.Meta(ge=0)]



class _Payload(msgspec.Struct, forbid_unknown_fields=True, kw_only=True, omit_defaults=True):
    """Base of every payload: unknown fields are refused, defaults are not stored
    (``normalize_payload`` drops them; msgspec's ``omit_defaults`` alone compares a
    scalar with its default by identity, so a ``role`` of ``"agent"`` read from argv
    or JSON would be kept)."""


class TodoAdded(_Payload):
    todo_id: RefId
    title: Line
    role: Label = "agent"
    priority: Priority = "P2"
    planner_order: Order | None = None
    metadata: Metadata = {}
    details: Body | None = None
    pointer: Pointer | None = None


class TodoClaimed(_Payload):
    todo_id: RefId
    claimed_by: Label
    lease_expires_at: str | None = None
    note: Line | None = None


class TodoUpdated(_Payload):
    todo_id: RefId
    title: Line | None = None
    role: Label | None = None
    priority: Priority | None = None
    planner_order: Order | None = None
    metadata: Metadata | None = None
    details: Body | None = None
    pointer: Pointer | None = None


class TodoBlocked(_Payload):
    todo_id: RefId
    reason: Line
    gate_ids: Ids = []


class TodoDeferred(_Payload):
    todo_id: RefId
    resume_when: Line
    until: str | None = None


class TodoCompleted(_Payload):
    todo_id: RefId
    rationale: Line
    validation_refs: Lines = []
    evidence_ids: Ids = []


class GateAdded(_Payload):
    gate_id: RefId
    gate_kind: GateKind
    title: Line
    todo_id: RefId | None = None
    run_id: RefId | None = None


class GateResolved(_Payload):
    gate_id: RefId
    decision: Decision
    rationale: Line | None = None
    resolved_by: Label | None = None


class RunRecorded(_Payload):
    run_id: RefId
    status: Label
    classification: Label | None = None
    delivery_outcome: Label | None = None
    todo_id: RefId | None = None
    summary: Line | None = None
    pointer: Pointer | None = None


class RefreshRecorded(_Payload):
    refresh_kind: RefreshKind
    summary: Line
    pointer: Pointer | None = None


class QuotaSpent(_Payload):
    amount: Annotated[float, msgspec.Meta(ge=0, le=1e15)]
    unit: Label
    category: Label = "compute"
    quota_id: RefId | None = None
    run_id: RefId | None = None
    todo_id: RefId | None = None


class EvidenceAttached(_Payload):
    evidence_id: RefId
    target_kind: TargetKind
    target_id: RefId
    ref: Line
    summary: Line | None = None
    pointer: Pointer | None = None


class ProjectionRendered(_Payload):
    projection_kind: Literal["markdown", "status", "dashboard"]
    target: Line
    checksum: Sha
    rendered_through_sequence: Sequence
    public: bool = False


class SnapshotCompacted(_Payload):
    through_append_sequence: Sequence
    source_event_count: Sequence
    source_checksum: Sha
    state_checksum: Sha


def _scalar_defaults(cls: type[_Payload]) -> dict[str, Any]:
    return {f.name: f.default for f in msgspec.structs.fields(cls)
            if f.default is not msgspec.NODEFAULT and f.default is not None}


PAYLOADS: dict[str, type[_Payload]] = {
    "todo_added": TodoAdded,
    "todo_claimed": TodoClaimed,
    "todo_updated": TodoUpdated,
    "todo_blocked": TodoBlocked,
    "todo_deferred": TodoDeferred,
    "todo_completed": TodoCompleted,
    "gate_added": GateAdded,
    "gate_resolved": GateResolved,
    "run_recorded": RunRecorded,
    "refresh_recorded": RefreshRecorded,
    "quota_spent": QuotaSpent,
    "evidence_attached": EvidenceAttached,
    "projection_rendered": ProjectionRendered,
    "snapshot_compacted": SnapshotCompacted,
}
assert EVENT_TYPES == tuple(PAYLOADS)
# Per event type, the scalar defaults other than None (None and empty collections msgspec omits itself).
_DEFAULTS = {event_type: _scalar_defaults(cls) for event_type, cls in PAYLOADS.items()}
# Payload fields that may hold private material; pointers are exempt from the
# public text check because they are the compact stand-in for such material.
PRIVATE_BODY_FIELDS = ("details",)
POINTER_FIELD = "pointer"


def _without_defaults(event_type: str, stored: dict[str, Any]) -> dict[str, Any]:
    """The stored form names a field only when it differs from the field's default, so
    an event given with an explicit default (``role: agent``) has the same normalized
    body as one that leaves it out, and the event-id idempotency rule sees one event."""
    defaults = _DEFAULTS[event_type]
    return {k: v for k, v in stored.items()
            if k not in defaults or type(v) is not type(defaults[k]) or v != defaults[k]}


def normalize_payload(event_type: str, payload: Any) -> dict[str, Any]:
    """Validate ``payload`` against its type and return its stored (normalized) form:
    the fields that differ from their defaults."""
    cls = PAYLOADS.get(event_type)
    if cls is None:
        raise LoopstateError(
            ErrorCode.VALIDATION_FAILED,
            f"unknown event_type {event_type!r}; the goal stream accepts: {', '.join(EVENT_TYPES)}",
            field="event_type",
        )
    try:
        typed = msgspec.convert(payload, cls)
    except msgspec.ValidationError as exc:
        message = readable(str(exc), "payload.", cls)
        if "unknown field" in message or "missing required field" in message:
            message += f"; {event_type} takes: {', '.join(cls.__struct_fields__)}"
        raise LoopstateError(
            ErrorCode.VALIDATION_FAILED, f"{event_type} payload is invalid: {message}", event_type=event_type,
        ) from None
    return _without_defaults(event_type, msgspec.to_builtins(typed))


_PATTERN_ERROR = re.compile(r"^Expected `str` matching regex '(.*)' - at (?:`key` in )?`\$(.*)`$")
_AT = re.compile(r"^(.+) - at `\$(.+)`$")


def _pattern_of(annotated: Any) -> str:
    return annotated.__metadata__[0].pattern


_SHAPES = {
    _ONE_LINE: "one line of text, without control characters or leading and trailing spaces",
    _pattern_of(proto.Line): "one line of text (no newlines or control characters)",
    _pattern_of(proto.Pointer): "one line of text (no newlines or control characters)",
    _pattern_of(proto.GoalId): "a goal id: 1-80 letters, digits, '_' and '-', starting with a letter or digit",
    _pattern_of(RefId): "an id: 1-80 letters, digits, '.', '_', ':' and '-', starting with a letter or digit",
    _pattern_of(proto.EventId): "an event id: 1-128 letters, digits, '.', '_', ':' and '-', starting with a letter or digit",
    _pattern_of(Label): "a label: a letter, then letters, digits, '.', '_' or '-' (up to 64)",
    _pattern_of(proto.RelPath): "a path relative to the project root: letters, digits, '.', '_', '-' and '/', without '..'",
    _pattern_of(Sha): "'sha256:' and 64 lowercase hex digits",
}


def _choices(cls: type | None, field: str) -> str:
    """'; use one of: a, b, c' for a Literal field of ``cls`` (plain or optional; top-level fields only)."""
    try:
        hint = typing.get_type_hints(cls).get(field) if cls is not None else None
    except (NameError, TypeError):
        return ""
    literals = [hint] if typing.get_origin(hint) is Literal else [
        arg for arg in typing.get_args(hint) if typing.get_origin(arg) is Literal]
    values = [str(value) for literal in literals for value in typing.get_args(literal)]
    return f"; use one of: {', '.join(values)}" if values else ""


def readable(message: str, prefix: str = "", cls: type | None = None) -> str:
    """msgspec names a failed pattern by its regex; say what the field must look like instead
    (and list the allowed values of an enum field of ``cls``)."""
    match = _PATTERN_ERROR.match(message)
    if match is None:
        other = _AT.match(message)
        if other is None:
            return message
        field = other.group(2).lstrip(".")
        extra = _choices(cls, field) if other.group(1).startswith("Invalid enum value") else ""
        return f"{prefix}{field}: {other.group(1)[0].lower()}{other.group(1)[1:]}{extra}"
    regex = match.group(1).encode().decode("unicode_escape")
    shape = _SHAPES.get(regex, f"text matching {match.group(1)}")
    keys = " keys" if "`key` in" in message else ""
    return f"{prefix}{match.group(2).lstrip('.')}{keys} must be {shape}"


def normalize_refs(refs: dict[str, Any]) -> dict[str, str]:
    if not isinstance(refs, dict) or len(refs) > MAX_REFS:
        raise LoopstateError(ErrorCode.VALIDATION_FAILED, f"refs must be an object of at most {MAX_REFS} compact ids", field="refs")
    out = {}
    for key, value in refs.items():
        if not isinstance(key, str) or not REF_KEY.match(key):
            raise LoopstateError(
                ErrorCode.VALIDATION_FAILED,
                f"refs key {key!r} is not valid: use lowercase letters, digits and '_' (e.g. parent_event_id, pr)",
                field="refs",
            )
        if not isinstance(value, str) or not 1 <= len(value) <= 300 or not value.isprintable():
            raise LoopstateError(
                ErrorCode.VALIDATION_FAILED, f"refs.{key} must be a compact one-line id (1-300 printable characters)",
                field=f"refs.{key}",
            )
        out[key] = value
    return out


def check_privacy(event_type: str, privacy_class: str, payload: dict[str, Any], refs: dict[str, str]) -> None:
    """What an event of each privacy class may carry: a private body only in local_private, a
    pointer in (and only in) private_pointer, and no private text (privacy.check_public_text) outside
    local_private. Anything else is refused, never stored."""
    if privacy_class not in privacy.PRIVACY_CLASSES:
        raise LoopstateError(
            ErrorCode.VALIDATION_FAILED,
            f"privacy {privacy_class!r} is not one of {', '.join(privacy.PRIVACY_CLASSES)}", field="privacy",
        )
    if privacy_class == privacy.LOCAL_PRIVATE:
        return
    for name in PRIVATE_BODY_FIELDS:
        if payload.get(name) is not None:
            raise LoopstateError(
                ErrorCode.PRIVACY_VIOLATION,
                f"{event_type}: payload.{name} is a private body, which a {privacy_class} event may not carry; "
                "use privacy local_private, or a private_pointer event with a compact pointer",
                field=f"payload.{name}", event_type=event_type,
            )
    has_pointer = payload.get(POINTER_FIELD) is not None
    if privacy_class == privacy.PRIVATE_POINTER and not has_pointer:
        raise LoopstateError(
            ErrorCode.VALIDATION_FAILED,
            f"{event_type}: a private_pointer event must carry payload.pointer (a compact pointer to the private material)",
            field="payload.pointer", event_type=event_type,
        )
    if privacy_class == privacy.PUBLIC_SAFE and has_pointer:
        raise LoopstateError(
            ErrorCode.PRIVACY_VIOLATION,
            f"{event_type}: payload.pointer points at private material; record it with privacy private_pointer",
            field="payload.pointer", event_type=event_type,
        )
    public_part = {k: v for k, v in payload.items() if k != POINTER_FIELD}
    privacy.check_public_text(event_type, "payload", public_part)
    privacy.check_public_text(event_type, "refs", refs)


def make_event(
    *, event_type: str, event_id: str, goal_id: str, recorded_at: str, producer: str,
    privacy_class: str, refs: dict[str, Any], payload: Any,
) -> dict[str, Any]:
    """A validated event without its chain fields (the core seals those)."""
    normalized = normalize_payload(event_type, payload)
    clean_refs = normalize_refs(refs)
    if producer == BACKFILL_PRODUCER and "source" not in clean_refs:
        raise LoopstateError(
            ErrorCode.VALIDATION_FAILED,
            f"{event_type}: an event with producer {BACKFILL_PRODUCER} must say where it came from in refs.source "
            "(e.g. markdown:ACTIVE_GOAL_STATE.md, with source_line); `loopstate goals backfill` adds them",
            field="refs.source", event_type=event_type,
        )
    # The envelope is shown whatever the record's class (a public board names its last event id).
    for name, value in (("event_id", event_id), ("producer", producer)):
        if redact_credentials(value).changed:
            raise LoopstateError(
                ErrorCode.PRIVACY_VIOLATION,
                f"{event_type}: the {name} looks like a credential; envelope ids are shown in public projections "
                f"whatever the record's privacy: choose another {name}, one that is not a secret",
                field=f"envelope.{name}", event_type=event_type,
            )
    check_privacy(event_type, privacy_class, normalized, clean_refs)
    return {
        "schema_version": SCHEMA_VERSION,
        "event_id": event_id,
        "goal_id": goal_id,
        "event_type": event_type,
        "recorded_at": recorded_at,
        "producer": producer,
        "privacy": privacy_class,
        "projection_version": PROJECTION_VERSION,
        "refs": clean_refs,
        "payload": normalized,
    }


def spelled_out_digests(event: dict[str, Any]) -> list[str]:
    """Digests of ``event`` with some of its omitted scalar defaults written out: the bodies
    under which a writer that kept explicit defaults (loopstate before defaults were
    normalized away) may have stored this same event. At most three per event type."""
    defaults = _DEFAULTS[event["event_type"]]
    omitted = [name for name in defaults if name not in event["payload"]]
    digests = []
    for size in range(1, len(omitted) + 1):
        for names in itertools.combinations(omitted, size):
            payload = {**event["payload"], **{name: defaults[name] for name in names}}
            digests.append(body_digest({**event, "payload": payload}))
    return digests


def typed(event: dict[str, Any]) -> _Payload:
    """The payload of a stored event as its Struct (stored payloads are already valid)."""
    return msgspec.convert(event["payload"], PAYLOADS[event["event_type"]])
