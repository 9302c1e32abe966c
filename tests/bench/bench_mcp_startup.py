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

# What Claude Code 2.1 sends (Codex sends the same shape with its own clientInfo and capabilities).
INITIALIZE = {"jsonrpc": "2.0", "id": 0, "method": "initialize",
              "params": {"protocolVersion": "2025-06-18", "capabilities": {"roots": {}},
                         "clientInfo": {"name": "claude-code", "version": "2.1.332"}}}
INITIALIZED = {"jsonrpc": "2.0", "method": "notifications/initialized"}
TOOLS_LIST = {"jsonrpc": "2.0", "id": 1, "method": "tools/list"}
CALLS = {"loopstate": {"name": "intent_task", "arguments": {"action": "start", "label": "bench"}},
         "bare": {"name": "echo", "arguments": {"text": "hi"}}}


def line(message: dict) -> bytes:
    return (json.dumps(message) + "\n").encode()


def answer(proc: subprocess.Popen) -> dict:
    """The next answer on stdout; the server's roots/list (the handshake offers roots, as Claude Code's) answered."""
    while True:
        message = json.loads(proc.stdout.readline())
        if message.get("method") != "roots/list":
            return message
        proc.stdin.write(line({"jsonrpc": "2.0", "id": message["id"], "result": {"roots": []}}))
        proc.stdin.flush()


def handshake(argv: list[str], env: dict[str, str], cwd: str, call: dict) -> tuple[float, float, float]:
    """Seconds from spawn to the initialize answer, to the tools/list answer and to a first tools/call answer."""
    start = time.perf_counter()
    proc = subprocess.Popen(argv, stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL,
                            env=env, cwd=cwd)
    try:
        proc.stdin.write(line(INITIALIZE))
        proc.stdin.flush()
        got = answer(proc)
        initialized = time.perf_counter() - start
        assert got.get("id") == 0 and "result" in got, got
        proc.stdin.write(line(INITIALIZED) + line(TOOLS_LIST))
        proc.stdin.flush()
        got = answer(proc)
        listed = time.perf_counter() - start
        assert got.get("id") == 1 and got["result"]["tools"], got
        proc.stdin.write(line({"jsonrpc": "2.0", "id": 2, "method": "tools/call", "params": call}))
        proc.stdin.flush()
        got = answer(proc)
        called = time.perf_counter() - start
        assert got.get("id") == 2 and not got["result"].get("isError"), got
        proc.stdin.close()
        proc.wait(timeout=30)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
    return initialized, listed, called


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
        got: dict[str, tuple[list[float], list[float], list[float]]] = {name: ([], [], []) for name in servers}
        floor: list[float] = []
        for name, (argv, child_env, call) in servers.items():  # warm: bytecode written, pages cached
            handshake(argv, child_env, str(project), call)
        run_to_exit([sys.executable, "-c", "pass"], env, str(project))
        for _ in range(args.rounds):
            for name, (argv, child_env, call) in servers.items():
                for samples, value in zip(got[name], handshake(argv, child_env, str(project), call)):
                    samples.append(value)
            floor.append(run_to_exit([sys.executable, "-c", "pass"], env, str(project)))

    load = os.getloadavg()
    print(f"spawn to answer, {args.rounds} rounds, median (min, max); load average {load[0]:.2f} {load[1]:.2f} {load[2]:.2f}")
    bare = [statistics.median(samples) for samples in got["bare MCPServer, one tool"]]
    for name, samples in got.items():
        for n, what in enumerate(("initialize", "tools/list", "tools/call")):
            label = name if n == 0 else ""
            print(f"{label:26} {what} {figures(samples[n])}  {statistics.median(samples[n]) / bare[n]:4.2f}x bare")
    print(f"{'python -c pass':26} exit       {figures(floor)}")


if __name__ == "__main__":
    main()
