"""`loopstate setup plan|apply|uninstall` through the real CLI, on a synthetic home holding other tools' hooks."""

from __future__ import annotations

import json
import os
import sys
import tomllib
from pathlib import Path

import pytest
from setuphome import CLAUDE_SETTINGS, CLAUDE_STATE, CODEX_CONFIG, config_path, make_home, servers_path

CASES = [("claude", "user"), ("codex", "user"), ("claude", "project"), ("codex", "project")]


def parsed(path: Path) -> dict:
    text = path.read_text(encoding="utf-8")
    return json.loads(text) if path.suffix == ".json" else tomllib.loads(text)


def our_server(path: Path) -> dict | None:
    value = parsed(path)
    return value.get("mcpServers" if path.suffix == ".json" else "mcp_servers", {}).get("loopstate")


def our_commands(host: str, path: Path) -> list[str]:
    value = parsed(path)
    return [h["command"] for groups in value.get("hooks", {}).values() if isinstance(groups, list)
            for g in groups for h in g["hooks"] if f" hook {host} " in h.get("command", "")]


@pytest.mark.slow
@pytest.mark.parametrize("host,scope", CASES)
def test_round_trip_leaves_every_file_byte_identical(tmp_path, host, scope):
    h = make_home(tmp_path)
    before = h.snapshot()
    target = config_path(h, host, scope)
    mode = os.stat(target).st_mode & 0o777 if target.exists() else None

    h.cli("setup", "apply", "--host", host, "--scope", scope, "--mcp")
    events = 6 if host == "claude" else 7
    assert len(our_commands(host, target)) == events
    assert our_server(servers_path(h, host, scope))["args"] == ["mcp"]
    if scope == "user":  # the file that was there keeps everything else, value for value
        text = target.read_text(encoding="utf-8")
        if host == "claude":
            assert json.loads(text)["permissions"] == {"allow": ["Bash(git status)"]}
            assert '{"matcher": "Bash", "hooks": [{"type": "command", "command": "guard.sh --token ' in text
        else:
            assert '# guard every shell call\n[[hooks.PreToolUse]]\nmatcher = "Bash"' in text
            assert 'args = ["--stdio"]  # keep this comment' in text
            assert tomllib.loads(text)["mcp_servers"]["docs"] == {"command": "docs-server", "args": ["--stdio"]}
        assert os.stat(target).st_mode & 0o777 == mode  # its permissions kept (the Claude one is 0640)
    receipts = sorted((h.data / "installs").glob("*.json"))
    assert len(receipts) == 1
    assert "a valid install_receipt record" in h.cli("validate", "install_receipt", str(receipts[0])).stdout
    receipt = json.loads(receipts[0].read_text())
    assert receipt["result"] == "complete" and receipt["harnesses"] == ["claude_code" if host == "claude" else "codex"]

    if host == "claude" and scope == "user":  # Claude Code's state file keeps its own keys and servers
        state = json.loads((h.home / ".claude.json").read_text())
        assert {k: v for k, v in state.items() if k != "mcpServers"} == {"numStartups": 12, "projects": {}}
        assert state["mcpServers"]["github"] == json.loads(CLAUDE_STATE)["mcpServers"]["github"]
    installed, data = h.snapshot(), h.data_snapshot()
    again = h.cli("setup", "apply", "--host", host, "--scope", scope, "--mcp")
    assert "nothing to do" in again.stdout
    assert h.snapshot() == installed and h.data_snapshot() == data  # a re-apply is a no-op

    h.cli("setup", "uninstall", "--host", host, "--scope", scope)
    assert h.snapshot() == before
    assert json.loads(receipts[0].read_text())["result"] == "rolled_back"
    assert list((h.data / "installs").glob("*.before")) == []  # the kept copy goes with the receipt's rollback
    assert "nothing to uninstall" in h.cli("setup", "uninstall", "--host", host, "--scope", scope).stdout


