"""`loopstate doctor` through the real CLI on a healthy, a broken and an uninstalled synthetic home.

The healthy home runs the real `loopstate hook` once per registered event. A broken
hook is a small script named `loopstate` that answers what no host accepts; a
host CLI is a script on PATH only where its version is what is checked (neither
Claude Code nor Codex can be installed here).
"""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest
from setuphome import CLAUDE_SETTINGS, config_path, make_home

SECRET = "ghp_notARealToken0123"


def script(path: Path, body: str) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text("#!/bin/sh\n" + body + "\n")
    path.chmod(0o755)
    return path


@pytest.mark.slow
def test_a_healthy_home_passes_every_check_and_records_it(tmp_path):
    h = make_home(tmp_path)
    h.cli("setup", "apply", "--host", "claude", "--mcp")
    h.cli("setup", "apply", "--host", "codex", "--mcp", "--trust-hooks")
    report = h.json("doctor")
    assert report["ok"] is True and report["problems"] == []
    for host, count in (("claude", 7), ("codex", 7)):  # Claude: its 6 hooks and UserPromptSubmit with /intent show
        got = report["hosts"][host]
        status = got["status"]
        assert (status["installed"], status["discovery"], status["behavior"]) == (True, "verified", "verified")
        assert [r["outcome"] for r in got["probe"]["results"]] == ["passed"] * (count + 1)
        # `loopstate mcp` answered over stdio, the way each host opens: Claude Code 2.1.332 with server/discover
        assert got["probe"]["results"][-1]["event"] == ("MCP server/discover" if host == "claude" else "MCP initialize")
        assert got["probe"]["type"] == "harness_probe" and got["probe"]["evidence_id"] == status["evidence_id"]
        recorded = json.loads(Path(got["recorded"]).read_text())
        assert recorded["status"] == status and recorded["evidence"] == got["probe"]
        Path(tmp_path / "status.json").write_text(json.dumps(status))
        assert "a valid harness_status record" in h.cli("validate", "harness_status", str(tmp_path / "status.json")).stdout
    # The other tools' hooks on events where ours can be denied or blocked, by program name only.
    claude = {(c["name"], c["program"]) for c in report["hosts"]["claude"]["status"]["collisions"]}
    assert claude == {("PreToolUse", "guard.sh"), ("Stop", "checks.sh")}
    codex = report["hosts"]["codex"]["status"]["collisions"]
    assert [(c["name"], c["program"]) for c in codex] == [("PreToolUse", "python3")]
    assert SECRET not in json.dumps(report)
    assert all(SECRET not in p.read_text() for p in (h.data / "harnesses").iterdir())
    # The probe ran in a scratch project and data dir: nothing of the user's store was created.
    assert sorted(os.listdir(h.data)) == ["harnesses", "installs"]
    text = h.cli("doctor").stdout
    assert "behavior:  verified (8 of 8 probes answered as the host expects)" in text and text.endswith("ok\n")


@pytest.mark.slow
def test_a_missing_executable_fails_discovery_with_the_fix(tmp_path):
    h = make_home(tmp_path)
    h.cli("setup", "apply", "--host", "claude")
    target = config_path(h, "claude", "user")
    settings = json.loads(target.read_text())
    for groups in settings["hooks"].values():
        for group in groups:
            for handler in group["hooks"]:
                if " hook claude " in handler["command"]:
                    handler["command"] = "/nonexistent/bin/loopstate" + handler["command"][handler["command"].index(" hook"):]
    target.write_text(json.dumps(settings))
    done = h.cli("doctor", expect=1)
    assert "discovery: failed" in done.stdout and "/nonexistent/bin/loopstate does not exist" in done.stdout
    assert "re-run `loopstate setup apply --host claude`" in done.stdout
    status = h.json("doctor", "--host", "claude", expect=1)["hosts"]["claude"]["status"]
    assert status["discovery"] == "failed" and status["behavior"] == "unverified"


