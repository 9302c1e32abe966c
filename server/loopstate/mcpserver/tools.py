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


def build(value: dict[str, Any], cls: type[msgspec.Struct], action: str | None = None) -> Any:
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


class Action:
    """One action of a tool: the protocol message it sends, and where each tool argument goes in it.

    This is the one definition both sides are generated from. ``build`` fills
    the message from it, and ``needs`` (what the tool's input schema marks
    required for this action, ``action_schema``) is read from the protocol
    message itself: an argument is needed when every field on its path has no
    default there. So the schema cannot say a field is optional while the
    protocol refuses the call without it.
    """

    def __init__(self, message: type, arguments: dict[str, str]) -> None:
        self.message = message
        self.arguments = arguments  # tool argument -> dotted path in the message ("claim.epistemic_status")
        self.needs = tuple(arg for arg, path in arguments.items() if _required_path(message, path.split(".")))

    def build(self, tool: str, action: str, given: dict[str, Any], filled: dict[str, Any]) -> Any:
        """The message for these arguments; one this action needs and lacks, or one it does not take, is
        INVALID_PARAMS naming the argument (before the protocol's own check of every value)."""
        missing = [arg for arg in self.needs if given.get(arg) is None]
        if missing:
            named = [arg if self.arguments[arg] == arg else f"{arg} (the protocol's {self.arguments[arg]})"
                     for arg in missing]
            raise LoopstateError(ErrorCode.INVALID_PARAMS, f"{tool} action {action!r} needs {', '.join(named)}",
                                 missing=missing)
        unused = sorted(arg for arg, value in given.items() if value is not None and arg not in self.arguments)
        if unused:
            raise LoopstateError(ErrorCode.INVALID_PARAMS, f"{tool} action {action!r} does not take "
                                 f"{', '.join(unused)}; it takes {', '.join(self.arguments)}", unused=unused)
        fields: dict[str, Any] = dict(filled)
        for arg, path in self.arguments.items():
            if given.get(arg) is not None:
                *parents, last = path.split(".")
                into = fields
                for parent in parents:
                    into = into.setdefault(parent, {})
                into[last] = given[arg]
        return build(fields, self.message, action)


def _required_path(message: type, path: list[str]) -> bool:
    """Whether ``path`` (a field, or a field of a nested Struct) has no default all the way down in ``message``."""
    info = {f.name: f for f in msgspec.structs.fields(message)}.get(path[0])
    if info is None:
        raise ValueError(f"{message.__name__} has no field {path[0]!r}")  # a typo in an ACTIONS path: fail at import
    if not info.required:
        return False
    return len(path) == 1 or _required_path(info.type, path[1:])


def _lease_arguments() -> dict[str, str]:
    return {"run_id": "run_id", "lease_id": "lease_id", "generation": "generation"}


_COMPLETION = {"completion_event_type": "completion_event_type", "completion_data": "completion_data"}
_CLAIM = {"statement": "claim.statement", "status": "claim.epistemic_status", "facets": "claim.facets",
          "confidence": "claim.confidence", "source": "source"}

