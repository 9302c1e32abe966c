"""What `loopstate setup` and `doctor` leave a real Claude Code with: the project scope a team shares, where the
host reads its files (CLAUDE_CONFIG_DIR), and uninstall.

Each check runs the real host after a real setup; doctor's verdict is compared with what the session did.
"""

from __future__ import annotations

import json

import pytest

from claude_kit import ClaudeHome
from modelserver import Text, ToolCall

from tests.hosts.conftest import needs_claude

pytestmark = needs_claude


def touch(name: str) -> list[list]:
    return [[ToolCall("Bash", {"command": f"touch {name}", "description": "touch a file"})], [Text("done")]]


def project_files(h: ClaudeHome) -> dict[str, bytes]:
    return {str(p.relative_to(h.project)): p.read_bytes() for p in sorted(h.project.rglob("*")) if p.is_file()}


@pytest.mark.slow
def test_project_scope_is_shareable_runs_in_the_host_and_uninstalls_byte_identical(tmp_path) -> None:
    h = ClaudeHome(tmp_path)
    (h.project / ".claude").mkdir()
    (h.project / ".claude" / "settings.json").write_text('{\n    "permissions": {"allow": ["Bash(make test)"]}\n}')
    before = project_files(h)
    out = h.loopstate("setup", "apply", "--host", "claude", "--scope", "project").stdout
    shared = {".claude/settings.json", ".claude/commands/intent.md", ".mcp.json"}
    assert "commit these with the project" in out and all(f"{h.project}/{name}" in out for name in shared)
    for name in shared:  # nothing of this machine in what the team commits
        text = (h.project / name).read_text()
        assert str(h.base) not in text and "/bin/loopstate" not in text, (name, text)

    (h.project / ".loopstate").mkdir()
    (h.project / ".loopstate" / "STOP").write_text("stop\n")
    denied = h.session("make the file", touch("denied.txt"))  # `loopstate` from the PATH the host runs hooks with
    assert not (h.project / "denied.txt").exists()
    assert "the kill switch .loopstate/STOP stands" in json.dumps(denied.tool_results(1))
    (h.project / ".loopstate" / "STOP").unlink()
    (h.project / ".loopstate").rmdir()
    assert h.json_doctor()["ok"] is True

    h.loopstate("setup", "uninstall", "--host", "claude", "--scope", "project")
    assert project_files(h) == before
    after = h.session("make the file", touch("ran.txt"))  # the control: nothing of loopstate runs any more
    assert after.hooks("SessionStart") == [] and (h.project / "ran.txt").exists()


@pytest.mark.slow
def test_doctor_says_what_the_host_does_under_claude_config_dir(tmp_path) -> None:
    h = ClaudeHome(tmp_path)
    h.loopstate("setup", "apply", "--host", "claude", CLAUDE_CONFIG_DIR="")  # set up for ~/.claude
    assert (h.home / ".claude" / "settings.json").exists()
    missed = h.session("hello", [[Text("hi")]])  # the host reads CLAUDE_CONFIG_DIR: no hook of ours runs
    assert missed.hooks("SessionStart") == [] and missed.hooks("UserPromptSubmit") == []
    report = h.json_doctor(expect=1)
    assert report["hosts"]["claude"]["status"]["discovery"] == "failed"
    assert any("loopstate setup apply --host claude" in p for p in report["hosts"]["claude"]["problems"])

    h.loopstate("setup", "apply", "--host", "claude")  # the fix doctor names, in the user's environment
    assert h.json_doctor()["ok"] is True
    ran = h.session("hello", [[Text("hi")]])
    assert [o["outcome"] for o in ran.hooks("SessionStart")] == ["success"]
    assert ran.hook_outputs("UserPromptSubmit") == [{"continue": True}]