@pytest.mark.parametrize("body,words", [
    ("""echo '{"continue": true, "decision": "approve"}'""", "unknown field"),
    ("echo not json", "not what claude accepts"),
    ("echo 'loopstate: broken install' >&2; exit 3", "exited 3: loopstate: broken install"),
])
def test_a_hook_that_answers_badly_fails_behavior(tmp_path, body, words):
    h = make_home(tmp_path)
    bad = script(tmp_path / "bin" / "loopstate", "cat >/dev/null; " + body)
    h.cli("setup", "apply", "--host", "claude", "--executable", str(bad))
    done = h.cli("doctor", "--host", "claude", expect=1)
    assert "discovery: verified" in done.stdout and "behavior:  failed" in done.stdout
    assert words in done.stdout and "try it by hand" in done.stdout


@pytest.mark.slow
def test_an_mcp_server_that_does_not_initialize_fails_behavior(tmp_path):
    h = make_home(tmp_path)
    h.cli("setup", "apply", "--host", "claude", "--mcp")
    bad = script(tmp_path / "bin" / "loopstate", "cat >/dev/null; echo 'loopstate mcp: no SDK' >&2; exit 2")
    state = json.loads((h.home / ".claude.json").read_text())
    state["mcpServers"]["loopstate"]["command"] = str(bad)
    (h.home / ".claude.json").write_text(json.dumps(state))
    done = h.cli("doctor", "--host", "claude", expect=1)
    assert "behavior:  failed (7 of 8 probes" in done.stdout  # 6 hooks, /intent show, the MCP server
    assert "the MCP server loopstate" in done.stdout and "exited 2 without a server/discover result: loopstate mcp: no SDK" in done.stdout


@pytest.mark.slow
def test_codex_hooks_turned_off_in_config_toml_fail_discovery(tmp_path):
    h = make_home(tmp_path)
    h.cli("setup", "apply", "--host", "codex")
    target = config_path(h, "codex", "user")
    target.write_text(target.read_text().replace("[features]\nhooks = true", "[features]\nhooks = false"))
    done = h.cli("doctor", "--host", "codex", expect=1)
    assert "turns hooks off ([features] hooks = false)" in done.stdout and "set it to true" in done.stdout


@pytest.mark.slow
def test_an_unreadable_config_of_the_host_fails_and_is_named(tmp_path):
    h = make_home(tmp_path)
    h.cli("setup", "apply", "--host", "claude")
    local = h.project / ".claude" / "settings.local.json"
    local.write_text('{"hooks": ')
    done = h.cli("doctor", "--host", "claude", expect=1)
    assert f"{local}: it is not valid JSON" in done.stdout and "discovery: failed" in done.stdout


@pytest.mark.slow
def test_an_uninstalled_home_says_how_to_set_up(tmp_path):
    h = make_home(tmp_path)
    h.cli("setup", "apply", "--host", "claude")
    h.cli("setup", "uninstall", "--host", "claude")
    done = h.cli("doctor", expect=1)
    assert "set up for no host" in done.stdout and "loopstate setup apply --host claude" in done.stdout
    asked = h.json("doctor", "--host", "claude", expect=1)
    status = asked["hosts"]["claude"]["status"]
    assert (status["installed"], status["discovery"], status["behavior"]) == (False, "failed", "unverified")
    assert any("not registered for SessionStart" in p and "setup apply --host claude" in p
               for p in asked["hosts"]["claude"]["problems"])


@pytest.mark.slow
def test_the_version_comes_from_the_host_cli_on_path(tmp_path):
    h = make_home(tmp_path)
    bin_dir = tmp_path / "hostbin"
    script(bin_dir / "claude", 'echo "2.1.0 (Claude Code)"')
    script(bin_dir / "codex", "exit 1")
    h.cli("setup", "apply", "--host", "claude")
    env_path = f"{bin_dir}{os.pathsep}{os.environ.get('PATH', '')}"
    original = h.env
    h.env = lambda: {**original(), "PATH": env_path}
    report = h.json("doctor", expect=1)
    assert report["hosts"]["claude"]["status"]["version"] == "2.1.0 (Claude Code)"
    codex = report["hosts"]["codex"]["status"]  # on PATH, so checked, but not set up: that fails with the fix
    assert (codex["installed"], codex["version"], codex["discovery"]) == (True, None, "failed")
    assert report["ok"] is False


