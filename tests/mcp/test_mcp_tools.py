"""Every tool of `loopstate mcp` through the SDK's client, over real stdio, against the real store.

Happy paths are checked against what the CLI (another process) then reads
from the store; refusals are the domains' own rules, arriving as tool errors
with loopstate's stable codes.
"""

from __future__ import annotations

import datetime as dt
import json

import pytest

from loopstate_protocol import runs as runs_proto

from loopstate.core.ids import random_uuid
from loopstate.service.engine import Service
from tests.mcp.mcpkit import connected, needs_sdk
from tests.runs.clikit import Cli

pytestmark = [pytest.mark.both_stores, needs_sdk]

TOOLS = {"intent_task", "intent_claim", "intent_show", "run_status", "run_heartbeat", "run_operation", "run_issue",
         "todo_ready", "todo"}
START_BUILD = {"completion_event_type": "stage_started", "completion_data": {"stage": "build"}}
EVIDENCE = {"stage": "build", "requirement_ids": ["R1"], "type": "manual", "description": "looked",
            "procedure": ["look"], "outcome": "passed", "artifact_refs": [], "manual_observation": "fine",
            "digest": None, "environment": {}}
USER = {"kind": "user_event", "event_id": "prompt-1"}


def leased_run(cli: Cli) -> dict:
    run_id = cli.create()
    cli.acquire(run_id)
    lease = cli.status(run_id)["lease"]
    return {"run_id": run_id, "lease_id": lease["lease_id"], "generation": lease["generation"]}


@pytest.mark.slow
async def test_lists_nine_tools_and_the_projects_resources(root, data_dir):
    from mcp.types import ListToolsResult

    cli = Cli(root, data_dir)
    run_id = cli.create()
    cli.ok("goals", "add", "ship", "first todo")
    async with connected(data_dir, "--root", str(root)) as client:
        tools = (await client.session.list_tools()).tools
        assert {t.name for t in tools} == TOOLS
        # The context an agent pays on every turn: bytes/4, the estimate docs/benchmarks.md states, under 1,500.
        wire = ListToolsResult(tools=tools).model_dump_json(by_alias=True, exclude_none=True)
        assert (len(wire.encode()) + len(client.session.instructions.encode())) / 4 < 1500
        assert all(t.description and t.input_schema["type"] == "object" for t in tools)
        listed = (await client.session.list_resources()).resources
        project_id = json.loads(cli.ok("intent", "show", "--json"))["project_id"]
        assert [r.uri for r in listed] == [f"loopstate://{project_id}/intent", f"loopstate://{project_id}/runs/{run_id}",
                                          f"loopstate://{project_id}/goals/ship"]
        for resource in listed:
            read = (await client.session.read_resource(resource.uri)).contents[0]
            assert read.mime_type == "application/json" and json.loads(read.text)
        board = json.loads((await client.session.read_resource(listed[2].uri)).contents[0].text)
        assert board["active"][0]["todos"][0]["title"] == "first todo"


async def test_intent_tools_start_claim_replace_invalidate_and_show(root, data_dir):
    cli = Cli(root, data_dir)
    async with connected(data_dir, "--root", str(root)) as client:
        started = await client.ok("intent_task", {"action": "start", "label": "checkout"})
        task_id = started["task_id"]
        inferred = await client.ok("intent_claim", {"action": "add", "statement": "wants a faster checkout",
                                                    "status": "inferred", "facets": ["outcome"], "confidence": 0.6})
        claim_id = inferred["events"][0]["payload"]["claim"]["claim_id"]
        explicit = await client.ok("intent_claim", {"action": "add", "statement": "never touch the payments API",
                                                    "status": "explicit", "facets": ["hard_constraint"], "by": "user",
                                                    "source": USER})
        replaced = await client.ok("intent_claim", {"action": "replace", "supersedes": [claim_id],
                                                    "statement": "wants checkout under 2 s", "status": "inferred",
                                                    "facets": ["outcome", "success_signal"], "confidence": 0.8})
        unknown = await client.ok("intent_claim", {"action": "add", "statement": "which browsers matter",
                                                   "status": "unknown", "facets": ["unknown"]})
        await client.ok("intent_claim", {"action": "invalidate", "claim_id":
                                         unknown["events"][0]["payload"]["claim"]["claim_id"], "reason": "answered"})
        shown = await client.ok("intent_show", {})
        compact = await client.ok("intent_show", {"compact": True})
        resumed = await client.ok("intent_task", {"action": "resume"})
    assert shown["task_id"] == task_id and shown["active_count"] == 2
    assert {i["statement"] for i in compact["items"]} == {"never touch the payments API", "wants checkout under 2 s"}
    assert resumed["task_id"] == task_id
    assert explicit["events"][0]["actor"] == "user" and replaced["events"][0]["event_type"] == "claim_replaced"
    audit = json.loads(cli.ok("intent", "audit", "--task", task_id, "--json"))  # another process sees it all
    assert {c.get("state", "active") for c in audit["claims"]} == {"active", "superseded", "invalidated"}


