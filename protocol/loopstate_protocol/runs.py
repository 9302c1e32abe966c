"""Commands, queries and results of the runs domain (bounded runs).

Nested records (actor, asset, budgets, evidence, issue, route, scope) travel as
JSON objects with the record field names (the-loop's, for compatibility); the server
validates them against the records and names the field and the rule when one is wrong.

Every command that writes a run names the run (``run_id``, a UUIDv4 the
client makes: ``loopstate run create`` does) so an exact retry with the same
request id lands on the same stream. Worker commands carry the lease they act
under (``lease_id`` and ``generation``): a stale holder is fenced out.
"""

from __future__ import annotations

from typing import Annotated, Any, Literal, get_args

import msgspec

from loopstate_protocol.base import Command, Query

Stage = Literal["strategize", "spec_pack", "build", "test", "resolve", "close"]
CompletionType = Literal[
    "route_selected", "stage_started", "evidence_recorded", "issue_opened", "issue_transitioned", "stage_completed",
]
IssueStatus = Literal["open", "acknowledged", "resolving", "verification_pending", "closed", "reopened", "deferred"]


# The nested records travel as plain objects (the server names the field and the rule when one is
# wrong, which a wire decoder could not); their fields are documented here for `loopstate schema`.
# tests/runs/test_runs_schema_fields.py checks them against the server's own record types.

def _record(description: str, properties: dict[str, Any], required: tuple[str, ...] = ()) -> msgspec.Meta:
    """The schema of one nested record, for ``Annotated[dict[str, Any], _record(...)]``."""
    schema: dict[str, Any] = {"properties": properties, "additionalProperties": False}
    if required:
        schema["required"] = list(required)
    return msgspec.Meta(description=description, extra_json_schema=schema)


_TEXT = {"type": "string", "minLength": 1}
_TEXTS = {"type": "array", "items": _TEXT}
_STAGES = ["strategize", "spec_pack", "build", "test", "resolve", "close"]

Actor = Annotated[dict[str, Any], _record("Who acts: an agent harness or a person at a terminal (harness manual).", {
    "harness": {"enum": ["codex", "claude_code", "kimi_code", "opencode", "deepseek_harness", "manual"]},
    "actor": _TEXT, "session_id": _TEXT,
}, ("harness", "actor", "session_id"))]
Asset = Annotated[dict[str, Any], _record("What the run works on.", {
    "name": _TEXT,
    "root": {"type": "string", "minLength": 1, "description": "relative to the project; no '..', no absolute path"},
    "track": {"enum": ["code", "noncode"]},
    "boundaries": {"type": "array", "items": _TEXT, "minItems": 1},
}, ("name", "root", "track", "boundaries"))]
Budgets = Annotated[dict[str, Any], _record("Frozen at creation; a field left out takes the project config's value.", {
    "max_duration_seconds": {"type": "integer", "minimum": 1},
    "max_stage_attempts": {"type": "integer", "minimum": 1},
    "max_mutations": {"type": "integer", "minimum": 0},
    "max_external_actions": {"type": "integer", "minimum": 0},
    "max_cost_usd": {"anyOf": [{"type": "string", "pattern": "^(0|[1-9][0-9]*)(?:\\.[0-9]{1,6})?$"}, {"type": "null"}],
                     "description": "a decimal string; null: no spending authority"},
})]
Scope = Annotated[dict[str, Any], _record("What a grant covers; an exclusion wins over every entry ('*' in assets: any asset).", {
    "assets": _TEXTS, "actions": _TEXTS, "destinations": _TEXTS, "exclusions": _TEXTS,
}, ("assets", "actions", "destinations", "exclusions"))]
EvidenceFields = Annotated[dict[str, Any], _record(
    "The evidence record without evidence_id, run_id, actor, observed_at and schema_version (loopstate fills "
    "them). A passed record needs a procedure and an artifact_ref or a manual_observation.", {
        "stage": {"enum": _STAGES, "description": "default: the run's current stage"},
        "requirement_ids": {"type": "array", "items": _TEXT, "minItems": 1},
        "type": {"enum": ["command", "file", "visual", "source", "manual", "harness_probe"]},
        "description": _TEXT,
        "procedure": _TEXTS,
        "outcome": {"enum": ["passed", "failed", "blocked", "denied", "unverified"]},
        "artifact_refs": {"type": "array", "items": {
            "type": "object", "additionalProperties": False, "required": ["kind", "ref"],
            "properties": {"kind": {"enum": ["file", "command_output", "url", "manual_observation"]}, "ref": _TEXT},
        }},
        "digest": {"anyOf": [{"type": "string", "pattern": "^[0-9a-f]{64}$"}, {"type": "null"}],
                   "description": "SHA-256 of the artifact, lowercase hex"},
        "environment": {"type": "object", "additionalProperties": {"type": ["string", "integer", "number", "boolean", "null"]},
                        "description": "redacted and allowlisted facts; a value that looks like a credential is refused"},
        "manual_observation": _TEXT,
    }, ("requirement_ids", "type", "description", "procedure", "outcome", "artifact_refs", "digest", "environment"))]
