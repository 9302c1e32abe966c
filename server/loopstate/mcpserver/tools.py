"""The nine MCP tools: each builds one protocol command or query and hands it to the service.

No rule lives here. A tool names the command its ``action`` picks, passes the
caller's fields through, and lets ``msgspec.convert`` hold them to the
protocol's own types (a missing or wrong field is INVALID_PARAMS naming it);
the domain then applies every rule it applies to the CLI and the sidecar. So
an agent that replaces a user-explicit claim, presents a tool result as
explicit, heartbeats an expired lease or completes a todo behind an open gate
gets the same stable error code the CLI prints, as a tool error.

Schemas stay small on purpose (the whole ``tools/list`` is measured by
tests/bench/bench_mcp_context.py): related verbs share one tool through an
``action`` field, descriptions are one line, and optional fields default to
None so that an absent field is the protocol's own default.

Each tool that changes the store takes an optional ``request_id``: the
request id of the command it applies, so a host that lost an answer can call
again with the same id and get the first result (``replayed``) instead of a
second append; without one, each call gets a fresh id.
"""

from __future__ import annotations

from typing import Any, Awaitable, Callable, Literal

import msgspec
from pydantic import BaseModel, ConfigDict, Field

from loopstate_protocol import goals as goals_proto
from loopstate_protocol import intent as intent_proto
from loopstate_protocol import runs as runs_proto
from loopstate_protocol.errors import ErrorCode

from loopstate.core.errors import LoopstateError

Call = Callable[..., Awaitable[Any]]



class Source(BaseModel):
    """Where a claim came from."""

    model_config = ConfigDict(extra="forbid")
    kind: Literal["user_event", "agent_turn", "tool_result", "external_evidence"]
    event_id: str | None = None
    text: str | None = Field(None, description="hashed, not stored")
    excerpt: str | None = None


def Opt(description: str | None = None) -> Any:  # noqa: N802 - reads as a type in the signatures below
    return Field(None, description=description)


def build(value: dict[str, Any], cls: type, action: str | None = None) -> Any:
    """A protocol message from the fields given (None: the protocol's default), or INVALID_PARAMS naming the field."""
    fields = {k: v for k, v in value.items() if v is not None}
    try:
        return msgspec.convert(fields, cls)
    except msgspec.ValidationError as exc:
        where = f" for action {action!r}" if action else ""
        raise LoopstateError(ErrorCode.INVALID_PARAMS, f"{exc}{where}", tool_command=cls.__struct_config__.tag) from None


def _lease(run_id: str, lease_id: str, generation: int) -> dict[str, Any]:
    """The lease a worker command acts under (run_heartbeat's description says where it comes from)."""
    return {"run_id": run_id, "lease_id": lease_id, "generation": generation}