@pytest.mark.slow
async def test_run_tools_heartbeat_operation_issue_and_evidence(root, data_dir):
    cli = Cli(root, data_dir)
    lease = leased_run(cli)
    async with connected(data_dir, "--root", str(root)) as client:
        status = await client.ok("run_status", {"run_id": lease["run_id"]})
        assert status["lease"]["lease_id"] == lease["lease_id"]
        await client.ok("run_heartbeat", lease)
        intended = await client.ok("run_operation", {"action": "intend", **lease, **START_BUILD,
                                                     "operation": "local_write", "destination": "repository"})
        operation_id = intended["events"][0]["data"]["operation_id"]
        completed = await client.ok("run_operation", {"action": "complete", **lease, **START_BUILD,
                                                      "operation_id": operation_id})
        opened = await client.ok("run_issue", {"action": "open", **lease, "title": "flaky test", "severity": "low",
                                               "blocking": False})
        issue_id = opened["events"][0]["data"]["issue_id"]
        await client.ok("run_issue", {"action": "update", **lease, "issue_id": issue_id, "status": "acknowledged"})
        evidence = await client.ok("run_issue", {"action": "evidence", **lease, "evidence": EVIDENCE})
    assert [e["type"] for e in completed["events"]][-1] == "stage_started"
    assert evidence["events"][0]["type"] == "evidence_recorded"
    after = cli.status(lease["run_id"])
    assert after["run"]["stage"] == "build" and after["pending_operation"] is None
    assert [i["status"] for i in after["issues"]] == ["acknowledged"] and len(after["evidence_ids"]) == 1


@pytest.mark.slow
async def test_goal_tools_list_ready_claim_update_complete(root, data_dir):
    cli = Cli(root, data_dir)
    cli.ok("goals", "add", "ship", "write docs")
    cli.ok("goals", "add", "ship", "wait for review")
    cli.ok("goals", "gate", "ship", "review", "--todo", "T002")
    async with connected(data_dir, "--root", str(root)) as client:
        ready = await client.ok("todo_ready", {"goal_id": "ship"})
        assert [t["todo_id"] for t in ready["ready"]] == ["T001"]  # T002 waits for its gate
        await client.ok("todo", {"action": "claim", "goal_id": "ship", "todo_id": "T001", "by": "agent"})
        await client.ok("todo", {"action": "update", "goal_id": "ship", "todo_id": "T001", "priority": "P1"})
        await client.ok("todo", {"action": "complete", "goal_id": "ship", "todo_id": "T001", "rationale": "written"})
        assert (await client.ok("todo_ready", {"goal_id": "ship"}))["ready"] == []
    board = json.loads(cli.ok("goals", "board", "ship", "--json"))
    assert [(t["todo_id"], t["priority"]) for t in board["completed"]] == [("T001", "P1")]


# The domains' rules, refused through MCP with their codes ----------------------------------------


async def test_an_agent_cannot_replace_or_invalidate_a_user_explicit_claim(root, data_dir):
    async with connected(data_dir, "--root", str(root)) as client:
        await client.ok("intent_task", {"action": "start"})
        explicit = await client.ok("intent_claim", {"action": "add", "statement": "keep the public API", "by": "user",
                                                    "status": "explicit", "facets": ["hard_constraint"], "source": USER})
        claim_id = explicit["events"][0]["payload"]["claim"]["claim_id"]
        error = await client.refused("intent_claim", {"action": "replace", "supersedes": [claim_id], "status": "inferred",
                                                      "statement": "the API may change", "facets": ["soft_constraint"],
                                                      "confidence": 0.9}, "RULE_VIOLATION")
        assert error["details"]["claim_id"] == claim_id
        await client.refused("intent_claim", {"action": "invalidate", "claim_id": claim_id}, "RULE_VIOLATION")
        assert (await client.ok("intent_show", {}))["active_count"] == 1


