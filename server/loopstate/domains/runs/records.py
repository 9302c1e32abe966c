"""The run records as msgspec Structs, and validators that name the field and the rule.

Each record keeps the field names, enums and defaults of the-loop's
``schemas/*.schema.json``, for compatibility. Structural rules (types, enums, patterns, ranges,
required and unknown fields) are msgspec constraints; the rules a schema cannot
say (lease longer than heartbeat, a passed evidence record needs a procedure
and a result, the route's behavior-proof rules, a grant's invariants and
expiry) are checked after decoding. Every refusal is a VALIDATION_FAILED
LoopstateError whose details carry ``field`` (a JSON path) and ``rule``.
"""

from __future__ import annotations

import json
import re
from typing import Annotated, Any, Literal, Union

import msgspec
from msgspec import Meta

from loopstate_protocol.errors import ErrorCode

from loopstate.core.chain import BATCH, batch_part
from loopstate.core.clock import parse_time
from loopstate.core.errors import LoopstateError
from loopstate.core.nesting import decoded_text
from loopstate.core.redaction import contains_secret

SCHEMA_VERSION = "1.0"

# Scalars ---------------------------------------------------------------------------

SchemaVersion = Literal["1.0"]
UUID4 = Annotated[str, Meta(pattern=r"^[0-9a-fA-F]{8}-[0-9a-fA-F]{4}-4[0-9a-fA-F]{3}-[89abAB][0-9a-fA-F]{3}-[0-9a-fA-F]{12}$")]
Timestamp = Annotated[str, Meta(pattern=r"^[0-9]{4}-[0-9]{2}-[0-9]{2}T[0-9]{2}:[0-9]{2}:[0-9]{2}(?:\.[0-9]+)?Z$")]
Digest = Annotated[str, Meta(pattern=r"^[0-9a-f]{64}$")]
Money = Annotated[str, Meta(pattern=r"^(0|[1-9][0-9]*)(?:\.[0-9]{1,6})?$")]
RelativePath = Annotated[str, Meta(
    min_length=1,
    pattern=r"^(?![A-Za-z]:[\\/])(?![\\/])(?!~(?:[\\/]|$))(?!.*(?:^|[\\/])\.\.(?:[\\/]|$)).+$",
)]
ConfiguredPath = Annotated[str, Meta(min_length=1, pattern=r"^(?!~(?:[\\/]|$))(?!.*(?:^|[\\/])\.\.(?:[\\/]|$)).+$")]
NonEmpty = Annotated[str, Meta(min_length=1)]
Capability = Annotated[str, Meta(pattern=r"^[a-z][a-z0-9_-]*(?:\.[a-z][a-z0-9_-]*)+$")]
NonNegInt = Annotated[int, Meta(ge=0)]
NonNegNumber = Union[Annotated[int, Meta(ge=0)], Annotated[float, Meta(ge=0)]]

# Enums -----------------------------------------------------------------------------

Mode = Literal["loop", "auto"]
Status = Literal[
    "draft", "ready", "active", "waiting_approval", "waiting_external", "blocked", "failed",
    "halted_kill_switch", "complete", "cancelled",
]
Stage = Literal["strategize", "spec_pack", "build", "test", "resolve", "close"]
STAGES: tuple[str, ...] = ("strategize", "spec_pack", "build", "test", "resolve", "close")
Harness = Literal["codex", "claude_code", "kimi_code", "opencode", "deepseek_harness"]
# A route decision names four harnesses (deepseek_harness has no route decisions in v0.1,
# although route.schema.json lists it); a route for it is refused.
RouteHarness = Literal["codex", "claude_code", "kimi_code", "opencode"]
# An actor (event actor, lease or run owner) may also be a person at a terminal: common.schema.json's
# actor enum adds "manual" to the five adapters.
ActorHarness = Literal["codex", "claude_code", "kimi_code", "opencode", "deepseek_harness", "manual"]
Verdict = Literal["verified", "failed", "denied", "unverified"]
GrantLevel = Literal["attended", "bounded", "scoped", "operational", "full"]
Invariant = Literal[
    "visible_authority", "audit_log", "evidence_required", "run_ownership", "leases",
    "external_kill_switch", "faithful_failure", "no_silent_elevation",
]
PERMANENT_INVARIANTS: tuple[str, ...] = (
    "visible_authority", "audit_log", "evidence_required", "run_ownership", "leases",
    "external_kill_switch", "faithful_failure", "no_silent_elevation",
)
Track = Literal["code", "noncode"]
EvidenceType = Literal["command", "file", "visual", "source", "manual", "harness_probe"]
EvidenceOutcome = Literal["passed", "failed", "blocked", "denied", "unverified"]
Severity = Literal["critical", "high", "medium", "low"]
IssueStatus = Literal["open", "acknowledged", "resolving", "verification_pending", "closed", "reopened", "deferred"]
EventType = Literal[
    "run_created", "authority_granted", "authority_revoked", "lease_acquired", "lease_renewed",
    "route_selected", "stage_started", "heartbeat", "evidence_recorded", "issue_opened",
    "issue_transitioned", "stage_completed", "operation_intended", "operation_reconciled",
    "budget_reached", "kill_switch_detected", "recovery_started", "run_completed", "run_failed",
    "run_cancelled",
]
BudgetName = Literal["max_duration_seconds", "max_stage_attempts", "max_mutations", "max_external_actions", "max_cost_usd"]


