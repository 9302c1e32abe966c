"""How soon `loopstate mcp` can serve a host's first turn: spawn to the `initialize` and `tools/list` answers.

Both hosts build their first model request without a server that is still
starting (Claude Code starts MCP servers in the background; Codex leaves a
"pending optional" server out of the turn), so what matters is the time from
exec to the answers of ``initialize`` and ``tools/list``. This spawns fresh
processes, round by round interleaved, of:

- ``loopstate mcp``: the venv's console script, as a host's config runs it;
- a bare ``MCPServer`` of the SDK with one tool (the SDK's own floor);
- ``python -c pass`` (the interpreter's floor: spawn to exit).

Each server gets each host's own opening over its real stdin/stdout, every
request sent when that host sends it: Codex 0.171's ``initialize`` at once
after the spawn, then ``notifications/initialized`` and ``tools/list``;
Claude Code 2.1.332's 2026-07-28 opening (a ``server/discover`` probe, a
``subscriptions/listen`` whose acknowledgement it waits for, ``server/discover``
again, then ``prompts/list``, ``resources/list`` and ``tools/list``). Then the
process is stopped. Prints the median and the spread per target, and the ratios to the
bare SDK server. One untimed run of each first (a warm start: bytecode
compiled, files in the page cache).

With ``--baseline TREE`` (a checkout of another commit, e.g. from
``git archive``), that tree's `loopstate mcp` is timed in the same rounds
(``python -m loopstate.cli.main mcp`` with its ``server`` and ``protocol``
folders first on PYTHONPATH).

After the handshake each server also gets one ``tools/call`` (``intent_task``
start for loopstate, ``echo`` for the bare server): the first answer only the
SDK can give, so the time until the SDK serves is printed too.

Usage: python tests/bench/bench_mcp_startup.py [--rounds 15] [--baseline TREE]
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

BARE_SERVER = '''
from mcp.server import MCPServer

server = MCPServer("bare")


@server.tool()
def echo(text: str) -> str:
    """Echo the text."""
    return text


server.run()
'''

# Each host's own opening, recorded from the real CLIs (tests/hosts' pins) through a tap on the server's stdio.
CODEX = {"protocolVersion": "2025-06-18",
         "capabilities": {"experimental": {"codex/auth-change": {}}, "elicitation": {"form": {}, "url": {}}},
         "clientInfo": {"name": "codex-mcp-client", "title": "Codex", "version": "0.171.0"}}
ENVELOPE = {"_meta": {  # Claude Code 2.1.332 speaks 2026-07-28: no initialize, this on every request
    "io.modelcontextprotocol/protocolVersion": "2026-07-28",
    "io.modelcontextprotocol/clientInfo": {"name": "claude-code", "title": "Claude Code", "version": "2.1.332",
                                           "description": "Anthropic's agentic coding tool",
                                           "websiteUrl": "https://claude.com/claude-code"},
    "io.modelcontextprotocol/clientCapabilities": {"roots": {"listChanged": True}, "elicitation": {"form": {}, "url": {}}}}}
LISTEN = {**ENVELOPE, "notifications": {"toolsListChanged": True, "promptsListChanged": True, "resourcesListChanged": True}}
CALLS = {"loopstate": {"name": "intent_task", "arguments": {"action": "start", "label": "bench"}},
         "bare": {"name": "echo", "arguments": {"text": "hi"}}}
HOSTS = ("codex", "claude")
FIRST = {"codex": "initialize", "claude": "server/discover"}


def line(message: dict) -> bytes:
    return (json.dumps(message) + "\n").encode()


def request(request_id, method: str, params: dict | None = None) -> bytes:
    return line({"jsonrpc": "2.0", "id": request_id, "method": method, **({} if params is None else {"params": params})})


def until(proc: subprocess.Popen, done) -> dict:
    """The first message on stdout that ``done`` accepts (what comes before it is the host's to ignore here)."""
    while True:
        message = json.loads(proc.stdout.readline())
        if done(message):
            return message


def handshake(argv: list[str], env: dict[str, str], cwd: str, call: dict, host: str) -> tuple[float, float, float]:
    """Seconds from spawn to the first answer (initialize, or Claude Code's server/discover probe), to the
    tools/list answer and to a first tools/call answer, each request sent when the host would send it."""
    start = time.perf_counter()
    proc = subprocess.Popen(argv, stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL,
                            env=env, cwd=cwd)

    def send(*lines: bytes) -> None:
        proc.stdin.write(b"".join(lines))
        proc.stdin.flush()

    def answer_to(request_id):
        return until(proc, lambda m: m.get("id") == request_id and "method" not in m)

    try:
        if host == "codex":
            send(request(0, "initialize", CODEX))
            assert "result" in answer_to(0)
            first = time.perf_counter() - start
            send(line({"jsonrpc": "2.0", "method": "notifications/initialized"}),
                 request(1, "tools/list", {"_meta": {"progressToken": 0}}))
            assert answer_to(1)["result"]["tools"]
            listed = time.perf_counter() - start
            send(request(2, "tools/call", call))
        else:
            send(request("server-discover-probe-1", "server/discover", ENVELOPE))
            assert "result" in answer_to("server-discover-probe-1")
            first = time.perf_counter() - start
            send(request("listen:0", "subscriptions/listen", LISTEN))  # Claude Code waits for its acknowledgement
            until(proc, lambda m: m.get("method") == "notifications/subscriptions/acknowledged")
            send(request(0, "server/discover", ENVELOPE))
            answer_to(0)
            send(request(1, "prompts/list", ENVELOPE), request(3, "resources/list", ENVELOPE),
                 request(4, "tools/list", ENVELOPE))
            assert answer_to(4)["result"]["tools"]
            listed = time.perf_counter() - start
            send(request(2, "tools/call", {**ENVELOPE, **call}))
        answer_to(2)
        called = time.perf_counter() - start
    finally:
        proc.kill()  # a listen stream never ends on its own
        proc.wait()
    return first, listed, called


def run_to_exit(argv: list[str], env: dict[str, str], cwd: str) -> float:
    start = time.perf_counter()
    subprocess.run(argv, stdin=subprocess.DEVNULL, env=env, cwd=cwd, check=True)
    return time.perf_counter() - start


def figures(samples: list[float]) -> str:
    ms = sorted(s * 1000 for s in samples)
    return f"{statistics.median(ms):7.1f} ms  (min {ms[0]:6.1f}, max {ms[-1]:6.1f})"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=15)
    parser.add_argument("--loopstate", default=str(Path(sys.executable).with_name("loopstate")),
                        help="the loopstate script to run (default: this venv's)")
    parser.add_argument("--baseline", metavar="TREE", help="also time this checkout's loopstate mcp")
    args = parser.parse_args()

    with tempfile.TemporaryDirectory(prefix="bench-mcp-startup-") as tmp:
        project = Path(tmp, "project")
        project.mkdir()
        (project / ".git").mkdir()  # a project root for the CLI's discovery; the handshake never reads the store
        bare = Path(tmp, "bare_server.py")
        bare.write_text(BARE_SERVER)
        env = {**os.environ, "LOOPSTATE_DATA_DIR": str(Path(tmp, "data")), "XDG_CACHE_HOME": str(Path(tmp, "cache"))}
        env.pop("PYTHONDONTWRITEBYTECODE", None)
        servers = {"loopstate mcp": ([args.loopstate, "mcp"], env, CALLS["loopstate"])}
        if args.baseline:
            base = Path(args.baseline).resolve()
            servers["loopstate mcp (baseline)"] = (
                [sys.executable, "-m", "loopstate.cli.main", "mcp"],
                {**env, "PYTHONPATH": f"{base / 'server'}{os.pathsep}{base / 'protocol'}"}, CALLS["loopstate"])
        servers["bare MCPServer, one tool"] = ([sys.executable, str(bare)], env, CALLS["bare"])
        got = {(name, host): ([], [], []) for name in servers for host in HOSTS}
        floor: list[float] = []
        for argv, child_env, call in servers.values():  # warm: bytecode written, pages cached
            handshake(argv, child_env, str(project), call, "codex")
        run_to_exit([sys.executable, "-c", "pass"], env, str(project))
        for _ in range(args.rounds):
            for host in HOSTS:
                for name, (argv, child_env, call) in servers.items():
                    for samples, value in zip(got[name, host], handshake(argv, child_env, str(project), call, host)):
                        samples.append(value)
            floor.append(run_to_exit([sys.executable, "-c", "pass"], env, str(project)))

    load = os.getloadavg()
    print(f"spawn to answer, {args.rounds} rounds, median (min, max); load average {load[0]:.2f} {load[1]:.2f} {load[2]:.2f}")
    for host in HOSTS:
        print(f"\n{host}'s opening ({'Codex 0.171, the initialize handshake' if host == 'codex' else 'Claude Code 2.1.332, 2026-07-28'})")
        bare = [statistics.median(samples) for samples in got["bare MCPServer, one tool", host]]
        for name in servers:
            for n, what in enumerate((FIRST[host], "tools/list", "tools/call")):
                label = name if n == 0 else ""
                samples = got[name, host][n]
                print(f"{label:26} {what:15} {figures(samples)}  {statistics.median(samples) / bare[n]:4.2f}x bare")
    print(f"\n{'python -c pass':26} {'exit':15} {figures(floor)}")


if __name__ == "__main__":
    main()
