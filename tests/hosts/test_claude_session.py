"""Whole Claude Code sessions after a real `loopstate setup apply`: what the host sent the model, its hook report, the store.

Each module sets up once (a private HOME and CLAUDE_CONFIG_DIR, setup apply as a
user runs it) and drives `claude -p` sessions against the scripted model server.
Every check has its control: the same tool call without STOP runs; the same
stop with the gate resolved is not blocked.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from claude_kit import ClaudeHome
from modelserver import Text, ToolCall

from tests.hosts.conftest import needs_claude

pytestmark = needs_claude


@pytest.fixture(scope="module")
def claude(tmp_path_factory) -> ClaudeHome:
    h = ClaudeHome(tmp_path_factory.mktemp("claude"))
    out = h.loopstate("setup", "apply", "--host", "claude").stdout
    assert f"wrote {h.config}/settings.json (6 hooks)" in out and f"wrote {h.config}/commands/intent.md" in out
    assert not (h.home / ".claude").exists()  # CLAUDE_CONFIG_DIR is where the host reads: nothing in ~/.claude
    return h


def touch(name: str) -> list[list]:
    return [[ToolCall("Bash", {"command": f"touch {name}", "description": "touch a file"})], [Text("done")]]


def test_a_stop_file_denies_the_shell_call_and_without_it_the_same_call_runs(claude: ClaudeHome) -> None:
    stop = claude.project / ".loopstate" / "STOP"
    stop.parent.mkdir(exist_ok=True)
    stop.write_text("stop\n")
    try:
        denied = claude.session("make the file", touch("denied.txt"))
    finally:
        stop.unlink()
    assert not (claude.project / "denied.txt").exists()
    [result] = denied.tool_results(1)
    assert result["is_error"] is True and "the kill switch .loopstate/STOP stands" in json.dumps(result)
    [decision] = denied.hook_outputs("PreToolUse")
    assert decision["hookSpecificOutput"]["permissionDecision"] == "deny"

    ran = claude.session("make the file", touch("ran.txt"))  # the control: no STOP, the same call runs
    assert (claude.project / "ran.txt").exists()
    assert "kill switch" not in json.dumps(ran.tool_results(1))


def test_intent_remember_is_a_command_whose_receipt_is_relayed_and_the_next_prompt_carries_it(claude) -> None:
    first = claude.session("/intent remember hard_constraint:Keep the public API", [[Text("receipt relayed")]])
    assert "intent" in first.init["slash_commands"]  # the host knows the command from the file setup wrote
    assert not any("blocked by hook" in notice or "stopped by hook" in notice for notice in first.informational())
    assert len(first.requests) == 1
    sent = first.sent(0)
    assert "loopstate: remembered [hard_constraint] Keep the public API (claim " in sent  # the receipt, as context
    assert "Reply with that receipt as it is" in sent  # the command file's body is the prompt
    assert b"Keep the public API" in b"".join(p.read_bytes() for p in claude.data.rglob("*.jsonl"))

    again = claude.session("now refactor the checkout", [[Text("ok")]], resume=first.session_id)
    assert "[hard_constraint] Keep the public API" in again.sent(0)  # injected on the session's next prompt