class Record(msgspec.Struct, forbid_unknown_fields=True, kw_only=True):
    """Base: unknown fields are refused, never dropped."""


# Shared objects --------------------------------------------------------------------

class Actor(Record):
    harness: ActorHarness
    actor: NonEmpty
    session_id: NonEmpty


class Budgets(Record):
    """Every field is required in a record (missing data is never inferred); the defaults are
    ``DEFAULT_BUDGETS``, which a config without a file and a command without budgets start from."""

    max_duration_seconds: Annotated[int, Meta(ge=1)]
    max_stage_attempts: Annotated[int, Meta(ge=1)]
    max_mutations: NonNegInt
    max_external_actions: NonNegInt
    max_cost_usd: Money | None


DEFAULT_BUDGETS: dict[str, Any] = {
    "max_duration_seconds": 7200, "max_stage_attempts": 3, "max_mutations": 100, "max_external_actions": 0,
    "max_cost_usd": None,
}


class StageAttempts(Record):
    """A complete map: every stage's counter is required."""

    strategize: NonNegInt
    spec_pack: NonNegInt
    build: NonNegInt
    test: NonNegInt
    resolve: NonNegInt
    close: NonNegInt


class Usage(Record):
    duration_seconds: NonNegNumber
    stage_attempts: StageAttempts
    mutations: NonNegInt
    external_actions: NonNegInt
    cost_usd: Money | None


class HarnessStatus(Record):
    """The schema's eight required fields, plus the pack and behavior fields as optional ones
    (the-loop's written contract lists them; common.schema.json's harnessStatus does not, so they may be left out)."""

    installed: bool
    version: str | None
    discovery: Verdict
    behavior: Verdict
    skill_roots: list[ConfiguredPath]
    collisions: list[dict[str, Any]]
    checked_at: Timestamp
    evidence_id: UUID4 | None
    pack_status: Literal["complete", "incomplete", "integrity_unverified", "unverified"] | msgspec.UnsetType = msgspec.UNSET
    missing_skills: list[NonEmpty] | msgspec.UnsetType = msgspec.UNSET
    pack_receipt_id: UUID4 | None | msgspec.UnsetType = msgspec.UNSET
    pack_digest: Digest | None | msgspec.UnsetType = msgspec.UNSET
    environment_digest: Digest | None | msgspec.UnsetType = msgspec.UNSET
    behavior_evidence: dict[str, Any] | None | msgspec.UnsetType = msgspec.UNSET


class Routing(Record):
    capability_pins: dict[str, NonEmpty]
    disabled_providers: list[NonEmpty]


class Config(Record):
    schema_version: SchemaVersion
    project_id: UUID4
    default_mode: Mode
    state_root: RelativePath
    kill_switches: Annotated[list[ConfiguredPath], Meta(min_length=1)]
    heartbeat_seconds: Annotated[int, Meta(ge=15, le=600)]
    lease_seconds: Annotated[int, Meta(ge=16, le=86400)]
    routing: Routing
    budgets: Budgets
    telemetry: Literal[False]
    harnesses: dict[Harness, HarnessStatus]


class Asset(Record):
    name: NonEmpty
    root: RelativePath
    track: Track
    boundaries: Annotated[list[NonEmpty], Meta(min_length=1)]


class Observation(Record):
    capability: Capability
    harness: Harness
    track: Track
    environment_digest: Digest
    outcome: Literal["passed", "failed", "denied", "unverified"]
    observed_at: Timestamp
    evidence_id: UUID4


class Candidate(Record):
    provider: NonEmpty
    source: Literal["installed", "bundled"]
    compatibility: list[Harness]
    capability_evidence: list[NonEmpty]
    description_score: Union[Annotated[int, Meta(ge=0, le=1)], Annotated[float, Meta(ge=0, le=1)]]
    behavior_status: Verdict
    behavior_observations: list[Observation]
    rejection_reasons: list[NonEmpty]
    provenance_type: Literal["system-error-original", "system-error-rewrite", "upstream-dependency", "excluded"]


class Route(Record):
    schema_version: SchemaVersion
    capability: Capability
    harness: RouteHarness
    track: Track
    environment_digest: Digest
    decided_at: Timestamp
    behavior_max_age_seconds: Literal[86400]
    requirements: Annotated[list[NonEmpty], Meta(min_length=1)]
    candidates: Annotated[list[Candidate], Meta(min_length=1)]
    selected_provider: NonEmpty
    selected_source: Literal["installed", "bundled"]
    reason: NonEmpty
    verified_at: Timestamp | None
    fallback_reason: str | None


class TerminalReason(Record):
    code: NonEmpty
    explanation: NonEmpty


