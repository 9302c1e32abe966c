"""Issue 29: `loopstate mcp` in a moved repository says so in its first answer, with the command.

A real `loopstate mcp` subprocess and the SDK's client: the first tool answer
for a folder with no state that looks like the project at another path carries
a ``notice`` naming `loopstate project adopt OLD_PATH` (in the result, or
beside the error when the call is refused); later answers do not repeat it; a
folder with state, or after the adoption, gets none. The instructions tell the
agent that a notice is for the user (mcpserver/server.py INSTRUCTIONS, which the
handshake test keeps in step with the recorded answers).
"""

from __future__ import annotations

import subprocess
from pathlib import Path

from tests.hooks.hookkit import loopstate
from tests.mcp.mcpkit import connected, needs_sdk

pytestmark = needs_sdk


def moved(tmp_path: Path) -> tuple[Path, Path, Path]:
    data, old, new = tmp_path / "data", tmp_path / "app", tmp_path / "moved" / "app"
    old.mkdir()
    loopstate("init", cwd=old, data_dir=data)
    loopstate("intent", "start", "--claim", "outcome:Keep the public API", cwd=old, data_dir=data)
    new.parent.mkdir()
    subprocess.run(["mv", str(old), str(new)], check=True)
    return data, old, new


async def test_the_first_answer_in_a_moved_folder_names_the_adoption(tmp_path):
    data, old, new = moved(tmp_path)
    async with connected(data, "--root", str(new)) as client:
        shown = await client.ok("intent_show", {})  # an empty project, and what to do about it
        assert f"loopstate project adopt {old}" in shown["notice"], shown
        again = await client.ok("intent_show", {})
        assert "notice" not in again
    async with connected(data, "--root", str(new)) as client:
        # A refused first call carries the notice beside its error.
        result = await client.call("run_status", {"run_id": "00000000-0000-4000-8000-000000000000"})
        assert result.is_error, result
        assert result.content[0].text.startswith("NOT_FOUND: ")
        assert f"loopstate project adopt {old}" in result.content[0].text
        assert f"loopstate project adopt {old}" in result.structured_content["notice"]
        assert result.structured_content["error"]["code"] == "NOT_FOUND"
    loopstate("project", "adopt", str(old), cwd=new, data_dir=data)
    async with connected(data, "--root", str(new)) as client:
        shown = await client.ok("intent_show", {})
        assert "notice" not in shown and "Keep the public API" in str(shown)


async def test_a_successful_first_answer_carries_the_notice(tmp_path):
    """An agent that starts a fresh task here (which gives the folder state of its own) is told first."""
    data, old, new = moved(tmp_path)
    async with connected(data, "--root", str(new)) as client:
        started = await client.ok("intent_task", {"action": "start", "label": "fresh"})
        assert f"loopstate project adopt {old}" in started["notice"], started
        assert started["task_id"]
        shown = await client.ok("intent_show", {})
        assert "notice" not in shown


async def test_a_folder_with_state_gets_no_notice(tmp_path):
    data, root = tmp_path / "data", tmp_path / "own"
    root.mkdir()
    loopstate("intent", "start", "--claim", "outcome:Own state", cwd=root, data_dir=data)
    async with connected(data, "--root", str(root)) as client:
        shown = await client.ok("intent_show", {})
        assert "notice" not in shown and "Own state" in str(shown)