# tool -> action -> Action. The arguments a tool fills itself (the task, the actor, the claim's role) are
# not listed: ``build`` gets them as ``filled``.
ACTIONS: dict[str, dict[str, Action]] = {
    "intent_claim": {
        "add": Action(intent_proto.IntentClaimAdd, _CLAIM),
        "replace": Action(intent_proto.IntentClaimReplace, {**_CLAIM, "supersedes": "supersedes"}),
        "invalidate": Action(intent_proto.IntentClaimInvalidate, {"claim_id": "claim_id", "reason": "reason"}),
    },
    "run_operation": {
        "intend": Action(runs_proto.Intend, {**_lease_arguments(), **_COMPLETION, "operation": "action",
                                             "destination": "destination", "cost_usd": "cost_usd",
                                             "operation_id": "operation_id"}),
        "complete": Action(runs_proto.Complete, {**_lease_arguments(), **_COMPLETION, "operation_id": "operation_id",
                                                 "record": "record"}),
    },
    "run_issue": {
        "open": Action(runs_proto.IssueOpen, {**_lease_arguments(), "title": "title", "severity": "severity",
                                              "blocking": "blocking", "issue_id": "issue_id",
                                              "evidence_ids": "evidence_ids"}),
        "update": Action(runs_proto.IssueUpdate, {**_lease_arguments(), "issue_id": "issue_id", "status": "status",
                                                  "resolution": "resolution", "evidence_ids": "evidence_ids"}),
        "evidence": Action(runs_proto.EvidenceAdd, {**_lease_arguments(), "evidence": "evidence"}),
    },
    "todo": {
        "claim": Action(goals_proto.ClaimTodo, {"goal_id": "goal_id", "todo_id": "todo_id", "by": "claimed_by",
                                                "lease_seconds": "lease_seconds", "note": "note"}),
        "update": Action(goals_proto.UpdateTodo, {"goal_id": "goal_id", "todo_id": "todo_id", "title": "title",
                                                  "priority": "priority"}),
        "complete": Action(goals_proto.CompleteTodo, {"goal_id": "goal_id", "todo_id": "todo_id",
                                                      "rationale": "rationale", "evidence_ids": "evidence_ids"}),
    },
}


def For(tool: str, argument: str, note: str | None = None) -> Any:  # noqa: N802 - reads as a type, like Opt
    """An optional tool argument described from ``ACTIONS``: the actions that take it, when not every one does.

    Which action needs it is said once, in the tool's description
    (``needs_line``); both come from the table ``Action.build`` refuses by,
    so neither can drift from what a call is refused for.
    """
    actions = ACTIONS[tool]
    taking = [name for name, action in actions.items() if argument in action.arguments]
    optional = [name for name in taking if argument not in actions[name].needs]
    if note:  # its note says what it is for; the refusal names the actions of an argument given to another
        return Field(None, description=note)
    return Field(None, description=", ".join(optional) if optional and len(taking) < len(actions) else None)


