"""CLI cold start: what a hook pays on every prompt, beside Python's own floor, in one run.

Builds a throwaway store whose intent ledger, goal and run each hold about
EVENTS events (default 10,000), then times fresh processes of the installed
`loopstate` script in the same venv, interleaved round by round with two
references: `python -c pass` (the interpreter alone) and
`python -c "import msgspec"` (the library every read needs). Prints p50/p90
wall per command, its ratio to the msgspec reference, and, from one extra run
under `-X importtime`, how much of it is spent importing.

Usage: python tests/bench/bench_cli.py [--events N] [--rounds R]
"""

from __future__ import annotations

import argparse
import datetime as dt
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from loopstate_protocol import goals as g
from loopstate_protocol import intent as i
from loopstate_protocol import runs as r

from loopstate.service import Service

OWNER = {"harness": "manual", "actor": "bench", "session_id": "bench"}


def build(service: Service, root: str, events: int) -> dict[str, str]:
    """An intent ledger, a goal and a run of about ``events`` events each; returns the ids the reads need."""
    started = service.execute(root, i.IntentTaskStart(label="bench"), "i0")
    task = started.events[0]["task_id"]
    for n in range(1, events):
        claim = i.ClaimInput(statement=f"claim {n}", role="user", epistemic_status="explicit", facets=["outcome"])
        service.execute(root, i.IntentClaimAdd(task_id=task, actor="user", claim=claim), f"i{n}")
    for n in range(events):
        number = n // 3 + 1
        command = (g.AddTodo(goal_id="bench", todo_id=f"T{number}", title=f"task {number}", priority="P1"),
                   g.ClaimTodo(goal_id="bench", todo_id=f"T{number}", claimed_by="codex"),
                   g.CompleteTodo(goal_id="bench", todo_id=f"T{number}", rationale="done"))[n % 3]
        service.execute(root, command, f"g{n}")
    expires = (dt.datetime.now(dt.timezone.utc) + dt.timedelta(days=1)).strftime("%Y-%m-%dT%H:%M:%SZ")
    grant = "00000000-0000-4000-8000-00000000000a"
    service.execute(root, r.AuthorityGrant(
        grant_id=grant, level="attended", actor="bench",
        scope={"assets": ["app"], "actions": ["local_write"], "destinations": ["repository"], "exclusions": []},
        risks_shown=["bench"], confirmation_text="bench", expires_at=expires), "r-grant")
    run_id = "00000000-0000-4000-8000-00000000000b"
    service.execute(root, r.Create(
        run_id=run_id, objective="bench", done_gate=["bench"], authority_grant_id=grant, actor=OWNER,
        asset={"name": "app", "root": ".", "track": "code", "boundaries": ["repository-local files"]},
        budgets={"max_duration_seconds": 86400, "max_mutations": events * 2, "max_external_actions": 0,
                 "max_cost_usd": None}), "r-create")
    lease = service.execute(root, r.Acquire(run_id=run_id, owner=OWNER), "r-acquire").events[-1]["projection"]["lease"]
    head = service.query(root, r.Status(run_id=run_id)).sequence
    for n in range(events - head):
        service.execute(root, r.IssueOpen(run_id=run_id, lease_id=lease["lease_id"], generation=lease["generation"],
                                          title=f"issue {n}", severity="low", blocking=False), f"r{n}")
    return {"run_id": run_id, "task_id": task}


def loopstate_command() -> list[str]:
    script = Path(sys.executable).with_name("loopstate")
    return [str(script)] if script.exists() else [sys.executable, "-m", "loopstate.cli.main"]


def wall(argv: list[str], env: dict[str, str], cwd: str) -> float:
    start = time.perf_counter()
    done = subprocess.run(argv, env=env, cwd=cwd, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    elapsed = time.perf_counter() - start
    if done.returncode != 0:
        raise SystemExit(f"{' '.join(argv)} failed ({done.returncode}): {done.stderr.decode()}")
    return elapsed


def import_ms(argv: list[str], env: dict[str, str], cwd: str) -> float:
    """Milliseconds spent importing, from -X importtime (the sum over top-level imports)."""
    done = subprocess.run(argv, env={**env, "PYTHONPROFILEIMPORTTIME": "1"}, cwd=cwd,
                          stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
    total = 0
    for line in done.stderr.splitlines():
        if line.startswith("import time:") and "|" in line:
            _, cumulative, name = line.split("|")
            if not name[1:].startswith(" ") and cumulative.strip().isdigit():
                total += int(cumulative)
    return total / 1000


def main() -> None:
    options = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    options.add_argument("--events", type=int, default=10_000)
    options.add_argument("--rounds", type=int, default=30)
    args = options.parse_args()
    with tempfile.TemporaryDirectory(prefix="bench-cli-") as tmp:
        data_dir, root = Path(tmp) / "data", Path(tmp) / "project"
        root.mkdir()
        started = time.perf_counter()
        ids = build(Service(data_dir=data_dir), str(root), args.events)
        print(f"store: {args.events} events each in intent, goals.bench and the run's stream "
              f"(built in {time.perf_counter() - started:.1f} s)")
        env = {**os.environ, "LOOPSTATE_DATA_DIR": str(data_dir)}
        env.pop("PYTHONPROFILEIMPORTTIME", None)
        ls = loopstate_command()
        commands = {
            "python -c pass": [sys.executable, "-c", "pass"],
            'python -c "import msgspec"': [sys.executable, "-c", "import msgspec"],
            "loopstate --version": [*ls, "--version"],
            "loopstate intent show": [*ls, "intent", "show"],
            "loopstate intent hook-context": [*ls, "intent", "hook-context", ids["task_id"]],
            "loopstate goals board bench": [*ls, "goals", "board", "bench"],
            "loopstate run status RUN": [*ls, "run", "status", ids["run_id"]],
        }
        for argv in commands.values():  # warm the page cache and .pyc files: every figure is a warm start
            wall(argv, env, str(root))
        times: dict[str, list[float]] = {name: [] for name in commands}
        for _ in range(args.rounds):
            for name, argv in commands.items():
                times[name].append(wall(argv, env, str(root)))
        reference = statistics.median(times['python -c "import msgspec"'])
        print(f"{args.rounds} rounds, interleaved; wall per fresh process (cwd = the project root)\n")
        print(f"{'command':<32} {'p50 ms':>8} {'p90 ms':>8} {'x msgspec':>10} {'imports ms':>11}")
        for name, argv in commands.items():
            samples = sorted(times[name])
            p50 = statistics.median(samples)
            p90 = samples[min(len(samples) - 1, round(0.9 * (len(samples) - 1)))]
            print(f"{name:<32} {p50 * 1000:>8.1f} {p90 * 1000:>8.1f} {p50 / reference:>10.2f} "
                  f"{import_ms(argv, env, str(root)):>11.1f}")


if __name__ == "__main__":
    main()
