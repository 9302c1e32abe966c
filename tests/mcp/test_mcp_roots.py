"""Which project a call means: Codex's sandbox cwd, the client's one root, --root, the server's cwd.

Each server here starts in a directory that is none of the projects, so a
call that landed in the wrong store would show as a project id that does
not match, or as files in the data dir that should not be there.
"""

from __future__ import annotations

import json
import tempfile
from pathlib import Path

import pytest

from loopstate.core.paths import project_id_for
from tests.mcp.mcpkit import connected, needs_sdk
from tests.runs.clikit import Cli

pytestmark = needs_sdk

SANDBOX = "codex/sandbox-state-meta"


def sandbox(path: Path | str, *, as_uri: bool = True) -> dict:
    return {SANDBOX: {"sandboxCwd": Path(path).as_uri() if as_uri else str(path), "sandboxPolicy": {"type": "workspace-write"}}}


@pytest.fixture
def elsewhere(tmp_path: Path) -> Path:
    """A directory that is none of the projects: the server's cwd."""
    return Path(tempfile.mkdtemp(dir=tmp_path, prefix="elsewhere-"))


@pytest.fixture
def other(tmp_path: Path) -> Path:
    """A second project beside ``root``."""
    return Path(tempfile.mkdtemp(dir=tmp_path, prefix="other-"))


def projects(data_dir: Path) -> set[str]:
    folder = data_dir / "projects"
    return {p.name for p in folder.iterdir()} if folder.is_dir() else set()


async def test_the_codex_sandbox_cwd_names_the_project_of_each_call(root, other, elsewhere, data_dir):
    Cli(root, data_dir).ok("intent", "start")  # root is a project: a cwd below it means it
    (root / "src").mkdir()
    async with connected(data_dir, cwd=elsewhere) as client:
        init = client.session.initialize_result
        assert SANDBOX in init.capabilities.experimental  # advertised, so Codex sends its sandbox state
        shown = await client.ok("intent_show", {}, meta=sandbox(root / "src"))
        assert shown["project_id"] == project_id_for(str(root.resolve()))
        started = await client.ok("intent_task", {"action": "start"}, meta=sandbox(other, as_uri=False))
        assert started["events"][0]["project_id"] == project_id_for(str(other.resolve()))
    assert project_id_for(str(elsewhere.resolve())) not in projects(data_dir)


async def test_a_root_conflicting_with_the_hosts_is_refused_before_the_store_is_touched(root, other, data_dir):
    Cli(root, data_dir).ok("intent", "start")
    before = sorted(p.relative_to(data_dir) for p in data_dir.rglob("*"))
    async with connected(data_dir, "--root", str(root)) as client:
        error = await client.refused("intent_task", {"action": "start"}, "INVALID_ROOT", meta=sandbox(other))
        assert error["details"]["host_root"] == str(other.resolve())
        await client.refused("todo", {"action": "claim", "goal_id": "g", "todo_id": "T001", "by": "me"},
                             "INVALID_ROOT", meta=sandbox(other))
        # The same host cwd as --root (or below it) is no conflict.
        await client.ok("intent_show", {}, meta=sandbox(root))
    assert sorted(p.relative_to(data_dir) for p in data_dir.rglob("*")) == before


async def test_malformed_sandbox_metadata_is_refused(root, data_dir, tmp_path):
    async with connected(data_dir, "--root", str(root)) as client:
        for bad in ({SANDBOX: {"sandboxCwd": 42}}, {SANDBOX: "here"}, {SANDBOX: {"sandboxCwd": "relative/dir"}},
                    {SANDBOX: {"sandboxCwd": str(tmp_path / "missing")}}, {SANDBOX: {"sandboxCwd": "file://host/x"}}):
            await client.refused("intent_show", {}, "INVALID_ROOT", meta=bad)
    assert projects(data_dir) == set()


@pytest.mark.slow
async def test_the_clients_single_file_root_is_the_project(root, other, elsewhere, data_dir):
    async with connected(data_dir, cwd=elsewhere, roots=[root.as_uri()]) as client:
        started = await client.ok("intent_task", {"action": "start"})
        assert started["events"][0]["project_id"] == project_id_for(str(root.resolve()))
        listed = (await client.session.list_resources()).resources
        assert listed[0].uri == f"loopstate://{project_id_for(str(root.resolve()))}/intent"
    async with connected(data_dir, "--root", str(other), roots=[root.as_uri()]) as client:
        await client.refused("intent_show", {}, "INVALID_ROOT")
    # Several roots name no single project: --root decides.
    async with connected(data_dir, "--root", str(other), roots=[root.as_uri(), elsewhere.as_uri()]) as client:
        assert (await client.ok("intent_show", {}))["project_id"] == project_id_for(str(other.resolve()))


async def test_without_a_host_root_the_servers_cwd_is_discovered_upward(root, data_dir):
    Cli(root, data_dir).ok("intent", "start")
    (root / "deep" / "er").mkdir(parents=True)
    async with connected(data_dir, cwd=root / "deep" / "er") as client:
        shown = await client.ok("intent_show", {})
    assert shown["project_id"] == project_id_for(str(root.resolve()))
    assert json.loads(Cli(root, data_dir).ok("intent", "show", "--json"))["project_id"] == shown["project_id"]


@pytest.mark.slow
def test_a_2026_client_whose_roots_cannot_be_asked_gets_the_project_of_the_servers_cwd(root, data_dir):
    """Claude Code 2.1 speaks 2026-07-28: every request carries its envelope, and the server cannot send it
    roots/list (no back-channel). Its advertised roots are then no source: the cwd's project is (the host starts
    the server in the project), as for a client without roots."""
    import os
    import subprocess
    import sys

    from tests.mcp.mcpkit import mcp_env

    (root / ".git").mkdir()
    meta = {"_meta": {"io.modelcontextprotocol/protocolVersion": "2026-07-28",
                      "io.modelcontextprotocol/clientInfo": {"name": "claude-code", "version": "2.1.332"},
                      "io.modelcontextprotocol/clientCapabilities": {"roots": {"listChanged": True}}}}
    messages = [{"jsonrpc": "2.0", "id": 0, "method": "server/discover", "params": meta},
                {"jsonrpc": "2.0", "id": 1, "method": "tools/call",
                 "params": {**meta, "name": "intent_task", "arguments": {"action": "start", "label": "modern"}}},
                {"jsonrpc": "2.0", "id": 2, "method": "resources/list", "params": meta}]
    done = subprocess.run([sys.executable, "-m", "loopstate.cli.main", "mcp"],
                          input="".join(json.dumps(m) + "\n" for m in messages).encode(), capture_output=True,
                          env={**mcp_env(data_dir), "PYTHONPATH": os.pathsep.join(sys.path)}, cwd=root, timeout=120)
    answers = {a["id"]: a for a in map(json.loads, done.stdout.splitlines())}
    assert answers[1]["result"].get("isError") is not True, answers[1]
    assert answers[1]["result"]["structuredContent"]["task_id"]
    project = project_id_for(str(root))
    assert [r["uri"] for r in answers[2]["result"]["resources"]] == [f"loopstate://{project}/intent"]
