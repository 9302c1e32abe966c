"""The handshake `loopstate mcp` answers before the SDK is loaded (mcpserver/early.py) is the SDK's, byte for byte.

Every test here drives a real `loopstate mcp` process over its real stdin and
stdout. The early answers are compared with the SDK's own (the same process
with ``LOOPSTATE_MCP_EARLY=0``), for the shapes the hosts send and for shapes
the early answerer must leave to the SDK; the checked-in table must be what
the installed SDK answers now. Nothing here is timed.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from loopstate.mcpserver import early, handshake
from tests.conftest import REPO
from tests.mcp.mcpkit import mcp_env, needs_sdk
from tests.mcp.test_mcp_tools import TOOLS

pytestmark = needs_sdk

CLAUDE = {"protocolVersion": "2025-06-18", "capabilities": {"roots": {}, "elicitation": {}},
          "clientInfo": {"name": "claude-code", "version": "2.1.332"}}
# What Codex 0.171.0 sends (recorded from a real `codex exec` through a tap): the handshake era.
CODEX = {"protocolVersion": "2025-06-18",
         "capabilities": {"experimental": {"codex/auth-change": {}}, "elicitation": {"form": {}, "url": {}}},
         "clientInfo": {"name": "codex-mcp-client", "title": "Codex", "version": "0.171.0"}}
CODEX_LIST = {"_meta": {"progressToken": 0}}
# What Claude Code 2.1.332 sends: the 2026-07-28 era, no handshake, this envelope on every request.
CLAUDE_2026 = {"_meta": {
    "io.modelcontextprotocol/protocolVersion": "2026-07-28",
    "io.modelcontextprotocol/clientInfo": {"name": "claude-code", "title": "Claude Code", "version": "2.1.332",
                                           "description": "Anthropic's agentic coding tool",
                                           "websiteUrl": "https://claude.com/claude-code"},
    "io.modelcontextprotocol/clientCapabilities": {"roots": {"listChanged": True}, "elicitation": {"form": {}, "url": {}}}}}
SDK_CLIENT = {"protocolVersion": "2025-11-25", "capabilities": {"roots": {"listChanged": True}},
              "clientInfo": {"name": "mcp", "version": "0.1.0"}}


def request(request_id: Any, method: str, params: Any = None) -> dict[str, Any]:
    message = {"jsonrpc": "2.0", "id": request_id, "method": method}
    if params is not None:
        message["params"] = params
    return message


def handshake_lines(init: dict[str, Any], request_id: Any = 0) -> list[dict[str, Any]]:
    return [request(request_id, "initialize", init), {"jsonrpc": "2.0", "method": "notifications/initialized"},
            request(1, "tools/list"), request(2, "prompts/list", {}), request(3, "resources/templates/list")]


def mcp(data_dir: Path, cwd: Path, messages: list[dict[str, Any]], *, early_on: bool) -> tuple[list[bytes], str]:
    """The answer lines (sorted: early answers go out first) and stderr of `loopstate mcp` fed ``messages``."""
    env = {**mcp_env(data_dir), early.DISABLE: "1" if early_on else "0"}
    done = subprocess.run([sys.executable, "-m", "loopstate.cli.main", "mcp", "--log-level", "info"],
                          input=b"".join((json.dumps(m) + "\n").encode() for m in messages),
                          capture_output=True, env=env, cwd=cwd, timeout=120)
    assert done.returncode == 0, done.stderr.decode()[-2000:]
    assert "differs from the SDK's" not in done.stderr.decode()
    return sorted(done.stdout.splitlines(keepends=True)), done.stderr.decode()


def mcp_lines(data_dir: Path, cwd: Path, messages: list[dict[str, Any]], count: int, *, early_on: bool) -> list[bytes]:
    """The first ``count`` lines (sorted) `loopstate mcp` writes for ``messages``, read while its stdin stays
    open (a subscriptions/listen stream never ends on its own), then the process is stopped."""
    env = {**mcp_env(data_dir), early.DISABLE: "1" if early_on else "0"}
    proc = subprocess.Popen([sys.executable, "-m", "loopstate.cli.main", "mcp"], stdin=subprocess.PIPE,
                            stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, env=env, cwd=cwd)
    try:
        proc.stdin.write(b"".join((json.dumps(m) + "\n").encode() for m in messages))
        proc.stdin.flush()
        return sorted(proc.stdout.readline() for _ in range(count))
    finally:
        proc.kill()
        proc.wait(timeout=60)


def answered_early(stderr: str) -> str:
    return next((line for line in stderr.splitlines() if "before the SDK was loaded" in line), "")


def test_the_hosts_own_opening_lines_are_answered_early_with_the_sdks_bytes(root, data_dir):
    codex = [request(0, "initialize", CODEX), {"jsonrpc": "2.0", "method": "notifications/initialized"},
             request(1, "tools/list", CODEX_LIST)]
    claude = [request("server-discover-probe-1", "server/discover", CLAUDE_2026), request(0, "server/discover", CLAUDE_2026),
              request(1, "prompts/list", CLAUDE_2026), request(2, "resources/list", CLAUDE_2026),
              request(3, "tools/list", CLAUDE_2026), request(4, "resources/templates/list", CLAUDE_2026)]
    # resources/list (2) is the store's, read in a thread of its own: its answer comes after the static ones.
    for messages, early_ids in ((codex, "0, 1"), (claude, "'server-discover-probe-1', 0, 1, 3, 4, 2")):
        early_lines, stderr = mcp(data_dir, root, messages, early_on=True)
        sdk_lines, _ = mcp(data_dir, root, messages, early_on=False)
        assert early_lines == sdk_lines and len(early_lines) == sum("id" in m for m in messages)
        assert f"answered request(s) {early_ids} before the SDK was loaded" in answered_early(stderr)
    # Claude Code opens a listen stream right after its probe and waits for its acknowledgement.
    listen = request("listen:0", "subscriptions/listen", {**CLAUDE_2026, "notifications": {
        "toolsListChanged": True, "promptsListChanged": True, "resourcesListChanged": True}})
    opening = [claude[0], listen, *claude[1:]]
    early_lines = mcp_lines(data_dir, root, opening, len(claude) + 1, early_on=True)
    assert early_lines == mcp_lines(data_dir, root, opening, len(claude) + 1, early_on=False)
    assert sum(b"notifications/subscriptions/acknowledged" in line for line in early_lines) == 1


@pytest.mark.parametrize("messages", [
    [request(0, "server/discover", {"_meta": {**CLAUDE_2026["_meta"], "progressToken": 1}})],  # more than the envelope
    [request(0, "server/discover", {"_meta": {k: v for k, v in CLAUDE_2026["_meta"].items() if "clientInfo" not in k}})],
    [request(0, "tools/list", {"_meta": {**CLAUDE_2026["_meta"], "io.modelcontextprotocol/protocolVersion": "2099-01-01"}})],
    [request(0, "server/discover", CLAUDE_2026), request(1, "initialize", CLAUDE)],  # initialize on a modern connection
    [request(0, "initialize", CLAUDE), request(1, "tools/list", CLAUDE_2026)],  # an envelope on a legacy one
    [{"jsonrpc": "2.0", "method": "notifications/initialized"}, request(0, "server/discover", CLAUDE_2026)],
    [request(0, "initialize", CODEX), request(1, "tools/list", {"_meta": {"progressToken": 0.5}})],
], ids=["extra-meta", "half-envelope", "unknown-modern-version", "initialize-when-modern", "envelope-when-legacy",
        "notification-first", "float-progress-token"])
def test_both_eras_what_is_left_alone_or_answered_is_the_sdks(messages, root, data_dir):
    early_lines, _ = mcp(data_dir, root, messages, early_on=True)
    sdk_lines, _ = mcp(data_dir, root, messages, early_on=False)
    assert early_lines == sdk_lines and early_lines


def test_the_checked_in_table_is_what_the_installed_sdk_answers():
    if early.distributions() is None:
        pytest.skip("the SDK is not installed as a distribution")
    fresh = handshake.dumps(handshake.record())
    assert Path(early.TABLE).read_text(encoding="utf-8") == fresh, (
        "mcpserver/handshake.json is stale (the tools, the instructions or the SDK changed): "
        "run python -m loopstate.mcpserver.handshake")
    assert early.load() is not None


ODD_BUT_SOUND = [  # fields the SDK's models ignore or accept: answered early too
    {**CLAUDE, "capabilities": {"elicitation": {"schemaValidation": True}, "roots": {"listChanged": False},
                                "sampling": {"tools": {}}, "x-vendor": [1], "tasks": {}}},
    {**CODEX, "clientInfo": {**CODEX["clientInfo"], "websiteUrl": "https://example.com", "extra": 1}},
]


@pytest.mark.slow
@pytest.mark.parametrize("init", [CLAUDE, CODEX, SDK_CLIENT] + ODD_BUT_SOUND + [
    {**CLAUDE, "protocolVersion": version} for version in ("2024-11-05", "2025-03-26", "2025-11-25", "2026-07-28", "1999-01-01")
], ids=["claude", "codex", "sdk-client", "odd-capabilities", "odd-client-info", "2024-11-05", "2025-03-26", "2025-11-25", "2026-07-28", "unknown-version"])
def test_early_answers_are_the_sdks_own_bytes(init, root, data_dir):
    early_lines, stderr = mcp(data_dir, root, handshake_lines(init), early_on=True)
    sdk_lines, _ = mcp(data_dir, root, handshake_lines(init), early_on=False)
    assert early_lines == sdk_lines and len(early_lines) == 4
    assert "answered request(s) 0, 1, 2, 3 before the SDK was loaded" in answered_early(stderr)


@pytest.mark.slow
@pytest.mark.parametrize("messages", [
    handshake_lines({**CLAUDE, "_meta": {"progressToken": 1}}),  # _meta on initialize: the SDK decides
    handshake_lines({**CLAUDE, "capabilities": {"roots": {"listChanged": "yes"}}}),  # the SDK refuses it
    handshake_lines({**CLAUDE, "capabilities": {"tasks": {"list": {}}}}),  # a capability the answerer leaves to the SDK
    handshake_lines({**CLAUDE, "capabilities": {"elicitation": {"form": True}}}),  # the SDK refuses it
    handshake_lines({**CLAUDE, "clientInfo": {"name": "x", "version": "1", "icons": [{"src": 1}]}}),
    handshake_lines({**CLAUDE, "clientInfo": {"name": "x"}}),  # no version: the SDK refuses it
    handshake_lines(CLAUDE, request_id="é"),  # an id the SDK might spell otherwise
    [request(1, "tools/list")] + handshake_lines(CLAUDE)[:2],  # tools/list before initialize
    handshake_lines(CLAUDE)[:2] + [request(1, "tools/list", {"cursor": "x"}), request(4, "ping")],
], ids=["meta", "malformed-capability", "tasks", "malformed-elicitation", "icons", "no-client-version", "non-ascii-id",
        "list-first", "cursor"])
def test_what_the_early_answerer_leaves_alone_the_sdk_answers_as_ever(messages, root, data_dir):
    early_lines, _ = mcp(data_dir, root, messages, early_on=True)
    sdk_lines, _ = mcp(data_dir, root, messages, early_on=False)
    assert early_lines == sdk_lines and early_lines


def test_a_real_session_over_stdio_handshake_then_tools_served_by_the_sdk(root, data_dir):
    """The host's order: initialize, read its answer, then initialized + tools/list, then a tool call."""
    env = mcp_env(data_dir)
    proc = subprocess.Popen([sys.executable, "-m", "loopstate.cli.main", "mcp", "--root", str(root), "--log-level", "info"],
                            stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.PIPE, env=env, cwd=REPO)

    def send(*messages: dict[str, Any]) -> None:
        proc.stdin.write(b"".join((json.dumps(m) + "\n").encode() for m in messages))
        proc.stdin.flush()

    def answer() -> dict[str, Any]:
        """The next answer to one of ours; the server's own requests (roots/list: we offer roots) answered on the way."""
        while True:
            message = json.loads(proc.stdout.readline())
            if message.get("method") != "roots/list":
                return message
            send({"jsonrpc": "2.0", "id": message["id"], "result": {"roots": []}})

    try:
        send(request(0, "initialize", CLAUDE))
        init = answer()
        assert init["id"] == 0 and init["result"]["protocolVersion"] == "2025-06-18"
        assert init["result"]["serverInfo"]["name"] == "loopstate"
        assert init["result"]["capabilities"]["experimental"] == {"codex/sandbox-state-meta": {}}
        assert init["result"]["capabilities"]["resources"]["subscribe"] is True
        assert "intent_task" in init["result"]["instructions"]
        send({"jsonrpc": "2.0", "method": "notifications/initialized"}, request(1, "tools/list"))
        listed = answer()
        assert listed["id"] == 1 and {t["name"] for t in listed["result"]["tools"]} == TOOLS
        assert all(t["inputSchema"]["type"] == "object" for t in listed["result"]["tools"])
        send(request(2, "tools/call", {"name": "intent_task", "arguments": {"action": "start", "label": "early"}}),
             request(3, "resources/list"))
        answers = {a["id"]: a for a in (answer(), answer())}
        assert answers[2]["result"].get("isError") is not True, answers[2]
        assert answers[2]["result"]["structuredContent"]["task_id"]
        assert [r["uri"].rsplit("/", 1)[-1] for r in answers[3]["result"]["resources"]] == ["intent"]
        proc.stdin.close()
        assert proc.wait(timeout=60) == 0
        assert proc.stdout.read() == b""
        stderr = proc.stderr.read().decode()
        assert "answered request(s) 0, 1 before the SDK was loaded" in answered_early(stderr), stderr
        assert "differs from the SDK's" not in stderr
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()