@pytest.mark.slow
@pytest.mark.parametrize("host", ["claude", "codex"])
def test_into_an_empty_home_creates_the_folder_and_uninstall_removes_it(tmp_path, host):
    h = make_home(tmp_path, foreign=False)
    before = h.snapshot()
    h.cli("setup", "apply", "--host", host, "--mcp")
    receipt = json.loads(next((h.data / "installs").glob("*.json")).read_text())
    # Claude: .claude/settings.json, .claude/commands/intent.md (the /intent command) and .claude.json
    actions = ["mkdir", "copy", "mkdir", "copy", "copy"] if host == "claude" else ["mkdir", "copy"]
    assert [op["action"] for op in receipt["operations"]] == actions
    assert all(op["pre_existing_digest"] is None for op in receipt["operations"])
    h.cli("setup", "uninstall", "--host", host)
    assert h.snapshot() == before


@pytest.mark.parametrize("host", ["claude", "codex"])
def test_no_mcp_writes_no_server_entry(tmp_path, host):
    h = make_home(tmp_path)
    h.cli("setup", "apply", "--host", host, "--no-mcp")
    assert our_server(servers_path(h, host, "user")) is None
    assert len(our_commands(host, config_path(h, host, "user"))) == (6 if host == "claude" else 7)
    if host == "claude":
        assert (h.home / ".claude.json").read_text() == CLAUDE_STATE


@pytest.mark.slow
def test_an_apply_that_changes_one_file_of_two_records_the_other_as_skipped(tmp_path):
    h = make_home(tmp_path)
    h.cli("setup", "apply", "--host", "claude", "--no-mcp")
    h.cli("setup", "apply", "--host", "claude", "--mcp")
    receipts = [json.loads(p.read_text()) for p in (h.data / "installs").glob("*.json")]
    newest = max(receipts, key=lambda r: r["created_at"])
    assert [(op["action"], op["destination"], op["rollback_action"]) for op in newest["operations"]] == [
        ("skip", ".claude/settings.json", "none"), ("skip", ".claude/commands/intent.md", "none"),
        ("copy", ".claude.json", "restore_if_unchanged")]
    h.cli("setup", "uninstall", "--host", "claude")
    assert (h.home / ".claude.json").read_text() == CLAUDE_STATE
    assert (h.home / ".claude" / "settings.json").read_text() == CLAUDE_SETTINGS


def test_codex_home_is_where_codex_user_hooks_go(tmp_path):
    h = make_home(tmp_path, foreign=False)
    h.codex_home = tmp_path / "codex-home"
    h.codex_home.mkdir()
    h.cli("setup", "apply", "--host", "codex")
    assert len(our_commands("codex", h.codex_home / "config.toml")) == 7
    assert not (h.home / ".codex").exists()


@pytest.mark.slow
@pytest.mark.parametrize("host", ["claude", "codex"])
def test_plan_prints_the_diff_and_writes_nothing(tmp_path, host):
    h = make_home(tmp_path)
    before, data = h.snapshot(), h.data_snapshot()
    out = h.cli("setup", "plan", "--host", host).stdout
    assert f"+++ {config_path(h, host, 'user')}" in out
    added = [line for line in out.splitlines() if line.startswith("+") and f"hook {host} Stop" in line]
    assert len(added) == 1
    as_json = h.json("setup", "plan", "--host", host)
    folders = [line for line in out.splitlines(keepends=True) if line.startswith("create folder ")]
    assert as_json["noop"] is False and as_json["diff"] == "".join(line for line in out.splitlines(keepends=True)
                                                                   if line not in folders)
    assert folders == ([f"create folder {h.home}/.claude/commands\n"] if host == "claude" else [])
    assert h.snapshot() == before and h.data_snapshot() == data == {}
    h.cli("setup", "apply", "--host", host)
    assert "apply changes nothing" in h.cli("setup", "plan", "--host", host).stdout


