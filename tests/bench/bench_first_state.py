"""An editor's first state from a fresh `loopstate serve`, beside a bare pygls server's `initialize`.

    .venv/bin/python tests/bench/bench_first_state.py [--rounds 15] [--events 100]

Each round, in alternating order, spawns in a fresh process:

- the reference: a bare pygls `LanguageServer` on stdio (tests/bench/bench_rpc.py's echo
  server), timed from spawn to the answer of `initialize`;
- `loopstate serve`, timed from spawn to the answer of `initialize`, and to the answer of
  what an editor asks first (what the VS Code extension and the Neovim plugin ask, through the
  sidecar alone): `project.root`, then subscriptions to `project/runs`, `project/goals` and
  `intent/snapshot`, each answered with its snapshot;

against a project of ``--events`` events (intent claims, a goal's todos, a run). It prints
p50 and p99 of each and the ratios the issue sets its target by (the first state within 1.5x
of the bare server's `initialize`), and `python -c pass` / `python -c "import msgspec"` as
process floors. Not part of the test run (the file is not named test_*.py).
"""

from __future__ import annotations

import argparse
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from loopstate_protocol.client import LoopstateClient

HERE = Path(__file__).resolve().parent
ECHO = [sys.executable, str(HERE / "bench_rpc.py"), "--echo-server"]
SERVE = [sys.executable, "-m", "loopstate.cli.main", "serve"]
CLI = [sys.executable, "-m", "loopstate.cli.main"]


def fill(root: Path, env: dict[str, str], events: int) -> None:
    def cli(*args: str) -> str:
        return subprocess.run([*CLI, *args, "--root", str(root)], env=env, check=True, capture_output=True,
                              text=True).stdout

    cli("intent", "start", "--claim", "outcome:First state fast")
    cli("run", "create", "--objective", "bench", "--done-gate", "tests pass", "--asset", "app")
    made = 3
    while made < events:
        cli("goals", "add", "bench", f"todo {made}")
        made += 1


def timed_start(command: list[str], env: dict[str, str], root: str | None) -> tuple[float, float | None]:
    began = time.perf_counter()
    client = LoopstateClient(command, env=env, stderr=subprocess.DEVNULL).start()
    client.initialize()
    initialized = time.perf_counter() - began
    first = None
    if root is not None:
        client.query(root, {"kind": "project.root"})
        for topic in ("project/runs", "project/goals", "intent/snapshot"):
            client.subscribe(root, topic)
        first = time.perf_counter() - began
    client.close()
    return initialized, first


def floor(code: str, rounds: int) -> float:
    times = []
    for _ in range(rounds):
        began = time.perf_counter()
        subprocess.run([sys.executable, "-c", code], check=True)
        times.append(time.perf_counter() - began)
    return statistics.median(times)


def p99(values: list[float]) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(len(ordered) * 0.99))]


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--rounds", type=int, default=15)
    parser.add_argument("--events", type=int, default=100)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory(dir="/tmp") as tmp:
        root = Path(tmp) / "proj"
        root.mkdir()
        env = {**os.environ, "LOOPSTATE_DATA_DIR": str(Path(tmp) / "data")}
        fill(root, env, args.events)
        bare, init, first = [], [], []
        for n in range(args.rounds):
            order = ("bare", "loopstate") if n % 2 == 0 else ("loopstate", "bare")
            for which in order:
                if which == "bare":
                    bare.append(timed_start(ECHO, env, None)[0])
                else:
                    a, b = timed_start(SERVE, env, str(root))
                    init.append(a)
                    first.append(b or 0.0)
        base = statistics.median(bare)
        print(f"process floors: python -c pass {floor('pass', 5) * 1e3:.0f} ms, "
              f"python -c 'import msgspec' {floor('import msgspec', 5) * 1e3:.0f} ms")
        print(f"{'':<44} {'p50':>9} {'p99':>9} {'p50 vs bare':>12}")
        for label, values in (("bare pygls: spawn to initialize", bare), ("loopstate serve: spawn to initialize", init),
                              ("loopstate serve: spawn to first state", first)):
            print(f"{label:<44} {statistics.median(values) * 1e3:>7.0f}ms {p99(values) * 1e3:>7.0f}ms "
                  f"{statistics.median(values) / base:>11.2f}x")
        ratio = statistics.median(first) / base
        print(f"first state within 1.5x of a bare pygls initialize: {'met' if ratio <= 1.5 else 'NOT met'} ({ratio:.2f}x)")


if __name__ == "__main__":
    main()