@pytest.mark.slow
def test_claude_config_dir_is_where_setup_writes_and_doctor_reads(tmp_path):
    h = make_home(tmp_path)
    h.claude_config = tmp_path / "claude-config"
    h.claude_config.mkdir()
    h.cli("setup", "apply", "--host", "claude", "--mcp")
    assert sorted(p.name for p in h.claude_config.rglob("*") if p.is_file()) == [
        ".claude.json", "intent.md", "settings.json"]
    assert (h.home / ".claude" / "settings.json").read_text() == CLAUDE_SETTINGS  # ~/.claude is not read: untouched
    assert h.json("doctor", "--host", "claude")["ok"] is True

    moved = tmp_path / "other-config"  # the control: the host reads another folder now, where nothing is set up
    moved.mkdir()
    h.claude_config = moved
    done = h.cli("doctor", "--host", "claude", expect=1)
    assert "loopstate's hooks are not registered for SessionStart" in done.stdout


@pytest.mark.slow
def test_claude_without_the_intent_command_or_with_hooks_disabled_fails(tmp_path):
    h = make_home(tmp_path, foreign=False)
    h.cli("setup", "apply", "--host", "claude", "--no-mcp")
    assert h.json("doctor", "--host", "claude")["ok"] is True  # the control
    command = h.home / ".claude" / "commands" / "intent.md"
    kept = command.read_bytes()
    command.unlink()
    done = h.cli("doctor", "--host", "claude", expect=1)
    assert "no loopstate /intent command file" in done.stdout and "loopstate setup apply --host claude" in done.stdout
    command.write_bytes(kept)
    settings = h.home / ".claude" / "settings.json"
    settings.write_text(json.dumps({**json.loads(settings.read_text()), "disableAllHooks": True}))
    assert "sets disableAllHooks" in h.cli("doctor", "--host", "claude", expect=1).stdout


@pytest.mark.slow
def test_claude_mcp_entry_naming_another_store_fails(tmp_path):
    h = make_home(tmp_path, foreign=False)
    h.cli("setup", "apply", "--host", "claude", "--mcp")
    assert h.json("doctor", "--host", "claude")["ok"] is True  # the control: no env, the hooks' store
    state = h.home / ".claude.json"
    value = json.loads(state.read_text())
    value["mcpServers"]["loopstate"]["env"] = {"LOOPSTATE_DATA_DIR": str(tmp_path / "elsewhere")}
    state.write_text(json.dumps(value))
    done = h.cli("doctor", "--host", "claude", expect=1)
    assert f"uses the store {tmp_path / 'elsewhere'}" in done.stdout and f"the hooks use {h.data}" in done.stdout


@pytest.mark.slow
def test_claude_userpromptsubmit_that_does_not_answer_intent_fails(tmp_path):
    h = make_home(tmp_path, foreign=False)
    h.cli("setup", "apply", "--host", "claude", "--no-mcp")
    report = h.json("doctor", "--host", "claude")
    [intent] = [r for r in report["hosts"]["claude"]["probe"]["results"] if r["event"] == "UserPromptSubmit /intent show"]
    assert intent["outcome"] == "passed"  # the control: the real hook answers with a receipt
    fake = script(tmp_path / "bin" / "loopstate", """cat >/dev/null; echo '{"continue": true}'""")
    settings = h.home / ".claude" / "settings.json"
    value = json.loads(settings.read_text())
    for group in value["hooks"]["UserPromptSubmit"]:  # a loopstate that answers every prompt with nothing
        for handler in group["hooks"]:
            handler["command"] = f"{fake} hook claude UserPromptSubmit"
    settings.write_text(json.dumps(value))
    done = h.cli("doctor", "--host", "claude", expect=1)
    assert "does not answer /intent show: its answer carries no receipt as additionalContext" in done.stdout