class Run(Record):
    schema_version: SchemaVersion
    run_id: UUID4
    asset: Asset
    mode: Mode
    status: Status
    stage: Stage | None
    objective: NonEmpty
    done_gate: Annotated[list[NonEmpty], Meta(min_length=1)]
    authority_grant_id: UUID4
    budgets: Budgets
    usage: Usage
    owner: Actor | None
    selected_routes: dict[str, Route]
    open_blocking_issues: NonNegInt
    last_heartbeat_at: Timestamp | None
    created_at: Timestamp
    updated_at: Timestamp
    terminal_reason: TerminalReason | None


class Lease(Record):
    schema_version: SchemaVersion
    lease_id: UUID4
    run_id: UUID4
    lane_id: UUID4 | None
    owner: Actor
    acquired_at: Timestamp
    renewed_at: Timestamp
    expires_at: Timestamp
    generation: NonNegInt


class Scope(Record):
    assets: list[NonEmpty]
    actions: list[NonEmpty]
    destinations: list[NonEmpty]
    exclusions: list[NonEmpty]


class Grant(Record):
    schema_version: SchemaVersion
    grant_id: UUID4
    level: GrantLevel
    actor: NonEmpty
    scope: Scope
    risks_shown: Annotated[list[NonEmpty], Meta(min_length=1)]
    confirmation_text: NonEmpty
    confirmed_at: Timestamp
    expires_at: Timestamp
    revoked_at: Timestamp | None
    revoked_by: str | None
    permanent_invariants: list[Invariant]


class ArtifactRef(Record):
    kind: Literal["file", "command_output", "url", "manual_observation"]
    ref: NonEmpty


class Evidence(Record):
    schema_version: SchemaVersion
    evidence_id: UUID4
    run_id: UUID4
    stage: Stage
    requirement_ids: Annotated[list[NonEmpty], Meta(min_length=1)]
    type: EvidenceType
    description: NonEmpty
    procedure: list[NonEmpty]
    outcome: EvidenceOutcome
    artifact_refs: list[ArtifactRef]
    digest: Digest | None
    actor: Actor
    observed_at: Timestamp
    environment: dict[str, Union[str, int, float, bool, None]]
    manual_observation: Annotated[str, Meta(min_length=1)] | msgspec.UnsetType = msgspec.UNSET


class Issue(Record):
    issue_id: UUID4
    title: NonEmpty
    severity: Severity
    blocking: bool
    status: IssueStatus
    requirement_ids: list[NonEmpty]
    evidence_ids: list[UUID4]
    reproduction: list[NonEmpty]
    owner: Actor | None
    attempt_count: NonNegInt
    resolution: str | None
    regression_procedure: list[NonEmpty]
    created_at: Timestamp
    updated_at: Timestamp


class IssueLedger(Record):
    schema_version: SchemaVersion
    run_id: UUID4
    issues: list[Issue]
    updated_at: Timestamp


class InstallOperation(Record):
    action: Literal["copy", "link", "mkdir", "skip"]
    source_digest: Digest | None
    destination: RelativePath
    pre_existing_digest: Digest | None
    resulting_digest: Digest | None
    rollback_action: Literal["remove_if_unchanged", "restore_if_unchanged", "none"]


class InstallReceipt(Record):
    schema_version: SchemaVersion
    receipt_id: UUID4
    created_at: Timestamp
    actor: NonEmpty
    source_version: NonEmpty
    target_root: ConfiguredPath
    harnesses: Annotated[list[Harness], Meta(min_length=1)]
    operations: list[InstallOperation]
    result: Literal["complete", "partial", "rolled_back", "failed"]


# Audit event data, one Struct per event type ----------------------------------------

class RunCreatedData(Record):
    objective: NonEmpty


class AuthorityGrantedData(Record):
    grant_id: UUID4
    level: GrantLevel


class AuthorityRevokedData(Record):
    grant_id: UUID4
    revoked_at: Timestamp
    revoked_by: NonEmpty


class LeaseData(Record):
    lease_id: UUID4
    generation: NonNegInt
    expires_at: Timestamp


class RouteSelectedData(Record):
    capability: NonEmpty
    selected_provider: NonEmpty
    selected_source: Literal["installed", "bundled"]


class StageStartedData(Record):
    stage: Stage


class HeartbeatData(Record):
    stage: Stage
    status: Literal["active", "waiting_approval", "waiting_external", "blocked", "failed", "halted_kill_switch", "complete", "cancelled"]


class EvidenceRecordedData(Record):
    evidence_id: UUID4
    outcome: EvidenceOutcome


class IssueOpenedData(Record):
    issue_id: UUID4
    severity: Severity


class IssueTransitionedData(Record):
    issue_id: UUID4
    from_status: IssueStatus
    to_status: IssueStatus


class StageCompletedData(Record):
    stage: Stage
    outcome: Literal["passed", "failed", "blocked"]


class BudgetReachedData(Record):
    budget: BudgetName
    stage: Stage | None
    limit: NonNegNumber | Money | None
    observed: NonNegNumber | Money