@pytest.mark.slow
def test_a_file_changed_since_our_write_is_refused_without_approve(tmp_path):
    h = make_home(tmp_path)
    target = config_path(h, "claude", "user")
    h.cli("setup", "apply", "--host", "claude")
    settings = json.loads(target.read_text())
    del settings["hooks"]["Stop"]  # the user takes out one of ours and adds a setting of their own
    settings["theme"] = "dark"
    target.write_text(json.dumps(settings, indent=2))
    edited = target.read_bytes()

    refused = h.cli("setup", "apply", "--host", "claude", expect=1)
    assert "CONFLICT" in refused.stderr and "changed since loopstate wrote it" in refused.stderr
    assert "--approve" in refused.stderr and "setup plan" in refused.stderr
    assert target.read_bytes() == edited
    assert "apply needs --approve" in h.cli("setup", "plan", "--host", "claude").stdout

    h.cli("setup", "apply", "--host", "claude", "--approve")
    assert len(our_commands("claude", target)) == 6 and json.loads(target.read_text())["theme"] == "dark"

    # Undo: the newest receipt restores the user's edit; the oldest cannot restore over it without --approve.
    installed = target.read_bytes()
    refused = h.cli("setup", "uninstall", "--host", "claude", expect=1)
    assert "changed since loopstate wrote it" in refused.stderr and "--approve" in refused.stderr
    assert target.read_bytes() == installed  # refused before anything was written
    h.cli("setup", "uninstall", "--host", "claude", "--approve")
    left = json.loads(target.read_text())
    assert our_commands("claude", target) == [] and left["theme"] == "dark"
    assert left["hooks"]["PreToolUse"] == json.loads(CLAUDE_SETTINGS)["hooks"]["PreToolUse"]


@pytest.mark.slow
def test_uninstall_with_approve_takes_out_only_our_tables_from_an_edited_config_toml(tmp_path):
    h = make_home(tmp_path)
    target = config_path(h, "codex", "user")
    h.cli("setup", "apply", "--host", "codex")
    target.write_text(target.read_text() + '\n[profiles.fast]\nmodel = "gpt-5-mini"  # mine\n')
    h.cli("setup", "uninstall", "--host", "codex", expect=1)
    h.cli("setup", "uninstall", "--host", "codex", "--approve")
    text = target.read_text()
    assert our_commands("codex", target) == []
    assert text.startswith(CODEX_CONFIG.rstrip("\n")) and 'model = "gpt-5-mini"  # mine' in text


def test_a_symlinked_config_is_refused_and_its_target_untouched(tmp_path):
    h = make_home(tmp_path)
    real = tmp_path / "dotfiles-settings.json"
    real.write_text('{"model": "opus"}\n')
    target = config_path(h, "claude", "user")
    target.unlink()
    target.symlink_to(real)
    done = h.cli("setup", "apply", "--host", "claude", expect=1)
    assert "UNSAFE_PATH" in done.stderr and "symlink" in done.stderr and str(target) in done.stderr
    assert real.read_text() == '{"model": "opus"}\n' and h.data_snapshot() == {}


def test_a_symlinked_folder_on_the_way_is_refused(tmp_path):
    h = make_home(tmp_path, foreign=False)
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    (h.home / ".claude").symlink_to(elsewhere)
    done = h.cli("setup", "apply", "--host", "claude", expect=1)
    assert "UNSAFE_PATH" in done.stderr and "symlink" in done.stderr
    assert list(elsewhere.iterdir()) == []


@pytest.mark.parametrize("host,text,words", [
    ("claude", '{"hooks": {"Stop": [}', "not valid JSON"),
    ("claude", '{"a": 1, "a": 2}', "appears twice"),
    ("claude", '["not", "an", "object"]', "not a JSON object"),
    ("claude", '{"hooks": ["Stop"]}', '"hooks" is not an object'),
    ("codex", 'model = "gpt-5"\nmodel = "o3"\n', "not valid TOML"),
    ("codex", 'hooks = "none"\n', "`hooks` is not a table"),
    ("codex", '[hooks]\nStop = "x"\n', "`hooks.Stop` is not an array of tables"),
])
def test_a_config_of_an_unexpected_shape_is_refused_untouched(tmp_path, host, text, words):
    h = make_home(tmp_path)
    target = config_path(h, host, "user")
    target.write_text(text)
    done = h.cli("setup", "apply", "--host", host, expect=1)
    assert "VALIDATION_FAILED" in done.stderr and words in done.stderr and str(target) in done.stderr
    assert target.read_text() == text and h.data_snapshot() == {}