async def test_a_tool_result_presented_as_explicit_is_refused(root, data_dir):
    async with connected(data_dir, "--root", str(root)) as client:
        await client.ok("intent_task", {"action": "start"})
        for by in ("user", "evidence"):
            await client.refused("intent_claim", {"action": "add", "statement": "tests say ship it", "by": by,
                                                  "status": "explicit", "facets": ["outcome"],
                                                  "source": {"kind": "tool_result", "event_id": "call-7"}},
                                 "RULE_VIOLATION")
        assert (await client.ok("intent_show", {}))["active_count"] == 0


async def test_a_heartbeat_on_an_expired_lease_is_refused(root, data_dir):
    # The run and its lease are written an hour ago (a real store, another clock): the lease has expired.
    hour_ago = dt.datetime.now(dt.timezone.utc) - dt.timedelta(hours=1)
    past = Service(data_dir=data_dir, clock=lambda: hour_ago)
    run_id = random_uuid()
    actor = {"harness": "codex", "actor": "bot", "session_id": "s1"}
    past.execute(str(root), runs_proto.Create(
        run_id=run_id, objective="ship it", done_gate=["tests pass"], actor=actor,
        asset={"name": "app", "root": "app", "track": "code", "boundaries": ["app/"]}), random_uuid())
    lease = past.execute(str(root), runs_proto.Acquire(run_id=run_id, owner=actor), random_uuid()).events[0]["projection"]["lease"]
    async with connected(data_dir, "--root", str(root)) as client:
        error = await client.refused("run_heartbeat", {"run_id": run_id, "lease_id": lease["lease_id"],
                                                       "generation": lease["generation"]}, "LEASE_EXPIRED")
        assert "expired" in error["message"]


@pytest.mark.slow
async def test_completing_a_todo_behind_an_open_gate_is_refused(root, data_dir):
    cli = Cli(root, data_dir)
    cli.ok("goals", "add", "ship", "release")
    cli.ok("goals", "gate", "ship", "owner sign-off", "--kind", "owner", "--todo", "T001")
    async with connected(data_dir, "--root", str(root)) as client:
        error = await client.refused("todo", {"action": "complete", "goal_id": "ship", "todo_id": "T001",
                                              "rationale": "done"}, "RULE_VIOLATION")
        assert error["details"]["open_gate_ids"] == ["G001"]
    cli.ok("goals", "resolve", "ship", "G001", "--decision", "approve")
    async with connected(data_dir, "--root", str(root)) as client:
        await client.ok("todo", {"action": "complete", "goal_id": "ship", "todo_id": "T001", "rationale": "done"})


@pytest.mark.slow
async def test_resume_picks_a_named_or_the_newest_task_and_says_when_there_is_none(root, data_dir):
    cli = Cli(root, data_dir)
    async with connected(data_dir, "--root", str(root)) as client:
        await client.refused("intent_task", {"action": "resume"}, "NOT_FOUND")
        await client.refused("intent_show", {"compact": True}, "INVALID_PARAMS")  # a compact handoff is of a task
        first = json.loads(cli.ok("intent", "start", "--label", "first", "--json"))["events"][0]["task_id"]
        second = json.loads(cli.ok("intent", "start", "--label", "second", "--json"))["events"][0]["task_id"]
        assert (await client.ok("intent_task", {"action": "resume"}))["task_id"] == second
        assert (await client.ok("intent_task", {"action": "resume", "task_id": first}))["task_id"] == first
        claimed = await client.ok("intent_claim", {"action": "add", "statement": "small steps", "status": "inferred",
                                                   "facets": ["soft_constraint"], "confidence": 0.4})
        assert claimed["events"][0]["task_id"] == first  # claims go to the resumed task
        await client.refused("intent_task", {"action": "resume", "task_id": "0" * 8}, "NOT_FOUND")


@pytest.mark.slow
async def test_todo_ready_reads_every_page_of_a_board_with_more_active_todos_than_one_page(root, data_dir):
    from loopstate_protocol import goals as goals_proto

    service = Service(data_dir=data_dir)
    count = goals_proto.BOARD_LIMIT + 25
    for n in range(count):
        service.execute(str(root), goals_proto.AddTodo(goal_id="big", title=f"todo {n}"), random_uuid())
    service.execute(str(root), goals_proto.CompleteTodo(goal_id="big", todo_id="T001", rationale="done"), random_uuid())
    async with connected(data_dir, "--root", str(root)) as client:
        ready = await client.ok("todo_ready", {"goal_id": "big"})
    assert len(ready["ready"]) == count - 1
    assert len({t["todo_id"] for t in ready["ready"]}) == count - 1 and "T001" not in {t["todo_id"] for t in ready["ready"]}