class KillSwitchDetectedData(Record):
    path: ConfiguredPath


class RecoveryStartedData(Record):
    previous_generation: NonNegInt | None
    new_generation: NonNegInt
    reason: NonEmpty


class TerminalData(Record):
    reason: NonEmpty


class Reservation(Record):
    mutations: NonNegInt
    external_actions: NonNegInt
    cost_usd: Money
    stage_attempt: Stage | None
    prior_cost_usd: Money | None
    prior_stage: Stage | None


class PendingOperation(Record):
    operation_id: UUID4
    completion_event_type: Literal[
        "route_selected", "stage_started", "evidence_recorded", "issue_opened", "issue_transitioned", "stage_completed",
    ]
    completion_data: dict[str, Any]
    effect: Literal["local", "external"]
    reservation: Reservation


class OperationReconciledData(Record):
    operation_id: UUID4
    effect: Literal["local", "external"]
    outcome: Literal["known_not_started", "unknown"]


COMPLETION_DATA: dict[str, type[Record]] = {
    "route_selected": RouteSelectedData,
    "stage_started": StageStartedData,
    "evidence_recorded": EvidenceRecordedData,
    "issue_opened": IssueOpenedData,
    "issue_transitioned": IssueTransitionedData,
    "stage_completed": StageCompletedData,
}

EVENT_DATA: dict[str, type[Record]] = {
    "run_created": RunCreatedData,
    "authority_granted": AuthorityGrantedData,
    "authority_revoked": AuthorityRevokedData,
    "lease_acquired": LeaseData,
    "lease_renewed": LeaseData,
    **COMPLETION_DATA,
    "heartbeat": HeartbeatData,
    "operation_intended": PendingOperation,
    "operation_reconciled": OperationReconciledData,
    "budget_reached": BudgetReachedData,
    "kill_switch_detected": KillSwitchDetectedData,
    "recovery_started": RecoveryStartedData,
    "run_completed": TerminalData,
    "run_failed": TerminalData,
    "run_cancelled": TerminalData,
}


class Projection(Record):
    run: Run
    lease: Lease | None
    pending_operation: PendingOperation | None


class AuditEvent(Record):
    schema_version: SchemaVersion
    event_id: UUID4
    sequence: Annotated[int, Meta(ge=1)]
    run_id: UUID4
    lease_id: UUID4 | None
    lease_generation: NonNegInt | None
    type: EventType
    actor: Actor
    at: Timestamp
    data: dict[str, Any]
    projection: Projection
    previous_event_digest: Digest | None
    event_digest: Digest


# Validation -------------------------------------------------------------------------

def refuse(record: str, field: str, rule: str, message: str) -> LoopstateError:
    """The one refusal shape: ``<record>.<field>: <message>`` with field and rule as details."""
    return LoopstateError(
        ErrorCode.VALIDATION_FAILED, f"{record} {field}: {message} (rule: {rule})",
        record=record, field=field, rule=rule,
    )


_AT = re.compile(r" - at (`key` in )?`(\$[^`]*)`$")
_SEGMENT = re.compile(r"\.([^.\[]+)|\[([^\]]*)\]")


def _type_at(cls: Any, path: str, key: bool) -> Any:
    """The msgspec type description at a msgspec error path (``$.a[0].b``, ``[...]`` for a dict value)."""
    info: Any = msgspec.inspect.type_info(cls)
    for name, _index in _SEGMENT.findall(path[1:]):
        info = _step(info, name if name else None)
        if info is None:
            return None
    if key:
        info = _member(info, msgspec.inspect.DictType)
        return None if info is None else info.key_type
    return info


def _member(info: Any, kind: type) -> Any:
    if isinstance(info, msgspec.inspect.UnionType):
        return next((t for t in info.types if isinstance(t, kind)), None)
    return info if isinstance(info, kind) else None


def _step(info: Any, field: str | None) -> Any:
    if field is not None:
        struct = _member(info, msgspec.inspect.StructType)
        if struct is None:
            return None
        return next((f.type for f in struct.fields if f.encode_name == field), None)
    items = _member(info, msgspec.inspect.ListType)
    if items is not None:
        return items.item_type
    values = _member(info, msgspec.inspect.DictType)
    return None if values is None else values.value_type


def _literal_values(info: Any) -> list[Any]:
    types = info.types if isinstance(info, msgspec.inspect.UnionType) else (info,)
    return [v for t in types if isinstance(t, msgspec.inspect.LiteralType) for v in t.values]


def _hint(rule: str, info: Any) -> str:
    """What to write instead, from the field's declared type."""
    if info is None:
        return ""
    if rule == "enum":
        values = _literal_values(info)
        if values == [False]:
            return "; must be false (telemetry is off in v0.1)"
        if values:
            return "; use one of: " + ", ".join(json_text(v) for v in values)
    if rule == "range":
        number = _member(info, msgspec.inspect.IntType) or _member(info, msgspec.inspect.FloatType)
        if number is not None:
            low, high = number.ge, number.le
            if low is not None and high is not None:
                return f"; use a value from {low} to {high}"
            if low is not None:
                return f"; use a value of at least {low}"
            if high is not None:
                return f"; use a value of at most {high}"
    if rule == "length":
        text = _member(info, msgspec.inspect.StrType)
        if text is not None and text.min_length == 1:
            return "; it must not be empty"
        array = _member(info, msgspec.inspect.ListType)
        if array is not None and array.min_length:
            return f"; give at least {array.min_length} entr{'y' if array.min_length == 1 else 'ies'}"
    return ""


