"""The MCP tools say what each action needs, from the one table that builds their protocol messages.

`intent_claim` once listed `status` as optional while `add` without it failed
on the protocol's missing `epistemic_status`. Now mcpserver/tools.ACTIONS maps
each tool argument to its place in the protocol message, the needs are read
from the protocol Structs themselves, and both the published description and
the refusal come from that table. Checked here against the protocol, and over
a real `loopstate mcp` on stdio.
"""

from __future__ import annotations

import json

import msgspec

from loopstate.mcpserver.tools import ACTIONS
from tests.mcp.mcpkit import connected, needs_sdk
from tests.runs.clikit import Cli

pytestmark = needs_sdk


def _protocol_required(message: type, prefix: str = "") -> set[str]:
    out = set()
    for field in msgspec.structs.fields(message):
        if field.required:
            if isinstance(field.type, type) and issubclass(field.type, msgspec.Struct):
                out |= _protocol_required(field.type, f"{prefix}{field.name}.")
            else:
                out.add(prefix + field.name)
    return out


def test_every_required_protocol_field_is_a_needed_argument_or_filled_by_the_tool() -> None:
    filled_by_tool = {"task_id", "actor", "claim.role"}  # the session's task, `by`, and the claim's role = `by`
    for tool, actions in ACTIONS.items():
        for name, action in actions.items():
            needed_paths = {action.arguments[arg] for arg in action.needs}
            assert _protocol_required(action.message) - filled_by_tool == needed_paths, (tool, name)


async def test_the_listing_says_the_needs_and_a_call_without_them_is_refused_naming_them(root, data_dir) -> None:
    async with connected(data_dir, "--root", str(root)) as client:
        listed = {t.name: t for t in (await client.session.list_tools()).tools}
        assert "add statement, status, facets" in listed["intent_claim"].description
        assert "replace as add + supersedes" in listed["intent_claim"].description
        assert "claim by" in listed["todo"].description
        await client.ok("intent_task", {"action": "start"})
        error = await client.refused("intent_claim", {"action": "add", "statement": "small diffs", "facets": ["outcome"]},
                                     "INVALID_PARAMS")
        assert "needs status" in error["message"] and error["details"]["missing"] == ["status"]
        error = await client.refused("intent_claim", {"action": "invalidate", "statement": "stray"}, "INVALID_PARAMS")
        assert "needs claim_id" in error["message"]
        error = await client.refused("intent_claim", {"action": "invalidate", "claim_id": "x", "statement": "stray"},
                                     "INVALID_PARAMS")
        assert "does not take statement" in error["message"]
        error = await client.refused("todo", {"action": "claim", "goal_id": "g", "todo_id": "T001"}, "INVALID_PARAMS")
        assert "needs by (the protocol's claimed_by)" in error["message"]
        # Exactly what the description names is enough.
        added = await client.ok("intent_claim", {"action": "add", "statement": "small diffs", "status": "unknown",
                                                 "facets": ["unknown"]})
        assert added["events"][0]["event_type"] == "claim_added"
        shown = await client.ok("intent_show", {})
        assert shown["active_count"] == 1
    assert json.loads(Cli(root, data_dir).ok("verify", "--json"))["ok"] is True
