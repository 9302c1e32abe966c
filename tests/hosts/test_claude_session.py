"""Whole Claude Code sessions after a real `loopstate setup apply`: what the host sent the model, its hook report, the store.

Each module sets up once (a private HOME and CLAUDE_CONFIG_DIR, setup apply as a
user runs it) and drives `claude -p` sessions against the scripted model server.
Every check has its control: the same tool call without STOP runs; the same
stop with the gate resolved is not blocked.
"""

from __future__ import annotations

import json

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


@pytest.mark.slow
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


@pytest.mark.slow
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


@pytest.mark.slow
def test_an_open_gate_blocks_the_stop_with_a_command_that_works_and_a_resolved_gate_does_not(claude) -> None:
    hooks_config = claude.project / ".loopstate" / "hooks.json"
    hooks_config.parent.mkdir(exist_ok=True)
    hooks_config.write_text(json.dumps({"enforce_gates": True, "goal": "ship"}))
    claude.loopstate("goals", "gate", "ship", "Owner sign-off", "--new-goal")
    try:
        blocked = claude.session("finish up", [[Text("all done")], [Text("waiting for the owner")]])
        assert len(blocked.requests) == 2  # the Stop block sent the agent back with the reason
        reason = "loopstate: not done yet: gate G001 of goal ship (Owner sign-off)"
        assert reason in blocked.sent(1)
        assert "`loopstate goals resolve ship G001 --decision approve`" in blocked.sent(1)
        claude.loopstate("goals", "resolve", "ship", "G001", "--decision", "approve")  # as the reason writes it

        done = claude.session("finish up", [[Text("all done")]])  # the control: the gate resolved, the stop stands
        assert len(done.requests) == 1 and done.extra_requests == 0
    finally:
        hooks_config.unlink()


@pytest.mark.slow
def test_mcp_tools_are_there_on_the_first_turn_and_write_to_the_hooks_store(claude) -> None:
    """Claude Code 2.1.332 defers MCP tools: the first request names them, ToolSearch loads their schemas."""
    statement = "the importer keeps the old CSV columns"
    claim = {"action": "add", "statement": statement, "status": "inferred", "facets": ["outcome"], "by": "agent",
             "confidence": 0.6}
    claude.loopstate("intent", "start", "--label", "importer")  # the user's task, which the agent's claim joins
    load = {"query": "select:mcp__loopstate__intent_claim,mcp__loopstate__intent_show"}
    first = claude.session("note it", [[ToolCall("ToolSearch", load)],
                                       [ToolCall("mcp__loopstate__intent_claim", claim)],
                                       [ToolCall("mcp__loopstate__intent_show", {})], [Text("noted")]],
                           allowed="mcp__loopstate,ToolSearch")
    assert {"name": "loopstate", "status": "connected", "source": "user"} in first.init["mcp_servers"]
    assert "mcp__loopstate__intent_claim" in json.dumps(first.requests[0].body)  # named on the first turn
    [loaded] = first.tool_results(1)
    assert "mcp__loopstate__intent_claim" in json.dumps(loaded)
    [written] = first.tool_results(2)
    assert written.get("is_error") is not True, written
    [shown] = first.tool_results(3)
    assert statement in json.dumps(shown)  # the read sees the write
    stored = b"".join(p.read_bytes() for p in claude.data.rglob("intent.jsonl"))
    assert statement.encode() in stored  # in the store the hooks read (the session's LOOPSTATE_DATA_DIR)


