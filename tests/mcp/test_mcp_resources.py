"""Subscribed resources follow the store: a CLI change in another process arrives as resources/updated.

The latency printed is from the CLI's write of its append (the stream file's
mtime; its fsync follows) to the notification's arrival at the client; the
tests only assert delivery, within a generous timeout (no timed assertion).
"""

from __future__ import annotations

import json

import pytest

from loopstate.core.project import Project

from tests.mcp.mcpkit import connected, needs_sdk
from tests.runs.clikit import Cli

pytestmark = [pytest.mark.both_stores, needs_sdk]


@pytest.mark.slow
async def test_a_cli_change_in_another_process_reaches_a_subscriber(root, data_dir):
    cli = Cli(root, data_dir)
    cli.ok("intent", "start", "--label", "before")  # the project exists, so its URI is known
    project_id = json.loads(cli.ok("intent", "show", "--json"))["project_id"]
    uri = f"loopstate://{project_id}/intent"
    async with connected(data_dir, "--root", str(root)) as client:
        await client.subscribe(uri)
        assert client.updates == []  # subscribing is not a change
        cli.ok("intent", "start", "--label", "after")
        arrived = await client.wait_update(uri)
        stream_file = Project(str(root), data_dir=data_dir).dir / "streams" / "intent.jsonl"
        if stream_file.exists():  # on PostgreSQL no file dates the append
            print(f"\nresources/updated {(arrived - stream_file.stat().st_mtime) * 1000:.1f} ms after the CLI's "
                  "append was written")
        labels = [t.get("label") for t in json.loads((await client.session.read_resource(uri)).contents[0].text)["tasks"]]
        assert "after" in labels


@pytest.mark.slow
async def test_runs_and_goals_resources_update_and_unsubscribe_stops_them(root, data_dir):
    cli = Cli(root, data_dir)
    run_id = cli.create()
    cli.ok("goals", "add", "ship", "first")
    async with connected(data_dir, "--root", str(root)) as client:
        listed = {r.uri for r in (await client.session.list_resources()).resources}
        run_uri = next(u for u in listed if u.endswith(f"/runs/{run_id}"))
        goal_uri = next(u for u in listed if u.endswith("/goals/ship"))
        await client.subscribe(run_uri)
        await client.subscribe(goal_uri)
        cli.acquire(run_id)
        await client.wait_update(run_uri)
        cli.ok("goals", "add", "ship", "second")
        await client.wait_update(goal_uri)
        await client.unsubscribe(goal_uri)
        intent_uri = next(u for u in listed if u.endswith("/intent"))
        await client.subscribe(intent_uri)
        client.updates.clear()
        cli.ok("goals", "add", "ship", "third")
        cli.ok("intent", "start")
        # Changes are caught up in the order the watcher saw them: a goal update would come before this one.
        await client.wait_update(intent_uri)
        assert goal_uri not in [u for _, u in client.updates]


async def test_the_servers_own_tool_calls_update_subscribers(root, data_dir):
    async with connected(data_dir, "--root", str(root)) as client:
        started = await client.ok("intent_task", {"action": "start"})
        uri = f"loopstate://{started['events'][0]['project_id']}/intent"
        await client.subscribe(uri)
        await client.ok("intent_claim", {"action": "add", "statement": "keep it small", "status": "inferred",
                                         "facets": ["soft_constraint"], "confidence": 0.5})
        await client.wait_update(uri)


async def test_resources_of_another_project_or_unknown_uris_are_refused(root, data_dir):
    from mcp.shared.exceptions import MCPError

    async with connected(data_dir, "--root", str(root)) as client:
        for uri in ("loopstate://" + "0" * 64 + "/intent", "loopstate://nope", "file:///etc/passwd"):
            try:
                await client.session.read_resource(uri)
            except MCPError as exc:
                assert exc.error.data["code"] == "NOT_FOUND"
            else:
                raise AssertionError(f"{uri} was read")
        await client.ok("intent_show", {})  # still serving


async def test_a_client_of_the_2026_protocol_gets_the_same_updates_through_subscriptions_listen(root, data_dir):
    import asyncio

    from mcp import Client

    from tests.mcp.mcpkit import server_params

    cli = Cli(root, data_dir)
    cli.ok("intent", "start")
    uri = f"loopstate://{json.loads(cli.ok('intent', 'show', '--json'))['project_id']}/intent"
    async with Client(server_params(data_dir, "--root", str(root))) as client:
        assert client.protocol_version == "2026-07-28"
        async with client.listen(resource_subscriptions=[uri]) as stream:
            await asyncio.get_running_loop().run_in_executor(None, cli.ok, "intent", "start")
            event = await asyncio.wait_for(anext(aiter(stream)), 10)
        assert event.uri == uri
        assert not (await client.call_tool("intent_show", {})).is_error
