"""`loopstate mcp` answers whatever it is sent, including the requests in flight when its input ends.

These speak raw JSON lines to the real server (the SDK's client would not
send most of this), then close stdin, which is how an MCP client shuts a
stdio server down.
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

from tests.conftest import REPO
from tests.mcp.mcpkit import connected, mcp_env, needs_sdk
from tests.runs.clikit import Cli

pytestmark = needs_sdk

INITIALIZE = [
    {"jsonrpc": "2.0", "id": "init", "method": "initialize",
     "params": {"protocolVersion": "2025-06-18", "capabilities": {}, "clientInfo": {"name": "raw", "version": "0"}}},
    {"jsonrpc": "2.0", "method": "notifications/initialized"},
]


def call(request_id: int, name: str, arguments) -> dict:
    return {"jsonrpc": "2.0", "id": request_id, "method": "tools/call", "params": {"name": name, "arguments": arguments}}


def exchange(root: Path, data_dir: Path, lines: list) -> dict:
    """Send ``lines`` (dicts, or raw text), close stdin, and return the responses by id once the server exits."""
    text = "".join((line if isinstance(line, str) else json.dumps(line)) + "\n" for line in [*INITIALIZE, *lines])
    done = subprocess.run([sys.executable, "-m", "loopstate.cli.main", "mcp", "--root", str(root)], input=text,
                          capture_output=True, text=True, env=mcp_env(data_dir), cwd=REPO, timeout=120)
    assert done.returncode == 0, done.stderr
    responses = [json.loads(line) for line in done.stdout.splitlines()]
    assert all(r.get("jsonrpc") == "2.0" for r in responses)  # nothing but protocol on stdout
    by_id = {r["id"]: r for r in responses if r["id"] is not None}
    assert len(by_id) == len([r for r in responses if r["id"] is not None]), "a request was answered twice"
    by_id[None] = [r for r in responses if r["id"] is None]  # parse errors: JSON-RPC answers them with id null
    return by_id


def tool_error(response: dict) -> str:
    assert response["result"]["isError"] is True
    return response["result"]["content"][0]["text"]


def test_malformed_arguments_and_unknown_tools_are_answered_as_errors(root, data_dir):
    got = exchange(root, data_dir, [
        call(1, "run_heartbeat", {"run_id": "r", "lease_id": "l", "generation": "three"}),
        call(2, "run_heartbeat", {"run_id": "r", "lease_id": "l", "generation": 1, "lease": "extra"}),
        call(3, "intent_claim", {"action": "rewrite"}),
        call(4, "todo", {"action": "claim", "goal_id": "ship"}),
        call(5, "no_such_tool", {}),
        call(6, "run_issue", "not an object"),
        call(7, "todo", {"action": "claim", "goal_id": "ship", "todo_id": "T001"}),  # no claimant: the protocol's rule
    ])
    assert tool_error(got[1]).startswith("INVALID_PARAMS: run_heartbeat: generation: ")
    assert tool_error(got[2]).startswith("INVALID_PARAMS: run_heartbeat: unknown argument(s) lease;")
    assert tool_error(got[3]).startswith("INVALID_PARAMS: intent_claim: action: ")
    assert "todo_id" in tool_error(got[4]) and tool_error(got[4]).startswith("INVALID_PARAMS")
    assert "no_such_tool" in tool_error(got[5])
    assert got[6]["error"]["code"] == -32602
    assert tool_error(got[7]).startswith("INVALID_PARAMS: ") and "claimed_by" in tool_error(got[7])
    assert not (data_dir / "projects").exists() or not any((data_dir / "projects").rglob("*.jsonl"))


def test_lines_that_are_not_json_rpc_get_a_parse_error_and_the_server_goes_on(root, data_dir):
    got = exchange(root, data_dir, ["{not json", "[1, 2", {"jsonrpc": "2.0", "id": 9, "method": "tools/list"},
                                    {"jsonrpc": "2.0", "id": 10, "method": "no/such/method"}])
    assert [r["error"]["code"] for r in got[None]] == [-32700, -32700]
    assert len(got[9]["result"]["tools"]) == 9
    assert got[10]["error"]["code"] == -32601


def test_calls_in_flight_when_input_ends_are_answered_and_durable(root, data_dir):
    # Several writes, then end of input straight away: every one is answered before the server exits.
    lines = [call(1, "intent_task", {"action": "start", "label": "one"})]
    lines += [call(i, "todo_ready", {"goal_id": "ship"}) for i in range(2, 6)]
    got = exchange(root, data_dir, lines)
    assert set(got) >= {1, 2, 3, 4, 5}
    task_id = json.loads(got[1]["result"]["content"][0]["text"])["task_id"]
    assert [t["task_id"] for t in json.loads(Cli(root, data_dir).ok("intent", "tasks", "--json"))["tasks"]] == [task_id]


async def test_an_error_leaves_the_connection_usable(root, data_dir):
    async with connected(data_dir, "--root", str(root)) as client:
        await client.refused("run_status", {"run_id": "not-a-uuid"}, "INVALID_PARAMS")
        await client.refused("intent_claim", {"action": "add", "statement": "x", "status": "inferred",
                                              "facets": ["outcome"], "confidence": 0.5}, "INVALID_PARAMS")  # no task yet
        assert (await client.ok("intent_task", {"action": "start"}))["task_id"]
