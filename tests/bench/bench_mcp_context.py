"""What `loopstate mcp` costs an agent's context: its tools/list and instructions, in tokens.

A host puts every tool's name, description and input schema (and the
server's instructions) into the model's context on every turn, so that size
is paid again and again. This prints it for:

- loopstate: the nine tools as `loopstate mcp` publishes them (related verbs
  grouped by an ``action`` field, schemas without pydantic's titles and
  ``anyOf [T, null]``), read over real stdio from a `loopstate mcp` process;
- the same nine tools with the SDK's default schemas (what the compaction saves);
- a one-verb-per-tool design covering the same verbs (17 tools; seed 000's
  own server has about 15): the same fields (a ``request_id`` on each verb
  that changes the store, as loopstate's own tools have), one tool per verb, with the
  SDK's default schemas, and again with loopstate's compaction. Its tools are
  signatures only: they are listed by a real MCPServer, never called. A
  15-tool design of that kind is 15 times its per-tool figure.

Tokens are counted with the o200k_base and cl100k_base encodings of the
``bpe-openai`` package, which ships them (plain tiktoken downloads its
encodings on first use, which fails offline); without it, bytes/4 is printed
instead and says so. The target is under 1,500 tokens for loopstate.

Usage: python tests/bench/bench_mcp_context.py
"""

from __future__ import annotations

import asyncio
import os
import sys
import tempfile
from typing import Any, Literal

from pydantic import Field

TARGET = 1500
Opt = Field(None)