def needs_line(tool: str, always: set[str]) -> str:
    """The sentence of a tool's description that says what each action needs beyond ``always`` (the arguments
    without a default, which the schema's own ``required`` lists): ``Needs: add statement, status; ...``
    (an action that needs what the one before it does and more says ``as add +``, to keep the schema small)."""
    parts, before = [], None
    for name, action in ACTIONS[tool].items():
        needs = [arg for arg in action.needs if arg not in always]
        if not needs:
            continue
        if before is not None and set(before[1]) < set(needs):
            parts.append(f"{name} as {before[0]} + {', '.join(arg for arg in needs if arg not in before[1])}")
        else:
            parts.append(f"{name} {', '.join(needs)}")
        before = (name, needs)
    return " Needs: " + "; ".join(parts) + "." if parts else ""


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
        statement: str | None = For("intent_claim", "statement", "one atomic statement"),
        status: Literal["explicit", "inferred", "evidence", "unknown", "disputed"] | None = For("intent_claim", "status",
            "explicit: the user's words (by user, user_event source)"),
        facets: list[str] | None = For("intent_claim", "facets", "outcome success_signal failure_signal hard_constraint soft_constraint "
                                       "tradeoff unknown result_feedback disagreement"),
        by: Literal["user", "agent", "evidence"] = "agent",
        confidence: float | None = For("intent_claim", "confidence", "0-1, inferred only"),
        source: Source | None = None,
        supersedes: list[str] | None = For("intent_claim", "supersedes", "claim ids"),
        claim_id: str | None = For("intent_claim", "claim_id"),
        reason: str | None = For("intent_claim", "reason"),
        task_id: str | None = None,
        request_id: str | None = None,
    ) -> dict[str, Any]:
        """Add, replace or invalidate a claim about the user's intent."""
        task = task_id or await current_task()
        if task is None:
            raise LoopstateError(ErrorCode.INVALID_PARAMS, "this project has no task yet: give task_id, or start one "
                                 "with intent_task first")
        given = {"statement": statement, "status": status, "facets": facets, "confidence": confidence,
                 "source": source.model_dump(exclude_none=True) if source else None, "supersedes": supersedes,
                 "claim_id": claim_id, "reason": reason}
        filled: dict[str, Any] = {"task_id": task, "actor": by}
        if action != "invalidate":
            filled["claim"] = {"role": by}
        return await execute(ACTIONS["intent_claim"][action].build("intent_claim", action, given, filled), request_id)

    async def intent_show(
        compact: bool = False,
        task_id: str | None = None,
        cursor: str | None = None,
    ) -> dict[str, Any]:
        """This session's task's intent snapshot, or its compact handoff."""
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
        operation_id: str | None = For("run_operation", "operation_id"),
        operation: str | None = For("run_operation", "operation", "e.g. local_write"),
        destination: str | None = For("run_operation", "destination", "e.g. repository"),
        cost_usd: str | None = None,
        record: dict[str, Any] | None = For("run_operation", "record", "the evidence/issue/route record"),
        request_id: str | None = None,
    ) -> dict[str, Any]:
        """Announce an operation before doing it (intend), then report its completion."""
        given = {**_lease(run_id, lease_id, generation), "completion_event_type": completion_event_type,
                 "completion_data": completion_data, "operation_id": operation_id, "operation": operation,
                 "destination": destination, "cost_usd": cost_usd, "record": record}
        return await execute(ACTIONS["run_operation"][action].build("run_operation", action, given, {}), request_id)

    async def run_issue(
        action: Literal["open", "update", "evidence"],
        run_id: str, lease_id: str, generation: int,
        title: str | None = For("run_issue", "title"),
        severity: Literal["critical", "high", "medium", "low"] | None = For("run_issue", "severity"),
        blocking: bool | None = For("run_issue", "blocking"),
        issue_id: str | None = For("run_issue", "issue_id"),
        status: Literal["open", "acknowledged", "resolving", "verification_pending", "closed", "reopened",
                        "deferred"] | None = For("run_issue", "status"),
        resolution: str | None = None,
        evidence: dict[str, Any] | None = For("run_issue", "evidence", "the record"),
        evidence_ids: list[str] | None = None,
        request_id: str | None = None,
    ) -> dict[str, Any]:
        """Open or update a run's issue, or add evidence."""
        given = {**_lease(run_id, lease_id, generation), "title": title, "severity": severity, "blocking": blocking,
                 "issue_id": issue_id, "status": status, "resolution": resolution, "evidence": evidence,
                 "evidence_ids": evidence_ids}
        return await execute(ACTIONS["run_issue"][action].build("run_issue", action, given, {}), request_id)

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
        by: str | None = For("todo", "by", "who"),
        lease_seconds: int | None = For("todo", "lease_seconds"),
        note: str | None = For("todo", "note"),
        title: str | None = For("todo", "title"),
        priority: Literal["P0", "P1", "P2", "P3", "P4"] | None = For("todo", "priority"),
        rationale: str | None = For("todo", "rationale"),
        evidence_ids: list[str] | None = For("todo", "evidence_ids"),
        request_id: str | None = None,
    ) -> dict[str, Any]:
        """Claim, update or complete a goal's todo."""  # an open gate's refusal says why, when it comes
        given = {"goal_id": goal_id, "todo_id": todo_id, "by": by, "lease_seconds": lease_seconds, "note": note,
                 "title": title, "priority": priority, "rationale": rationale, "evidence_ids": evidence_ids}
        return await execute(ACTIONS["todo"][action].build("todo", action, given, {}), request_id)

    functions: list[Callable[..., Awaitable[Any]]] = [
        intent_task, intent_claim, intent_show, run_status, run_heartbeat, run_operation, run_issue, todo_ready, todo]
    for fn in functions:
        if fn.__name__ in ACTIONS:
            fn.__doc__ = (fn.__doc__ or "") + needs_line(fn.__name__, _always(fn))
    return functions


def _always(fn: Callable[..., Any]) -> set[str]:
    """The arguments of a tool function without a default: every call needs them, whatever its action."""
    import inspect

    return {name for name, param in inspect.signature(fn).parameters.items() if param.default is inspect.Parameter.empty}