NO_TABLE = """
import sys
from loopstate.mcpserver import early
early.TABLE = sys.argv.pop(1)  # an install the checked-in table was not recorded for
from loopstate.cli.main import run
sys.argv[0] = "loopstate"
run()
"""


@pytest.mark.slow
def test_an_install_the_table_does_not_fit_records_the_sdks_answers_for_its_next_start(tmp_path, root, data_dir):
    env = {**mcp_env(data_dir), "XDG_CACHE_HOME": str(tmp_path / "own-cache")}
    messages = handshake_lines(CLAUDE)

    def run(**extra: str) -> tuple[list[bytes], str]:
        done = subprocess.run([sys.executable, "-c", NO_TABLE, str(tmp_path / "none.json"), "mcp", "--log-level", "info"],
                              input=b"".join((json.dumps(m) + "\n").encode() for m in messages),
                              capture_output=True, env={**env, **extra}, cwd=root, timeout=120)
        assert done.returncode == 0, done.stderr.decode()[-2000:]
        return sorted(done.stdout.splitlines(keepends=True)), done.stderr.decode()

    first, stderr = run()
    assert not answered_early(stderr)  # no table: the SDK answered, and its answers were kept
    cached = json.loads((tmp_path / "own-cache" / "loopstate" / "mcp-handshake.json").read_text())
    assert set(cached["answers"]) == {"2025-06-18"} and set(cached["answers"]["2025-06-18"]) == {"initialize", *early.STATIC}
    second, stderr = run()
    assert "answered request(s) 0, 1, 2, 3 before the SDK was loaded" in answered_early(stderr)
    assert second == first == mcp(data_dir, root, messages, early_on=False)[0]
    # Another version than the one kept: the SDK answers it (and it is kept beside the first).
    messages = handshake_lines({**CLAUDE, "protocolVersion": "2025-11-25"})
    third, stderr = run()
    assert not answered_early(stderr) and third == mcp(data_dir, root, messages, early_on=False)[0]
    cached = json.loads((tmp_path / "own-cache" / "loopstate" / "mcp-handshake.json").read_text())
    assert set(cached["answers"]) == {"2025-06-18", "2025-11-25"}