def counters() -> dict[str, Any]:
    try:
        import bpe_openai
    except ImportError:
        return {"bytes/4 (estimate: bpe-openai is not installed)": lambda text: len(text.encode()) // 4}
    return {name: (lambda enc: lambda text: len(enc.encode(text)))(bpe_openai.get_encoding(name))
            for name in ("o200k_base", "cl100k_base")}


# The one-verb-per-tool reference: the same fields as loopstate's tools, one tool per verb. -----------

async def intent_task_start(label: str | None = Opt, request_id: str | None = Opt) -> dict[str, Any]:
    """Start an intent task for this session."""


async def intent_task_resume(task_id: str | None = Opt) -> dict[str, Any]:
    """Resume this session's intent task (default: the newest task not off)."""


async def intent_claim_add(statement: str, status: Literal["explicit", "inferred", "evidence", "unknown", "disputed"],
                           facets: list[str], by: Literal["user", "agent", "evidence"] = "agent",
                           confidence: float | None = Opt, source: dict[str, Any] | None = Opt,
                           task_id: str | None = Opt, request_id: str | None = Opt) -> dict[str, Any]:
    """Record a claim about the user's intent."""


async def intent_claim_replace(supersedes: list[str], statement: str,
                               status: Literal["explicit", "inferred", "evidence", "unknown", "disputed"],
                               facets: list[str], by: Literal["user", "agent", "evidence"] = "agent",
                               confidence: float | None = Opt, source: dict[str, Any] | None = Opt,
                               task_id: str | None = Opt, request_id: str | None = Opt) -> dict[str, Any]:
    """Replace claims by a new one."""


async def intent_claim_invalidate(claim_id: str, reason: str | None = Opt, by: Literal["user", "agent", "evidence"] = "agent",
                                  source: dict[str, Any] | None = Opt, task_id: str | None = Opt, request_id: str | None = Opt) -> dict[str, Any]:
    """Invalidate a claim."""


async def intent_show(compact: bool = False, task_id: str | None = Opt) -> dict[str, Any]:
    """The intent snapshot, or its compact handoff."""


async def run_status(run_id: str) -> dict[str, Any]:
    """A run's state, lease, pending operation, issues and evidence."""


async def run_heartbeat(run_id: str, lease_id: str, generation: int, request_id: str | None = Opt) -> dict[str, Any]:
    """Renew your lease on a run."""


async def run_intend(run_id: str, lease_id: str, generation: int, completion_event_type: str,
                     completion_data: dict[str, Any], operation: str, destination: str,
                     cost_usd: str | None = Opt, request_id: str | None = Opt) -> dict[str, Any]:
    """Announce an operation before doing it."""


async def run_complete(run_id: str, lease_id: str, generation: int, operation_id: str, completion_event_type: str,
                       completion_data: dict[str, Any], record: dict[str, Any] | None = Opt, request_id: str | None = Opt) -> dict[str, Any]:
    """Report an intended operation's completion."""


async def run_issue_open(run_id: str, lease_id: str, generation: int, title: str,
                         severity: Literal["critical", "high", "medium", "low"], blocking: bool,
                         evidence_ids: list[str] | None = Opt, request_id: str | None = Opt) -> dict[str, Any]:
    """Open an issue on a run."""


async def run_issue_update(run_id: str, lease_id: str, generation: int, issue_id: str,
                           status: Literal["open", "acknowledged", "resolving", "verification_pending", "closed",
                                           "reopened", "deferred"],
                           resolution: str | None = Opt, evidence_ids: list[str] | None = Opt, request_id: str | None = Opt) -> dict[str, Any]:
    """Update an issue of a run."""


async def run_evidence_add(run_id: str, lease_id: str, generation: int, evidence: dict[str, Any], request_id: str | None = Opt) -> dict[str, Any]:
    """Add evidence to a run."""


async def todo_ready(goal_id: str) -> dict[str, Any]:
    """A goal's open todos that wait for no gate."""


async def todo_claim(goal_id: str, todo_id: str, by: str, lease_seconds: int | None = Opt,
                     note: str | None = Opt, request_id: str | None = Opt) -> dict[str, Any]:
    """Claim a goal's todo."""


async def todo_complete(goal_id: str, todo_id: str, rationale: str,
                        evidence_ids: list[str] | None = Opt, request_id: str | None = Opt) -> dict[str, Any]:
    """Complete a goal's todo."""


async def todo_update(goal_id: str, todo_id: str, title: str | None = Opt,
                      priority: Literal["P0", "P1", "P2", "P3", "P4"] | None = Opt, request_id: str | None = Opt) -> dict[str, Any]:
    """Update a goal's todo."""


PER_VERB = [intent_task_start, intent_task_resume, intent_claim_add, intent_claim_replace, intent_claim_invalidate,
            intent_show, run_status, run_heartbeat, run_intend, run_complete, run_issue_open, run_issue_update,
            run_evidence_add, todo_ready, todo_claim, todo_update, todo_complete]


def listing_text(tools: list[Any]) -> str:
    """tools/list's result as it goes on the wire (the SDK's own serialization)."""
    from mcp.types import ListToolsResult

    return ListToolsResult(tools=tools).model_dump_json(by_alias=True, exclude_none=True)


async def over_stdio() -> tuple[str, str]:
    """loopstate's tools/list and instructions, from a real `loopstate mcp` process."""
    from mcp import ClientSession, StdioServerParameters
    from mcp.client.stdio import stdio_client
    from mcp.types import ListToolsResult

    with tempfile.TemporaryDirectory() as scratch:
        env = dict(os.environ, LOOPSTATE_DATA_DIR=os.path.join(scratch, "data"))
        params = StdioServerParameters(command=sys.executable, args=["-m", "loopstate.cli.main", "mcp", "--root", scratch],
                                       env=env)
        async with stdio_client(params) as (read, write), ClientSession(read, write) as session:
            init = await session.initialize()
            tools = (await session.list_tools()).tools
    return ListToolsResult(tools=tools).model_dump_json(by_alias=True, exclude_none=True), init.instructions or ""


async def designs() -> list[tuple[str, int, str, str]]:
    """(design, tool count, tools/list text, instructions) for each design."""
    from mcp.server.mcpserver import MCPServer
    from mcp.server.mcpserver.tools import Tool

    from loopstate.mcpserver.server import INSTRUCTIONS, _compact_schema
    from loopstate.mcpserver.tools import tool_functions

    async def unused(*_: Any) -> None:
        raise AssertionError("the bench only lists tools")

    async def listed(functions: list[Any], compact: bool) -> str:
        tools = []
        for fn in functions:
            tool = Tool.from_function(fn, name=fn.__name__, description=fn.__doc__, structured_output=False)
            if compact:
                tool.parameters = _compact_schema(tool.parameters)
            tools.append(tool)
        return listing_text(await MCPServer("bench", tools=tools).list_tools())

    ours_wire, instructions = await over_stdio()
    grouped = tool_functions(unused, unused, object())
    rows = [("loopstate mcp (over stdio)", len(grouped), ours_wire, instructions)]
    for label, functions, compact in (
        ("the same 9 tools, SDK default schemas", grouped, False),
        (f"one verb per tool ({len(PER_VERB)} tools), SDK default schemas", PER_VERB, False),
        (f"one verb per tool ({len(PER_VERB)} tools), compacted schemas", PER_VERB, True),
    ):
        rows.append((label, len(functions), await listed(functions, compact), INSTRUCTIONS))
    return rows


def main() -> int:
    rows = asyncio.run(designs())
    count = counters()
    names = list(count)
    print(f"{'design (tools/list + instructions)':58} {'tools':>5} {'bytes':>7} " + " ".join(f"{n:>12}" for n in names)
          + "  per tool")
    for label, tools, listing, instructions in rows:
        text = listing + instructions
        measures = [count[n](text) for n in names]
        print(f"{label:58} {tools:>5} {len(text.encode()):>7} " + " ".join(f"{m:>12}" for m in measures)
              + f"  {count[names[0]](listing) / tools:8.0f}")
    _, verbs, listing, instructions = rows[2]
    fifteen = 15 * count[names[0]](listing) / verbs + count[names[0]](instructions)
    print(f"\na 15-tool one-verb design (15 x its per-tool cost, plus the instructions): {fifteen:.0f} tokens ({names[0]})")
    ours = count[names[0]](rows[0][2] + rows[0][3])
    print(f"loopstate: {ours} tokens ({names[0]}) of tools/list + instructions; target under {TARGET}: "
          + ("met" if ours < TARGET else "MISSED"))
    return 0 if ours < TARGET else 1


if __name__ == "__main__":
    sys.exit(main())