def json_text(value: Any) -> str:
    return msgspec.json.encode(value).decode() if not isinstance(value, str) else value


def _msgspec_refusal(record: str, exc: msgspec.ValidationError, cls: Any = None) -> LoopstateError:
    text = str(exc)
    match = _AT.search(text)
    path = match.group(2) if match else "$"
    key = bool(match and match.group(1))
    message = text[: match.start()] if match else text
    if message.startswith("Object missing required field"):
        name = message.split("`")[1]
        path, rule = f"{path}.{name}", "required"
        message += "; add it (missing data is an error, never inferred)"
    elif message.startswith("Object contains unknown field"):
        name = message.split("`")[1]
        path, rule = f"{path}.{name}", "unknown_field"
        message += "; remove it or check its spelling (unknown fields are refused, never dropped)"
    elif "matching regex" in message:
        regex = message.split("matching regex ", 1)[1]
        rule, message = _PATTERNS.get(regex, ("pattern", message))
    elif "one of" in message or "Invalid enum value" in message:
        rule = "enum"
    elif "length" in message:
        rule = "length"
    elif "Expected `int` >=" in message or "<=" in message or ">=" in message:
        rule = "range"
    else:
        rule = "type"
    if rule in ("enum", "range", "length") and cls is not None:
        try:
            message += _hint(rule, _type_at(cls, path, key))
        except (TypeError, ValueError):  # a type msgspec cannot describe: keep its own words
            pass
    if key:
        message += " (a key of this object)"
    return refuse(record, path, rule, message)


def _pattern_of(alias: Any) -> str:
    return repr(next(m.pattern for m in alias.__metadata__ if isinstance(m, Meta) and m.pattern))


# Human words for each pattern, so a refusal says what to write instead of a regex.
_PATTERNS = {
    _pattern_of(UUID4): ("uuid_v4", "must be a UUIDv4 string"),
    _pattern_of(Timestamp): ("timestamp", "must be an RFC 3339 UTC timestamp with a Z suffix"),
    _pattern_of(Digest): ("digest", "must be 64 lowercase hex digits (SHA-256)"),
    _pattern_of(Money): ("money", "must be a fixed-point decimal string with at most six fractional digits, no exponent"),
    _pattern_of(RelativePath): (
        "path_inside_project",
        "must be a relative path that stays inside the project (no absolute path, drive, '~' or '..' segment)",
    ),
    _pattern_of(ConfiguredPath): ("configured_path", "must not start with '~' or contain a '..' segment"),
    _pattern_of(Capability): ("capability", "must be a namespaced capability such as lifecycle.test"),
}


def decode(record: str, cls: Any, data: Any, at: str = "$") -> Any:
    """msgspec.convert with a refusal naming the field (under ``at``) and the rule."""
    try:
        return msgspec.convert(data, cls, strict=True)
    except msgspec.ValidationError as exc:
        error = _msgspec_refusal(record, exc, cls)
        if at != "$":
            field = at + error.details["field"][1:]
            error = refuse(record, field, error.details["rule"], error.message.split(": ", 1)[1].rsplit(" (rule: ", 1)[0])
        raise error from None


def _check_time(record: str, field: str, value: str | None) -> None:
    if value is not None:
        try:
            parse_time(value, field=field)
        except LoopstateError:
            raise refuse(record, field, "timestamp", f"{value!r} is not a real RFC 3339 UTC time") from None


# Struct fields that hold a timestamp; the pattern says "looks like RFC 3339", this says "is a real time".
_TIME_FIELDS = frozenset({
    "at", "created_at", "updated_at", "confirmed_at", "expires_at", "revoked_at", "observed_at", "checked_at",
    "acquired_at", "renewed_at", "decided_at", "verified_at", "last_heartbeat_at",
})


def _check_times(record: str, value: Any, path: str = "$") -> None:
    """Every timestamp field of every nested record names a real instant (no 2026-02-30, no 24:00)."""
    if isinstance(value, msgspec.Struct):
        for name in value.__struct_fields__:
            item = getattr(value, name)
            if name in _TIME_FIELDS and isinstance(item, str):
                _check_time(record, f"{path}.{name}", item)
            else:
                _check_times(record, item, f"{path}.{name}")
    elif isinstance(value, list):
        for index, item in enumerate(value):
            _check_times(record, item, f"{path}[{index}]")
    elif isinstance(value, dict):
        for name, item in value.items():
            _check_times(record, item, f"{path}.{name}")


def _unique(record: str, field: str, values: list) -> None:
    seen = [msgspec.json.encode(v) for v in values]
    if len(set(seen)) != len(seen):
        raise refuse(record, field, "unique_items", "entries must be unique")