def test_a_2026_session_on_such_an_install_is_recorded_too_its_listen_acknowledgement_included(tmp_path, root, data_dir):
    env = {**mcp_env(data_dir), "XDG_CACHE_HOME": str(tmp_path / "own-cache")}
    listen = request("listen:0", "subscriptions/listen", {**CLAUDE_2026, "notifications": {
        "toolsListChanged": True, "promptsListChanged": True, "resourcesListChanged": True}})
    messages = [request("probe", "server/discover", CLAUDE_2026), listen, request(1, "tools/list", CLAUDE_2026),
                request(2, "prompts/list", CLAUDE_2026)]

    def run() -> list[bytes]:
        proc = subprocess.Popen([sys.executable, "-c", NO_TABLE, str(tmp_path / "none.json"), "mcp"],
                                stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, env=env, cwd=root)
        try:
            proc.stdin.write(b"".join((json.dumps(m) + "\n").encode() for m in messages))
            proc.stdin.flush()
            return sorted(proc.stdout.readline() for _ in messages)
        finally:
            proc.kill()
            proc.wait(timeout=60)

    first = run()
    cached = json.loads((tmp_path / "own-cache" / "loopstate" / "mcp-handshake.json").read_text())
    assert set(cached["modern"]["2026-07-28"]) == {"server/discover", "tools/list", "prompts/list"}
    assert set(cached["listen"]) == {"2026-07-28"}
    second = run()
    assert first == second == mcp_lines(data_dir, root, messages, len(messages), early_on=False)