def tool_functions(execute: Call, query: Call, session: Any) -> list[Callable[..., Awaitable[Any]]]:
    """The tool functions bound to this server's ``execute(command)``, ``query(message)`` and session state."""

    async def current_task() -> str | None:
        """The task a tool works on without a task_id: the one this connection started or resumed, else the
        project's current task (intent.current)."""
        if session.task_id is None:
            return (await query(intent_proto.IntentCurrent()))["task_id"]
        return session.task_id

    async def intent_task(
        action: Literal["start", "resume"],
        task_id: str | None = Opt("resume: default current"),
        label: str | None = Opt("start: a short label"),
        request_id: str | None = None,
    ) -> dict[str, Any]:
        """Start or resume the project's current task (claims default to it)."""
        if action == "start":
            outcome = await execute(build({"label": label, "task_id": task_id, "actor": "agent"}, intent_proto.IntentTaskStart),
                                    request_id)
            session.task_id = outcome["events"][0]["task_id"]
            return {"task_id": session.task_id, **outcome}
        if task_id is None:
            current = await query(intent_proto.IntentCurrent())
            if current["task_id"] is None:
                raise LoopstateError(ErrorCode.NOT_FOUND, "this project has no task to resume; start one (action start)")
            session.task_id = current["task_id"]
            return {"task_id": session.task_id, "task": current["task"]}
        from loopstate.core.prefix import resolve_prefix

        known = [t["task_id"] for t in await query(intent_proto.IntentTasks())]
        task_id = resolve_prefix("task", task_id, known, hint="the intent resource lists the tasks")
        outcome = await execute(build({"task_id": task_id, "actor": "agent"}, intent_proto.IntentTaskResume), request_id)
        session.task_id = task_id
        return {"task_id": task_id, **outcome}

    async def intent_claim(
        action: Literal["add", "replace", "invalidate"],
        statement: str | None = Opt("one atomic statement"),
        status: Literal["explicit", "inferred", "evidence", "unknown", "disputed"] | None = Opt(
            "explicit: the user's words (by user, user_event source)"),
        facets: list[str] | None = Opt("outcome success_signal failure_signal hard_constraint soft_constraint "
                                       "tradeoff unknown result_feedback disagreement"),
        by: Literal["user", "agent", "evidence"] = "agent",
        confidence: float | None = Opt("0-1, inferred only"),
        source: Source | None = None,
        supersedes: list[str] | None = Opt("replace: claim ids"),
        claim_id: str | None = Opt("invalidate"),
        reason: str | None = Opt("invalidate"),
        task_id: str | None = None,
        request_id: str | None = None,
    ) -> dict[str, Any]:
        """Record, replace or invalidate a claim about the user's intent."""
        common = {"task_id": task_id or await current_task(), "actor": by,
                  "source": source.model_dump(exclude_none=True) if source else None}
        if common["task_id"] is None:
            raise LoopstateError(ErrorCode.INVALID_PARAMS, "this project has no task yet: give task_id, or start one "
                                 "with intent_task first")
        if action == "invalidate":
            return await execute(build({**common, "claim_id": claim_id, "reason": reason},
                                       intent_proto.IntentClaimInvalidate, action), request_id)
        claim = {"statement": statement, "role": by, "epistemic_status": status, "facets": facets, "confidence": confidence}
        cls = intent_proto.IntentClaimAdd if action == "add" else intent_proto.IntentClaimReplace
        return await execute(build({**common, "claim": {k: v for k, v in claim.items() if v is not None},
                                    "supersedes": supersedes}, cls, action), request_id)

    async def intent_show(
        compact: bool = False,
        task_id: str | None = None,
        cursor: str | None = None,
    ) -> dict[str, Any]:
        """The intent snapshot (of this session's task), or its compact handoff."""
        task = task_id or await current_task()
        if compact:
            return await query(build({"task_id": task}, intent_proto.IntentCompact))
        return await query(build({"task_id": task, "cursor": cursor}, intent_proto.IntentSnapshot))

    async def run_status(run_id: str) -> dict[str, Any]:
        """A run's state, lease, pending operation, issues and evidence."""
        return await query(build({"run_id": run_id}, runs_proto.Status))

    async def run_heartbeat(run_id: str, lease_id: str, generation: int,
                            request_id: str | None = None) -> dict[str, Any]:
        """Renew your lease (lease_id, generation: from run_status) on a run."""
        return await execute(build(_lease(run_id, lease_id, generation), runs_proto.Heartbeat), request_id)

    async def run_operation(
        action: Literal["intend", "complete"],
        run_id: str, lease_id: str, generation: int,
        completion_event_type: Literal["route_selected", "stage_started", "evidence_recorded", "issue_opened",
                                       "issue_transitioned", "stage_completed"],
        completion_data: dict[str, Any],
        operation_id: str | None = Opt("complete"),
        operation: str | None = Opt("intend: e.g. local_write"),
        destination: str | None = Opt("intend: e.g. repository"),
        cost_usd: str | None = None,
        record: dict[str, Any] | None = Opt("complete: the evidence/issue/route record"),
        request_id: str | None = None,
    ) -> dict[str, Any]:
        """Announce an operation before doing it (intend), then report its completion."""
        fields = {**_lease(run_id, lease_id, generation), "completion_event_type": completion_event_type,
                  "completion_data": completion_data, "operation_id": operation_id}
        if action == "intend":
            return await execute(build({**fields, "action": operation, "destination": destination, "cost_usd": cost_usd},
                                       runs_proto.Intend, action), request_id)
        return await execute(build({**fields, "record": record}, runs_proto.Complete, action), request_id)

    async def run_issue(
        action: Literal["open", "update", "evidence"],
        run_id: str, lease_id: str, generation: int,
        title: str | None = Opt("open"),
        severity: Literal["critical", "high", "medium", "low"] | None = Opt("open"),
        blocking: bool | None = Opt("open"),
        issue_id: str | None = Opt("update"),
        status: Literal["open", "acknowledged", "resolving", "verification_pending", "closed", "reopened",
                        "deferred"] | None = Opt("update"),
        resolution: str | None = None,
        evidence: dict[str, Any] | None = Opt("evidence: the record"),
        evidence_ids: list[str] | None = None,
        request_id: str | None = None,
    ) -> dict[str, Any]:
        """Open or update an issue on a run, or add evidence to it."""
        lease = _lease(run_id, lease_id, generation)
        if action == "open":
            return await execute(build({**lease, "title": title, "severity": severity, "blocking": blocking,
                                        "issue_id": issue_id, "evidence_ids": evidence_ids}, runs_proto.IssueOpen, action),
                                 request_id)
        if action == "update":
            return await execute(build({**lease, "issue_id": issue_id, "status": status, "resolution": resolution,
                                        "evidence_ids": evidence_ids}, runs_proto.IssueUpdate, action),
                                 request_id)
        return await execute(build({**lease, "evidence": evidence}, runs_proto.EvidenceAdd, action), request_id)

    async def todo_ready(goal_id: str) -> dict[str, Any]:
        """A goal's open todos that wait for no gate, in board order."""
        # Board pages in board order, active todos first: read on until every active one was seen.
        board = await query(build({"goal_id": goal_id}, goals_proto.GetBoard))
        active = [t for group in board["active"] for t in group["todos"]]
        while len(active) < board["page"]["active_total"] and board["page"]["next_cursor"]:
            board = await query(build({"goal_id": goal_id, "cursor": board["page"]["next_cursor"]}, goals_proto.GetBoard))
            active += [t for group in board["active"] for t in group["todos"]]
        ready = [t for t in active if t["status"] == "open" and not t.get("open_gate_ids")]
        return {"goal_id": goal_id, "ready": ready, "store_sequence": board["meta"]["last_append_sequence"]}

    async def todo(
        action: Literal["claim", "update", "complete"],
        goal_id: str, todo_id: str,
        by: str | None = Opt("claim: who"),
        lease_seconds: int | None = Opt("claim"),
        note: str | None = Opt("claim"),
        title: str | None = Opt("update"),
        priority: Literal["P0", "P1", "P2", "P3", "P4"] | None = Opt("update"),
        rationale: str | None = Opt("complete"),
        evidence_ids: list[str] | None = Opt("complete"),
        request_id: str | None = None,
    ) -> dict[str, Any]:
        """Claim, update or complete a goal's todo (open gates refuse completion)."""
        ids = {"goal_id": goal_id, "todo_id": todo_id}
        if action == "claim":
            return await execute(build({**ids, "claimed_by": by, "lease_seconds": lease_seconds, "note": note},
                                       goals_proto.ClaimTodo, action), request_id)
        if action == "update":
            return await execute(build({**ids, "title": title, "priority": priority}, goals_proto.UpdateTodo, action), request_id)
        return await execute(build({**ids, "rationale": rationale, "evidence_ids": evidence_ids},
                                   goals_proto.CompleteTodo, action), request_id)

    return [intent_task, intent_claim, intent_show, run_status, run_heartbeat, run_operation, run_issue, todo_ready, todo]
