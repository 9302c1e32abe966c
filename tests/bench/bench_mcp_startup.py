"""How soon `loopstate mcp` can serve a host's first turn: spawn to the `initialize` and `tools/list` answers.

Both hosts build their first model request without a server that is still
starting (Claude Code starts MCP servers in the background; Codex leaves a
"pending optional" server out of the turn), so what matters is the time from
exec to the answers of ``initialize`` and ``tools/list``. This spawns fresh
processes, round by round interleaved, of:

- ``loopstate mcp``: the venv's console script, as a host's config runs it;
- a bare ``MCPServer`` of the SDK with one tool (the SDK's own floor);
- ``python -c pass`` (the interpreter's floor: spawn to exit).

Each server gets the handshake the hosts send (``initialize`` written at
once after the spawn, then ``notifications/initialized`` and ``tools/list``
as soon as the answer is read) over its real stdin/stdout, and then its stdin
closed. Prints the median and the spread per target, and the ratios to the
bare SDK server. One untimed run of each first (a warm start: bytecode
compiled, files in the page cache).

Usage: python tests/bench/bench_mcp_startup.py [--rounds 15]
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

# What Claude Code 2.1 sends (Codex sends the same shape with its own clientInfo and capabilities).
INITIALIZE = {"jsonrpc": "2.0", "id": 0, "method": "initialize",
              "params": {"protocolVersion": "2025-06-18", "capabilities": {"roots": {}},
                         "clientInfo": {"name": "claude-code", "version": "2.1.332"}}}
INITIALIZED = {"jsonrpc": "2.0", "method": "notifications/initialized"}
TOOLS_LIST = {"jsonrpc": "2.0", "id": 1, "method": "tools/list"}


def line(message: dict) -> bytes:
    return (json.dumps(message) + "\n").encode()


def handshake(argv: list[str], env: dict[str, str], cwd: str) -> tuple[float, float]:
    """Seconds from spawn to the initialize answer and to the tools/list answer."""
    start = time.perf_counter()
    proc = subprocess.Popen(argv, stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL,
                            env=env, cwd=cwd)
    try:
        proc.stdin.write(line(INITIALIZE))
        proc.stdin.flush()
        answer = json.loads(proc.stdout.readline())
        initialized = time.perf_counter() - start
        assert answer.get("id") == 0 and "result" in answer, answer
        proc.stdin.write(line(INITIALIZED) + line(TOOLS_LIST))
        proc.stdin.flush()
        answer = json.loads(proc.stdout.readline())
        listed = time.perf_counter() - start
        assert answer.get("id") == 1 and answer["result"]["tools"], answer
        proc.stdin.close()
        proc.wait(timeout=30)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
    return initialized, listed


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
    args = parser.parse_args()

    with tempfile.TemporaryDirectory(prefix="bench-mcp-startup-") as tmp:
        project = Path(tmp, "project")
        project.mkdir()
        (project / ".git").mkdir()  # a project root for the CLI's discovery; the handshake never reads the store
        bare = Path(tmp, "bare_server.py")
        bare.write_text(BARE_SERVER)
        env = {**os.environ, "LOOPSTATE_DATA_DIR": str(Path(tmp, "data"))}
        env.pop("PYTHONDONTWRITEBYTECODE", None)
        servers = {
            "loopstate mcp": [args.loopstate, "mcp"],
            "bare MCPServer, one tool": [sys.executable, str(bare)],
        }
        got: dict[str, tuple[list[float], list[float]]] = {name: ([], []) for name in servers}
        floor: list[float] = []
        for name, argv in servers.items():  # warm: bytecode written, pages cached
            handshake(argv, env, str(project))
        run_to_exit([sys.executable, "-c", "pass"], env, str(project))
        for _ in range(args.rounds):
            for name, argv in servers.items():
                initialized, listed = handshake(argv, env, str(project))
                got[name][0].append(initialized)
                got[name][1].append(listed)
            floor.append(run_to_exit([sys.executable, "-c", "pass"], env, str(project)))

    load = os.getloadavg()
    print(f"spawn to answer, {args.rounds} rounds, median (min, max); load average {load[0]:.2f} {load[1]:.2f} {load[2]:.2f}")
    bare_init = statistics.median(got["bare MCPServer, one tool"][0])
    bare_list = statistics.median(got["bare MCPServer, one tool"][1])
    for name, (inits, lists) in got.items():
        print(f"{name:26} initialize {figures(inits)}  {statistics.median(inits) / bare_init:4.2f}x bare")
        print(f"{'':26} tools/list {figures(lists)}  {statistics.median(lists) / bare_list:4.2f}x bare")
    print(f"{'python -c pass':26} exit       {figures(floor)}")


if __name__ == "__main__":
    main()