def test_the_table_is_used_only_for_the_install_it_was_recorded_for(tmp_path, monkeypatch):
    table = json.loads(Path(early.TABLE).read_text(encoding="utf-8"))
    stale = tmp_path / "handshake.json"
    stale.write_text(json.dumps({**table, "fingerprint": "0" * 64}))
    monkeypatch.setattr(early, "TABLE", str(stale))
    assert early.load() is None
    # A folder with an `mcp` package but no installed distribution (a stray copy): no early answers at all.
    stray = tmp_path / "stray"
    (stray / "mcp").mkdir(parents=True)
    (stray / "mcp" / "__init__.py").write_text("")
    monkeypatch.setattr(sys, "path", [str(stray), *sys.path])
    assert early.distributions() is None
    # The SDK's own `mcp` console script in a bin folder before site-packages is not a package.
    scripts = tmp_path / "bin"
    scripts.mkdir()
    (scripts / "mcp").write_text("#!/bin/sh\n")
    monkeypatch.setattr(sys, "path", [str(scripts), *sys.path[1:]])
    assert early.distributions() is not None


def test_only_a_plain_mcp_argv_starts_the_early_answerer():
    from loopstate.cli.main import is_plain_mcp

    assert is_plain_mcp(["mcp"]) and is_plain_mcp(["mcp", "--root", "/x", "--log-level", "debug"])
    assert is_plain_mcp(["mcp", "--root=/x", "--log-level=error"])
    for argv in (["mcp", "--help"], ["mcp", "--root"], ["mcp", "--log-level", "loud"], ["mcp", "--rot", "/x"],
                 ["mcp", "extra"], ["serve"], ["mcp", "--root", "--log-level"]):
        assert not is_plain_mcp(argv), argv
    assert os.environ.get(early.DISABLE) != "0"  # the suite runs with early answers on, as hosts do