def check_config(c: Config) -> None:
    if c.lease_seconds <= c.heartbeat_seconds:
        raise refuse("config", "$.lease_seconds", "lease_longer_than_heartbeat",
                     f"{c.lease_seconds} must be greater than heartbeat_seconds {c.heartbeat_seconds}")
    _unique("config", "$.kill_switches", c.kill_switches)
    _unique("config", "$.routing.disabled_providers", c.routing.disabled_providers)
    for name, status in c.harnesses.items():
        _check_time("config", f"$.harnesses.{name}.checked_at", status.checked_at)


def check_grant(g: Grant) -> None:
    _check_time("grant", "$.confirmed_at", g.confirmed_at)
    _check_time("grant", "$.expires_at", g.expires_at)
    _check_time("grant", "$.revoked_at", g.revoked_at)
    _unique("grant", "$.permanent_invariants", g.permanent_invariants)
    missing = [i for i in PERMANENT_INVARIANTS if i not in g.permanent_invariants]
    if missing:
        raise refuse("grant", "$.permanent_invariants", "permanent_invariants",
                     f"must hold all eight permanent invariants; missing {', '.join(missing)}")
    if parse_time(g.expires_at) <= parse_time(g.confirmed_at):
        raise refuse("grant", "$.expires_at", "grant_expires",
                     "must be later than confirmed_at: no non-expiring or already-expired grant in v0.1")
    if (g.revoked_at is None) != (g.revoked_by is None):
        raise refuse("grant", "$.revoked_by", "revocation_pair", "revoked_at and revoked_by are set together or both null")
    if g.revoked_by is not None and not g.revoked_by:
        raise refuse("grant", "$.revoked_by", "length", "must be non-empty when the grant is revoked")
    if contains_secret(g.confirmation_text):
        raise refuse("grant", "$.confirmation_text", "no_secrets",
                     "contains what looks like a credential; the typed confirmation excludes secrets: retype it without one")
    if g.revoked_at is not None and parse_time(g.revoked_at) < parse_time(g.confirmed_at):
        raise refuse("grant", "$.revoked_at", "time_order", "must not be earlier than confirmed_at")


def check_evidence(e: Evidence) -> None:
    _check_time("evidence", "$.observed_at", e.observed_at)
    for name, value in e.environment.items():
        if isinstance(value, str) and contains_secret(value) or contains_secret(name):
            raise refuse("evidence", f"$.environment.{name}", "redacted",
                         "looks like a credential; the environment is redacted and allowlisted: leave the value out")
    if e.outcome == "passed":
        if not e.procedure:
            raise refuse("evidence", "$.procedure", "passed_needs_procedure",
                         "a passed evidence record needs a non-empty procedure")
        if not e.artifact_refs and e.manual_observation is msgspec.UNSET:
            raise refuse("evidence", "$.artifact_refs", "passed_needs_result",
                         "a passed evidence record needs at least one result reference or a manual_observation")


def check_route(r: Route) -> None:
    _check_time("route", "$.decided_at", r.decided_at)
    _check_time("route", "$.verified_at", r.verified_at)
    selected = [c for c in r.candidates if c.provider == r.selected_provider and c.source == r.selected_source]
    if not selected:
        raise refuse("route", "$.selected_provider", "selected_is_candidate",
                     f"{r.selected_provider!r} ({r.selected_source}) is not one of the candidates")
    for index, candidate in enumerate(r.candidates):
        _unique("route", f"$.candidates[{index}].behavior_observations", candidate.behavior_observations)
        _unique("route", f"$.candidates[{index}].compatibility", candidate.compatibility)
    chosen = selected[0]
    where = f"$.candidates[{r.candidates.index(chosen)}]"
    if chosen.behavior_status == "failed":
        raise refuse("route", f"{where}.behavior_status", "selected_not_failed",
                     "a candidate whose current behavior_status is failed cannot be selected")
    if chosen.behavior_status != "verified":
        if r.verified_at is not None:
            raise refuse("route", "$.verified_at", "verified_needs_proof",
                         "must be null unless the selected candidate's behavior is verified")
        return
    matching = [
        o for o in chosen.behavior_observations
        if (o.capability, o.harness, o.track, o.environment_digest) == (r.capability, r.harness, r.track, r.environment_digest)
    ]
    if not matching:
        raise refuse("route", f"{where}.behavior_observations", "verified_needs_observation",
                     "a verified selection needs a typed observation matching the route's capability, harness, "
                     "track and environment digest (description-only evidence is not behavior proof)")
    latest_time = max(parse_time(o.observed_at) for o in matching)
    latest = [o for o in matching if parse_time(o.observed_at) == latest_time]
    if len(latest) > 1:
        raise refuse("route", f"{where}.behavior_observations", "latest_observation_unique",
                     "several matching observations tie at the latest time")
    if latest[0].outcome != "passed":
        raise refuse("route", f"{where}.behavior_observations", "latest_observation_passed",
                     f"the latest matching observation is {latest[0].outcome}, not passed")
    if r.verified_at is None or parse_time(r.verified_at) != latest_time:
        raise refuse("route", "$.verified_at", "verified_at_matches_observation",
                     f"must equal the latest matching observation's observed_at {latest[0].observed_at}")
    age = (parse_time(r.decided_at) - latest_time).total_seconds()
    if age < 0 or age > r.behavior_max_age_seconds:
        raise refuse("route", "$.verified_at", "behavior_proof_fresh",
                     f"the behavior proof observed at {latest[0].observed_at} must be at most "
                     f"{r.behavior_max_age_seconds} s older than decided_at {r.decided_at} and not after it: probe again")


