"""A real `loopstate mcp` subprocess driven by the MCP SDK's own client over stdio."""

from __future__ import annotations

import asyncio
import contextlib
import importlib.util
import json
import sys
import time
import warnings
from pathlib import Path
from typing import Any, AsyncIterator

from tests.conftest import REPO, env_for_child, prerequisite

HAVE_SDK = importlib.util.find_spec("mcp") is not None
needs_sdk = prerequisite(HAVE_SDK, "the MCP Python SDK (pip install 'loopstate[mcp]')")

CALL_TIMEOUT = 30.0


class Client:
    """One connected ClientSession, with what the server pushed to it."""

    def __init__(self, session: Any) -> None:
        self.session = session
        self.updates: list[tuple[float, str]] = []  # (arrival time.time(), uri)
        self.updated = asyncio.Event()

    async def on_message(self, message: Any) -> None:
        from mcp import types

        if isinstance(message, types.ResourceUpdatedNotification):
            self.updates.append((time.time(), str(message.params.uri)))
            self.updated.set()

    async def call(self, tool: str, arguments: dict[str, Any], meta: dict[str, Any] | None = None) -> Any:
        return await asyncio.wait_for(self.session.call_tool(tool, arguments, meta=meta), CALL_TIMEOUT)

    async def ok(self, tool: str, arguments: dict[str, Any], meta: dict[str, Any] | None = None) -> dict[str, Any]:
        result = await self.call(tool, arguments, meta)
        assert not result.is_error, f"{tool}: {result.content[0].text}"
        assert result.structured_content == json.loads(result.content[0].text)
        return result.structured_content

    async def refused(self, tool: str, arguments: dict[str, Any], code: str,
                      meta: dict[str, Any] | None = None) -> dict[str, Any]:
        """The loopstate error of a tool call that must fail with ``code``."""
        result = await self.call(tool, arguments, meta)
        assert result.is_error, f"{tool} was not refused: {result.content[0].text[:300]}"
        assert result.content[0].text.startswith(f"{code}: "), result.content[0].text
        error = result.structured_content["error"]
        assert error["code"] == code
        return error

    async def subscribe(self, uri: str) -> None:
        """resources/subscribe, as the hosts of today send it (the SDK calls it deprecated from 2026-07-28 on)."""
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            await asyncio.wait_for(self.session.subscribe_resource(uri), CALL_TIMEOUT)

    async def unsubscribe(self, uri: str) -> None:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            await asyncio.wait_for(self.session.unsubscribe_resource(uri), CALL_TIMEOUT)

    async def wait_update(self, uri: str, timeout: float = 10.0) -> float:
        """The arrival time of the first update of ``uri`` (fails after a generous ``timeout``)."""
        deadline = time.monotonic() + timeout
        while True:
            for arrived, got in self.updates:
                if got == uri:
                    return arrived
            self.updated.clear()
            remaining = deadline - time.monotonic()
            assert remaining > 0, f"no resources/updated for {uri} within {timeout} s (got {self.updates})"
            with contextlib.suppress(asyncio.TimeoutError):
                await asyncio.wait_for(self.updated.wait(), remaining)


def server_params(data_dir: Path, *args: str, cwd: Path | None = None) -> Any:
    from mcp import StdioServerParameters

    return StdioServerParameters(command=sys.executable, args=["-m", "loopstate.cli.main", "mcp", *args],
                                 env=mcp_env(data_dir), cwd=str(cwd or REPO))


def mcp_env(data_dir: Path) -> dict[str, str]:
    """The child's environment: its data dir, and a cache dir of the test's own (mcpserver/early's Recorder
    keeps the SDK's handshake answers there when the checked-in table does not fit)."""
    return {**env_for_child(data_dir), "XDG_CACHE_HOME": str(data_dir.parent / "cache")}


@contextlib.asynccontextmanager
async def connected(data_dir: Path, *args: str, cwd: Path | None = None,
                    roots: list[str] | None = None) -> AsyncIterator[Client]:
    """A `loopstate mcp ARGS` subprocess and an initialized client; ``roots`` are offered as MCP roots."""
    from mcp import ClientSession, types
    from mcp.client.stdio import stdio_client

    list_roots = None
    if roots is not None:
        async def list_roots(context: Any) -> Any:
            return types.ListRootsResult(roots=[types.Root(uri=uri) for uri in roots])

    holder: dict[str, Client] = {}

    async def on_message(message: Any) -> None:
        if "client" in holder:
            await holder["client"].on_message(message)

    with open(data_dir.parent / "mcp-server.log", "a") as errlog:
        async with stdio_client(server_params(data_dir, *args, cwd=cwd), errlog=errlog) as (read, write):
            async with ClientSession(read, write, list_roots_callback=list_roots, message_handler=on_message) as session:
                await asyncio.wait_for(session.initialize(), CALL_TIMEOUT)
                client = holder["client"] = Client(session)
                yield client