def test_a_damaged_receipt_stops_uninstall_with_the_path_named(tmp_path):
    h = make_home(tmp_path)
    h.cli("setup", "apply", "--host", "claude")
    receipt = next((h.data / "installs").glob("*.json"))
    receipt.write_text(receipt.read_text().replace('"complete"', '"done"'))
    done = h.cli("setup", "uninstall", "--host", "claude", expect=1)
    assert str(receipt) in done.stderr and "move it aside" in done.stderr


def test_bad_arguments_say_what_to_pass(tmp_path):
    h = make_home(tmp_path)
    assert "--host" in h.cli("setup", "apply", expect=2).stderr
    assert "invalid choice: 'vim'" in h.cli("setup", "plan", "--host", "vim", expect=2).stderr
    missing = h.cli("setup", "apply", "--host", "claude", "--executable", "relative/loopstate", expect=1)
    assert "absolute" in missing.stderr


@pytest.mark.slow
def test_a_second_setup_waits_for_the_first_and_is_refused_naming_it(tmp_path):
    import subprocess
    import sys

    h = make_home(tmp_path)
    before = h.snapshot()
    holder = subprocess.Popen(
        [sys.executable, "-c", "import sys; from pathlib import Path; from loopstate.core.lock import StoreLock\n"
         f"data = Path({str(h.data)!r}); (data / 'installs').mkdir(parents=True)\n"
         "with StoreLock(data / 'installs' / '.lock', data).exclusive():\n"
         "    print('held', flush=True); sys.stdin.read()"],
        stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)
    try:
        assert holder.stdout.readline() == "held\n"
        done = h.cli("setup", "apply", "--host", "claude", expect=1)
        assert "LOCK_TIMEOUT" in done.stderr and str(holder.pid) in done.stderr
        assert h.snapshot() == before
    finally:
        holder.stdin.close()
        holder.wait(timeout=60)
    h.cli("setup", "apply", "--host", "claude")


def test_a_receipt_left_partial_by_a_crash_before_the_write_is_undone_by_digest(tmp_path):
    h = make_home(tmp_path)
    before = h.snapshot()
    target = config_path(h, "claude", "user")
    original = target.read_bytes()
    h.cli("setup", "apply", "--host", "claude", "--no-mcp")
    receipt_path = next((h.data / "installs").glob("*.json"))
    receipt = json.loads(receipt_path.read_text())
    # As if apply had stopped after its `partial` receipt and before the file was written.
    receipt_path.write_text(json.dumps({**receipt, "result": "partial"}))
    target.write_bytes(original)
    done = h.cli("setup", "uninstall", "--host", "claude")
    assert "nothing" in done.stdout
    assert h.snapshot() == before and json.loads(receipt_path.read_text())["result"] == "rolled_back"


def test_claude_project_scope_holds_no_path_of_this_machine(tmp_path):
    h = make_home(tmp_path, foreign=False)
    out = h.cli("setup", "apply", "--host", "claude", "--scope", "project", "--mcp").stdout
    assert "commit these with the project" in out
    for path in (h.project / ".claude" / "settings.json", h.project / ".claude" / "commands" / "intent.md",
                 h.project / ".mcp.json"):
        assert str(tmp_path) not in path.read_text() and str(Path(sys.executable).parent) not in path.read_text()
    assert our_server(h.project / ".mcp.json") == {"command": "loopstate", "args": ["mcp"]}
    assert set(our_commands("claude", h.project / ".claude" / "settings.json")) == {
        f"loopstate hook claude {event}" for event in ("SessionStart", "UserPromptSubmit", "PreToolUse", "Stop",
                                                       "PreCompact", "SessionEnd")}
    user = h.cli("setup", "apply", "--host", "claude", "--no-mcp").stdout  # the control: the user scope's own path
    assert "commit these" not in user
    assert str(Path(sys.executable).parent) in (h.home / ".claude" / "settings.json").read_text()
    refused = h.cli("setup", "plan", "--host", "claude", "--scope", "project", "--executable", sys.executable,
                    expect=1)
    assert "would write this machine's path into .claude/settings.json and .mcp.json" in refused.stderr
