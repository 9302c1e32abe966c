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