def loopstate_cli(data_dir: Path, cwd: Path, *args: str) -> None:
    done = subprocess.run([sys.executable, "-m", "loopstate.cli.main", *args], env=mcp_env(data_dir), cwd=cwd,
                          capture_output=True, timeout=120)
    assert done.returncode == 0, done.stderr.decode()[-2000:]


def test_the_stores_resources_list_is_answered_early_as_the_sdk_answers_it_and_a_broken_store_is_left_to_it(
        root, data_dir):
    """Claude Code counts the tools once resources/list is answered too: the store's list goes out before the
    SDK is loaded, byte for byte the SDK's; when it cannot be read, the SDK answers (with its error)."""
    loopstate_cli(data_dir, root, "run", "create", "--objective", "ship", "--done-gate", "tests pass", "--asset", "app")
    loopstate_cli(data_dir, root, "goals", "add", "release", "write the notes")
    opening = [request(0, "server/discover", CLAUDE_2026), request(1, "resources/list", CLAUDE_2026),
               request(2, "tools/list", CLAUDE_2026)]
    early_lines, stderr = mcp(data_dir, root, opening, early_on=True)
    assert early_lines == mcp(data_dir, root, opening, early_on=False)[0]
    assert "answered request(s) 0, 2, 1 before the SDK was loaded" in answered_early(stderr)
    [listed] = [json.loads(line)["result"]["resources"] for line in early_lines if json.loads(line)["id"] == 1]
    assert [r["name"].split()[0] for r in listed] == ["intent", "run", "goal"]

    runs = next((data_dir / "projects").iterdir()) / "streams"
    stream = next(runs.glob("run-*.jsonl"), None) or next(runs.glob("runs*.jsonl"))
    data = bytearray(stream.read_bytes())
    data[data.index(b'"objective":"ship"') + len(b'"objective":"s')] = ord("X")  # a broken chain: no list to give
    stream.write_bytes(bytes(data))
    early_lines, stderr = mcp(data_dir, root, opening, early_on=True)
    assert early_lines == mcp(data_dir, root, opening, early_on=False)[0]
    assert "answered request(s) 0, 2 before the SDK was loaded" in answered_early(stderr)
    assert b'"error"' in next(line for line in early_lines if json.loads(line)["id"] == 1)