def check_lease(lease: Lease) -> None:
    """acquired_at <= renewed_at < expires_at: each acquisition or renewal expires after it happens."""
    acquired, renewed, expires = (parse_time(t) for t in (lease.acquired_at, lease.renewed_at, lease.expires_at))
    if renewed < acquired:
        raise refuse("lease", "$.renewed_at", "time_order", f"must not be earlier than acquired_at {lease.acquired_at}")
    if expires <= renewed:
        raise refuse("lease", "$.expires_at", "lease_expires_after_renewal",
                     f"must be later than renewed_at {lease.renewed_at}: a lease expires after it is acquired or renewed")


# Statuses the run reaches without a reason; every other one carries terminal_reason (code and explanation).
_NO_REASON_NEEDED = frozenset({"draft", "ready", "active"})


def check_run(run: Run, record: str = "run", at: str = "$") -> None:
    if run.status not in _NO_REASON_NEEDED and run.terminal_reason is None:
        raise refuse(record, f"{at}.terminal_reason", "terminal_reason_required",
                     f"a {run.status} run needs a terminal_reason with the code and explanation of its state")
    if run.status == "active" and run.owner is None:
        raise refuse(record, f"{at}.owner", "active_run_has_owner", "an active run names its lease owner")
    duration = run.usage.duration_seconds
    if isinstance(duration, float) and duration != round(duration, 6):
        raise refuse(record, f"{at}.usage.duration_seconds", "microseconds",
                     f"{duration!r} is finer than a microsecond; write at most six fractional digits")
    if parse_time(run.updated_at) < parse_time(run.created_at):
        raise refuse(record, f"{at}.updated_at", "time_order", f"must not be earlier than created_at {run.created_at}")
    for capability, route in run.selected_routes.items():
        if capability != route.capability:
            raise refuse(record, f"{at}.selected_routes.{capability}", "route_keyed_by_capability",
                         f"is keyed by {capability!r} but decides {route.capability!r}: key each route by its capability")
        try:
            check_route(route)
        except LoopstateError as error:  # name the field where it sits in this record
            field = f"{at}.selected_routes.{capability}{error.details['field'][1:]}"
            words = error.message.split(": ", 1)[1].rsplit(" (rule: ", 1)[0]
            raise refuse(record, field, error.details["rule"], words) from None


def check_issue_ledger(ledger: IssueLedger) -> None:
    for index, issue in enumerate(ledger.issues):
        _unique("issue_ledger", f"$.issues[{index}].evidence_ids", issue.evidence_ids)
        if parse_time(issue.updated_at) < parse_time(issue.created_at):
            raise refuse("issue_ledger", f"$.issues[{index}].updated_at", "time_order",
                         f"must not be earlier than created_at {issue.created_at}")
    _unique("issue_ledger", "$.issues", [issue.issue_id for issue in ledger.issues])


def check_install_receipt(r: InstallReceipt) -> None:
    _unique("install_receipt", "$.harnesses", r.harnesses)
    for index, op in enumerate(r.operations):
        where = f"$.operations[{index}].rollback_action"
        if op.rollback_action == "remove_if_unchanged" and op.pre_existing_digest is not None:
            raise refuse("install_receipt", where, "remove_only_what_it_created",
                         "uninstall may remove only a path this receipt created: a destination that existed before "
                         "(pre_existing_digest set) is restored, not removed")
        if op.action == "skip" and op.rollback_action != "none":
            raise refuse("install_receipt", where, "skip_has_no_rollback", "a skipped operation changed nothing: use none")