@pytest.mark.slow
def test_a_corrupt_store_fails_open_and_is_told_once_where_the_user_sees_it(claude) -> None:
    claude.loopstate("intent", "start", "--claim", "hard_constraint:the ledger under test")
    [ledger] = claude.data.rglob("intent.jsonl")
    kept = ledger.read_bytes()
    ledger.write_bytes(kept.replace(b"the ledger under test", b"the ledger under tost"))
    try:
        broken = claude.session("make the file", touch("despite.txt"))
    finally:
        ledger.write_bytes(kept)
    assert (claude.project / "despite.txt").exists()  # failed open: the tool ran
    told = [i for i in range(len(broken.requests)) if "CORRUPT_LEDGER" in broken.sent(i)]
    assert told and "`loopstate verify`" in broken.sent(told[0]) and "`loopstate recover`" in broken.sent(told[0])
    assert broken.sent(0).count("CORRUPT_LEDGER") == 1  # once, though SessionStart and the prompt both met it
    assert any("CORRUPT_LEDGER" in notice for notice in broken.informational())  # and as the host's notice

    healthy = claude.session("make the file", touch("again.txt"))  # the control: the same store, intact
    assert "CORRUPT_LEDGER" not in healthy.sent(0)


@pytest.mark.slow
def test_intent_remembered_in_one_session_is_injected_into_the_next(claude) -> None:
    signal = "[success_signal] the nightly import finishes under 5 minutes"
    before = claude.session("go on with the importer", [[Text("ok")]])  # the control: not there before
    assert signal not in before.sent(0)
    remembered = claude.session("/intent remember success_signal:the nightly import finishes under 5 minutes",
                                [[Text("receipt relayed")]])
    assert "loopstate: " in remembered.sent(0) and "(claim " in remembered.sent(0)
    later = claude.session("go on with the importer", [[Text("ok")]])  # a new session of the same project
    assert later.session_id != remembered.session_id
    assert signal in later.sent(0)


@pytest.mark.slow
def test_a_compaction_is_recorded_and_the_claims_come_back_after_it(claude) -> None:
    claim = "[hard_constraint] the export keeps the old CSV columns"
    first = claude.session("/intent remember hard_constraint:the export keeps the old CSV columns", [[Text("ok")]])
    ledger = next(claude.data.rglob("intent.jsonl"))
    compactions = ledger.read_bytes().count(b"compaction_observed")
    compacted = claude.session("/compact", [[Text("<summary>The user works on an exporter.</summary>")]],
                               resume=first.session_id)
    assert ledger.read_bytes().count(b"compaction_observed") == compactions + 1  # PreCompact recorded it
    [after] = [o for o in compacted.hooks("SessionStart") if o["hook_name"] == "SessionStart:compact"]
    assert claim in after["stdout"]  # re-injected right after the compaction, in the host's own report
    resumed = claude.session("go on", [[Text("ok")]], resume=first.session_id)
    sent = resumed.sent(0)  # the transcript now starts at the summary, which does not carry the claim
    assert "The user works on an exporter." in sent and sent.rfind(claim) > sent.index("The user works on an exporter.")


# The Bash call finds its claude process (up the parents, by executable), then the `loopstate mcp` child of it,
# and prints that server's LOOPSTATE_DATA_DIR: what the MCP server resolves its store from.
SERVER_STORE = r"""p=$$; while [ "$p" -gt 1 ]; do [ "$(basename "$(readlink /proc/$p/exe)")" = claude.exe ] && break; p=$(cut -d' ' -f4 /proc/$p/stat); done; for k in $(ps -eo pid=,ppid=,args= | awk -v p="$p" '$2 == p && / mcp$/ {print $1}'); do tr '\0' '\n' < /proc/$k/environ | grep '^LOOPSTATE_DATA_DIR='; done"""


@pytest.mark.slow
def test_the_mcp_server_gets_the_store_the_hooks_use(claude, tmp_path) -> None:
    script = [[ToolCall("Bash", {"command": SERVER_STORE, "description": "which store the MCP server uses"})],
              [Text("ok")]]
    same = claude.session("which store", script)
    [found] = same.tool_results(1)
    assert found["content"] == f"LOOPSTATE_DATA_DIR={claude.data}"
    other = tmp_path / "other-store"  # the control: another store in the host's environment, for both
    moved = claude.session("which store", script, LOOPSTATE_DATA_DIR=str(other))
    [found] = moved.tool_results(1)
    assert found["content"] == f"LOOPSTATE_DATA_DIR={other}"
    assert list(other.rglob("hook-sessions"))  # and the hooks of that session used it too
