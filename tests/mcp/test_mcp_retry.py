"""Retry-safe tool calls: a mutating tool's ``request_id`` is the request id of the command it applies.

A host that lost a call's answer (a timeout, a dropped connection, a restarted
server) calls again with the same arguments; with the same ``request_id`` the
store applies it once and answers with the first result, marked replayed.
Through the SDK's client against a real `loopstate mcp` over stdio; the
ledger is then read by the CLI in another process.
"""

from __future__ import annotations

import json

from tests.mcp.mcpkit import connected, needs_sdk
from tests.runs.clikit import Cli

pytestmark = needs_sdk

CLAIM = {"action": "add", "statement": "keep the public API", "status": "inferred", "facets": ["hard_constraint"],
         "confidence": 0.7}


def claims(cli: Cli, task_id: str) -> list[str]:
    audit = json.loads(cli.ok("intent", "audit", "--task", task_id, "--json"))
    return [c["statement"] for c in audit["claims"]]


async def test_a_retried_claim_with_the_same_request_id_is_applied_once(root, data_dir):
    cli = Cli(root, data_dir)
    async with connected(data_dir, "--root", str(root)) as client:
        task_id = (await client.ok("intent_task", {"action": "start", "label": "api", "request_id": "start-1"}))["task_id"]
        first = await client.ok("intent_claim", {**CLAIM, "request_id": "claim-1"})
        again = await client.ok("intent_claim", {**CLAIM, "request_id": "claim-1"})
    # A new connection (a restarted server) still knows the id: it lives in the store, not the session.
    async with connected(data_dir, "--root", str(root)) as client:
        restarted = await client.ok("intent_task", {"action": "start", "label": "api", "request_id": "start-1"})
        third = await client.ok("intent_claim", {**CLAIM, "task_id": task_id, "request_id": "claim-1"})
    assert first["replayed"] is False and again["replayed"] is True and third["replayed"] is True
    assert again["events"] == first["events"] == third["events"]
    assert restarted["replayed"] is True and restarted["task_id"] == task_id
    assert claims(cli, task_id) == ["keep the public API"]


async def test_calls_without_a_request_id_each_apply(root, data_dir):
    cli = Cli(root, data_dir)
    async with connected(data_dir, "--root", str(root)) as client:
        task_id = (await client.ok("intent_task", {"action": "start", "label": "api"}))["task_id"]
        await client.ok("intent_claim", CLAIM)
        second = await client.ok("intent_claim", CLAIM)
    assert second["replayed"] is False
    assert claims(cli, task_id) == ["keep the public API"] * 2


async def test_a_request_id_reused_for_other_arguments_is_refused_and_nothing_is_written(root, data_dir):
    cli = Cli(root, data_dir)
    async with connected(data_dir, "--root", str(root)) as client:
        task_id = (await client.ok("intent_task", {"action": "start", "label": "api"}))["task_id"]
        await client.ok("intent_claim", {**CLAIM, "request_id": "claim-1"})
        await client.refused("intent_claim", {**CLAIM, "statement": "break the API", "request_id": "claim-1"},
                             "REQUEST_ID_REUSED")
        # The same action on other fields is another request too.
        await client.refused("intent_claim", {**CLAIM, "confidence": 0.9, "request_id": "claim-1"}, "REQUEST_ID_REUSED")
    assert claims(cli, task_id) == ["keep the public API"]


async def test_a_malformed_request_id_is_invalid_params_naming_it(root, data_dir):
    async with connected(data_dir, "--root", str(root)) as client:
        await client.ok("intent_task", {"action": "start", "label": "api"})
        for bad in ("x" * 201, "tab\there"):
            error = await client.refused("intent_claim", {**CLAIM, "request_id": bad}, "INVALID_PARAMS")
            assert "request_id" in error["message"]
        await client.refused("intent_claim", {**CLAIM, "request_id": 7}, "INVALID_PARAMS")