def check_audit_event(e: AuditEvent) -> None:
    data_cls = EVENT_DATA[e.type]
    data = decode("audit_event", data_cls, e.data, "$.data")
    _check_times("audit_event", data, "$.data")
    if isinstance(data, PendingOperation):
        decode("audit_event", COMPLETION_DATA[data.completion_event_type], data.completion_data, "$.data.completion_data")
    pending = e.projection.pending_operation
    if pending is not None:
        decode("audit_event", COMPLETION_DATA[pending.completion_event_type], pending.completion_data,
               "$.projection.pending_operation.completion_data")
    run, lease = e.projection.run, e.projection.lease
    if run.run_id != e.run_id:
        raise refuse("audit_event", "$.projection.run.run_id", "projection_matches_run", "must equal the event's run_id")
    check_run(run, "audit_event", "$.projection.run")
    if lease is not None:
        if lease.run_id != e.run_id:
            raise refuse("audit_event", "$.projection.lease.run_id", "projection_matches_run",
                         "must equal the event's run_id")
        check_lease(lease)
    if (e.lease_id is None) != (e.lease_generation is None):
        raise refuse("audit_event", "$.lease_generation", "lease_envelope",
                     "lease_id and lease_generation are set together (the lease the event acts under) or both null")
    if e.lease_id is not None and (lease is None or (lease.lease_id, lease.generation) != (e.lease_id, e.lease_generation)):
        raise refuse("audit_event", "$.lease_id", "lease_envelope",
                     "the event's lease_id and lease_generation must name its projected lease")
    if run.status == "active" and (lease is None or lease.owner != run.owner):
        raise refuse("audit_event", "$.projection.run.owner", "active_owner_is_lease_owner",
                     "an active run's owner must be its projected lease's owner")
    first = e.sequence == 1
    if (e.type == "run_created") != first:
        raise refuse("audit_event", "$.type" if first else "$.sequence", "run_created_first",
                     "run_created is the first event (sequence 1) and appears exactly once")
    if first != (e.previous_event_digest is None):
        raise refuse("audit_event", "$.previous_event_digest", "digest_chain",
                     "is null exactly for the first event and otherwise names the previous event's digest")


def _no_duplicate_keys(pairs: list[tuple[str, Any]]) -> dict[str, Any]:
    seen: dict[str, Any] = {}
    for key, value in pairs:
        if key in seen:
            raise ValueError(f"the key {key!r} appears twice in one object (which one counts is ambiguous)")
        seen[key] = value
    return seen


def _no_constant(name: str) -> Any:
    raise ValueError(f"{name} is not a JSON number")


def parse_json(text: str, what: str) -> Any:
    """Strict JSON: no NaN/Infinity, no key given twice; a refusal names ``what`` and says how to fix it."""
    try:
        return decoded_text(lambda: json.loads(text, object_pairs_hook=_no_duplicate_keys, parse_constant=_no_constant), what)
    except ValueError as exc:
        raise LoopstateError(ErrorCode.VALIDATION_FAILED, f"{what} is not valid JSON: {exc}; write one JSON object",
                             field="$", rule="json") from None


KINDS: dict[str, tuple[type[Record], Any]] = {
    "config": (Config, check_config),
    "run": (Run, check_run),
    "lease": (Lease, check_lease),
    "grant": (Grant, check_grant),
    "route": (Route, check_route),
    "evidence": (Evidence, check_evidence),
    "issue_ledger": (IssueLedger, check_issue_ledger),
    "install_receipt": (InstallReceipt, check_install_receipt),
    "audit_event": (AuditEvent, check_audit_event),
    "harness_status": (HarnessStatus, None),
}


def validate(kind: str, data: Any) -> Any:
    """Decode and check one record of ``kind``; returns its Struct or raises VALIDATION_FAILED."""
    if kind not in KINDS:
        raise LoopstateError(
            ErrorCode.INVALID_PARAMS, f"unknown record kind {kind!r}; use one of {', '.join(KINDS)}", kind=kind,
        )
    cls, check = KINDS[kind]
    record = decode(kind, cls, data)
    _check_times(kind, record)
    if check is not None:
        check(record)
    return record


# Fields loopstate adds to the events it writes, beside the compatible ones (see docs/runs.md, "loopstate-added fields").
LOOPSTATE_EVENT_FIELDS = ("request_id", "request_fingerprint", "loopstate_record", BATCH)


def validate_written_event(data: Any) -> Any:
    """An audit event as loopstate writes it: the compatible event plus the loopstate-added fields, each checked."""
    if not isinstance(data, dict):
        return validate("audit_event", data)
    compatible = {k: v for k, v in data.items() if k not in LOOPSTATE_EVENT_FIELDS}
    event = validate("audit_event", compatible)
    for name in ("request_id", "request_fingerprint"):
        if name in data and (not isinstance(data[name], str) or not data[name]):
            raise refuse("audit_event", f"$.{name}", "type", "must be a non-empty string (added by loopstate)")
    if BATCH in data and batch_part(data[BATCH]) is None:
        raise refuse("audit_event", f"$.{BATCH}", "type", "must be [index, size] with 1 <= index <= size and size >= 2 (added by loopstate)")
    if "loopstate_record" in data:
        kinds = {"evidence_recorded": ("evidence", Evidence), "issue_opened": ("issue", Issue),
                 "issue_transitioned": ("issue", Issue)}
        if event.type not in kinds:
            raise refuse("audit_event", "$.loopstate_record", "unknown_field",
                         f"only evidence_recorded and issue events carry a loopstate_record, not {event.type}")
        name, cls = kinds[event.type]
        record = decode("audit_event", cls, data["loopstate_record"], "$.loopstate_record")
        _check_times("audit_event", record, "$.loopstate_record")
        if isinstance(record, Evidence):
            check_evidence(record)
    return event


def to_dict(record: Record) -> dict[str, Any]:
    return msgspec.to_builtins(record)