Route = Annotated[dict[str, Any], msgspec.Meta(
    description="The route decision record (route.schema.json: capability, harness, candidates, ...).")]
CompletionData = Annotated[dict[str, Any], msgspec.Meta(
    description="The exact data of the completion event: its fields per completion_event_type, as docs/runs.md lists them.")]

CompletionRecord = Annotated[dict[str, Any], msgspec.Meta(
    description="The full record of an evidence_recorded completion (the fields of EvidenceAdd.evidence), of an "
                "issue_opened one (title, severity, blocking, requirement_ids, reproduction, regression_procedure, "
                "evidence_ids, owner, as runs.issue_open takes them), of a route_selected one (the route record), or "
                "for issue_transitioned optionally {resolution, evidence_ids}.")]


class RunCommand(Command, kw_only=True):
    run_id: str


class LeasedCommand(RunCommand, kw_only=True):
    """A worker command: only the holder of this exact lease and generation may send it."""

    lease_id: str
    generation: int


class Create(RunCommand, tag="runs.create", kw_only=True):
    asset: Asset
    objective: str
    done_gate: list[str]
    actor: Actor
    # None: the default local authority, recorded by the server with the run
    # (level attended, local_write to repository on this asset only, 24 hours).
    authority_grant_id: str | None = None
    mode: Literal["loop", "auto"] | None = None  # None: the project config's default_mode
    budgets: Budgets | None = None  # None: the project config's budgets


class Acquire(RunCommand, tag="runs.acquire", kw_only=True):
    owner: Actor
    lane_id: str | None = None


class Heartbeat(LeasedCommand, tag="runs.heartbeat", kw_only=True):
    """Renew one's own lease; coalesced (no event) until a renewal is due."""


class Transition(LeasedCommand, tag="runs.transition", kw_only=True):
    to: Literal["waiting_approval", "waiting_external", "blocked", "complete", "failed", "cancelled", "ready", "active"]
    reason: str


class StageStart(LeasedCommand, tag="runs.stage_start", kw_only=True):
    stage: Stage


class StageComplete(LeasedCommand, tag="runs.stage_complete", kw_only=True):
    stage: Stage
    outcome: Literal["passed", "failed", "blocked"]


class RouteSelect(LeasedCommand, tag="runs.route_select", kw_only=True):
    route: Route


class IssueOpen(LeasedCommand, tag="runs.issue_open", kw_only=True):
    title: str
    severity: Literal["critical", "high", "medium", "low"]
    blocking: bool
    requirement_ids: list[str] = []
    reproduction: list[str] = []
    regression_procedure: list[str] = []
    evidence_ids: list[str] = []
    owner: Actor | None = None
    issue_id: str | None = None  # None: loopstate makes one


class IssueUpdate(LeasedCommand, tag="runs.issue_update", kw_only=True):
    issue_id: str
    status: IssueStatus
    resolution: str | None = None
    evidence_ids: list[str] | None = None


class EvidenceAdd(LeasedCommand, tag="runs.evidence_add", kw_only=True):
    """An evidence record without evidence_id, run_id, actor and observed_at (loopstate fills them)."""

    evidence: EvidenceFields
    evidence_id: str | None = None


