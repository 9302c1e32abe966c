"""One live-follow engine per process: a change by another process costs each server one catch-up.

A `loopstate serve` with a snapshot subscription and a `loopstate mcp` with a
resource subscription follow the same intent stream; a CLI process appends to
it N times. Each server logs every catch-up its live engine runs (at debug
level, "live: catching up"): after the subscriptions are made, each server
catches the stream up exactly once per append, and both subscribers hear of
every one (the sidecar's snapshot is computed from the state that catch-up
folded, not from a second one).
"""

from __future__ import annotations

import asyncio
import json
import os
import time
from pathlib import Path

from loopstate_protocol.client import LoopstateClient

from tests.mcp.mcpkit import connected, needs_sdk
from tests.rpc.rpckit import SERVE
from tests.runs.clikit import Cli

pytestmark = needs_sdk

APPENDS = 5
MARK = "live: catching up intent "


def catch_ups(log: Path) -> int:
    return log.read_text(errors="replace").count(MARK) if log.exists() else 0


async def settle(log: Path, expected: int, timeout: float = 20.0) -> int:
    """The log's catch-up count once it reaches ``expected`` (or the timeout passes), then a moment more
    to show no extra catch-up follows."""
    deadline = time.monotonic() + timeout
    while catch_ups(log) < expected and time.monotonic() < deadline:
        await asyncio.sleep(0.05)
    await asyncio.sleep(0.5)
    return catch_ups(log)


async def test_each_change_is_one_catch_up_per_server_and_reaches_both_subscribers(root: Path, data_dir: Path) -> None:
    cli = Cli(root, data_dir)
    cli.ok("intent", "start", "--label", "before")
    project_id = json.loads(cli.ok("intent", "show", "--json"))["project_id"]
    uri = f"loopstate://{project_id}/intent"
    serve_log = data_dir.parent / "serve-debug.log"
    mcp_log = data_dir.parent / "mcp-server.log"
    env = dict(os.environ, LOOPSTATE_DATA_DIR=str(data_dir))
    with open(serve_log, "wb") as err:
        sidecar = LoopstateClient([*SERVE, "--log-level", "debug"], env=env, stderr=err).start()
    try:
        sidecar.initialize()
        sub = sidecar.subscribe(str(root), "intent/snapshot")
        async with connected(data_dir, "--root", str(root), "--log-level", "debug") as client:
            await client.subscribe(uri)
            # The first follow catches up once (what landed before the watch); count from there.
            base_serve, base_mcp = await settle(serve_log, 1), await settle(mcp_log, 1)
            assert base_serve >= 1 and base_mcp >= 1
            sequence = sub.head.sequence
            for i in range(APPENDS):
                updates = len(client.updates)
                cli.ok("intent", "start", "--label", f"change-{i}")
                sequence += 1
                while True:  # the sidecar's subscriber hears of it
                    note = sidecar.next_change(30)
                    if note.subscription_id == sub.subscription_id and note.head.sequence >= sequence:
                        break
                deadline = time.monotonic() + 20
                while len(client.updates) <= updates:  # and the MCP subscriber
                    assert time.monotonic() < deadline, "no resources/updated for the change"
                    await asyncio.sleep(0.02)
            serve_count = await settle(serve_log, base_serve + APPENDS) - base_serve
            mcp_count = await settle(mcp_log, base_mcp + APPENDS) - base_mcp
        print(f"\n{APPENDS} appends by another process: sidecar {serve_count} catch-ups, MCP server {mcp_count}")
        assert serve_count == APPENDS, serve_log.read_text()[-3000:]
        assert mcp_count == APPENDS, mcp_log.read_text()[-3000:]
    finally:
        sidecar.close()