class Intend(LeasedCommand, tag="runs.intend", kw_only=True):
    """Announce client work before doing it: its exact completion, its action and destination, its cost."""

    operation_id: str | None = None
    completion_event_type: CompletionType
    completion_data: CompletionData
    action: str
    destination: str
    cost_usd: str = "0"


class Complete(LeasedCommand, tag="runs.complete", kw_only=True):
    """Report the exact completion an intent declared (plus the full record for evidence/issue/route)."""

    operation_id: str
    completion_event_type: CompletionType
    completion_data: CompletionData
    record: CompletionRecord | None = None


class Reconcile(RunCommand, tag="runs.reconcile", kw_only=True):
    operation_id: str
    outcome: Literal["unknown", "known_not_started"]
    actor: Actor
    lease_id: str | None = None
    generation: int | None = None


class AuthorityGrant(Command, tag="runs.authority_grant", kw_only=True):
    grant_id: str
    level: Literal["attended", "bounded", "scoped", "operational", "full"]
    actor: str
    scope: Scope
    risks_shown: list[str]
    confirmation_text: str
    expires_at: str
    permanent_invariants: list[str] | None = None  # None: all eight


class AuthorityRevoke(Command, tag="runs.authority_revoke", kw_only=True):
    grant_id: str
    revoked_by: str


class Stop(RunCommand, tag="runs.stop", kw_only=True):
    """Set the project's kill switch (creating the STOP file) and halt this run, or cancel only this run.

    The switch is project-wide: every other run of the project halts at its next command.
    """

    actor: Actor
    cancel: bool = False
    reason: str = "stopped by the user"


class Resume(RunCommand, tag="runs.resume", kw_only=True):
    """Explicit recovery: fresh-generation lease, straight to active."""

    owner: Actor
    reason: str
    lease_id: str | None = None  # one's own still-valid lease, if any
    generation: int | None = None
    authority_grant_id: str | None = None  # replace the bound grant (only during recovery)


class Sync(RunCommand, tag="runs.sync", kw_only=True):
    """Write the safety truth a run is missing: kill switch halt, revocation marker, budget markers."""

    actor: Actor | None = None


class Status(Query, tag="runs.status", kw_only=True):
    run_id: str


class GrantShow(Query, tag="runs.grant_show", kw_only=True):
    grant_id: str


# Every status a run can be in (the ``status`` of a run record), in lifecycle order.
RunStatusName = Literal["draft", "ready", "active", "waiting_approval", "waiting_external", "blocked", "failed",
                        "halted_kill_switch", "complete", "cancelled"]
RUN_STATUSES: tuple[str, ...] = get_args(RunStatusName)


class KillSwitchState(msgspec.Struct, kw_only=True):
    """Whether a kill switch of the project stands, probed when the status is read.

    The switch is project-wide: while ``set``, every run of the project halts at
    its next command (status ``halted_kill_switch``) and no run is created.
    """

    set: bool
    paths: list[str]  # the configured switches found present or unreadable (and a shared store's stop, named)
    config_error: str | None = None  # the project config is invalid: the default switches were probed
    shared: str | None = None  # the shared store (its URL, no password) whose recorded stop stands; else None


class RunStatus(msgspec.Struct, kw_only=True):
    """The result of ``runs.status`` and the ``runs/status/<run_id>`` view."""

    run_id: str
    sequence: int
    run: dict[str, Any] | None
    lease: dict[str, Any] | None
    pending_operation: dict[str, Any] | None
    issues: list[dict[str, Any]]
    evidence_ids: list[str]
    lease_expired: bool | None
    missing_markers: int
    kill_switch: KillSwitchState | None = None


COMMANDS = (
    Create, Acquire, Heartbeat, Transition, StageStart, StageComplete, RouteSelect, IssueOpen, IssueUpdate,
    EvidenceAdd, Intend, Complete, Reconcile, AuthorityGrant, AuthorityRevoke, Stop, Resume, Sync,
)
QUERIES = (Status, GrantShow)
