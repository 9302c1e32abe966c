"""A team project's hook beside a local project's: a fresh `loopstate hook` process per tool call.

    .venv/bin/python tests/bench/bench_team_hook.py [--rounds 30] [--claims 200]

Starts its own PostgreSQL cluster (tests/pg/pg_cluster.py), makes two projects with the same
claims: one on the local JSONL store (the default), one on the cluster through a committed
`.loopstate/store.json` (`loopstate init --store URL`). Then times, round by round and
interleaved, PreToolUse and an unchanged UserPromptSubmit in both, beside the floors a
team hook cannot go under: `python -c pass`, `python -c "import psycopg"` and a process
that imports psycopg and opens one connection to the same server (`connect`). Prints p50/p90
wall and p50 CPU per process, and the team hook's cost over the local one.
Not part of the test run (the file is not named test_*.py).
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).parent))
sys.path.insert(0, str(Path(__file__).resolve().parents[2]))

from bench_cli import bench_env, loopstate_command  # noqa: E402

from loopstate_protocol import intent as i  # noqa: E402

from loopstate.service import Service  # noqa: E402
from tests.pg.pg_cluster import Cluster, skip_reason  # noqa: E402


def payload(event: str, root: Path, session: str, **fields: object) -> bytes:
    base = {"session_id": session, "cwd": str(root), "hook_event_name": event, "transcript_path": None,
            "permission_mode": "default"}
    return json.dumps({**base, **fields}).encode()


def timed(argv: list[str], env: dict[str, str], cwd: str, stdin: bytes | None) -> tuple[float, float]:
    """Wall and CPU (user + sys) of one fresh process."""
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    start = time.perf_counter()
    done = subprocess.run(argv, env=env, cwd=cwd, input=stdin, stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    elapsed = time.perf_counter() - start
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    if done.returncode != 0 or (stdin is not None and b"systemMessage" in done.stdout):
        raise SystemExit(f"{' '.join(argv)} failed ({done.returncode}): {done.stdout.decode()} {done.stderr.decode()}")
    return elapsed, after.ru_utime + after.ru_stime - before.ru_utime - before.ru_stime


def main() -> None:
    options = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    options.add_argument("--rounds", type=int, default=30)
    options.add_argument("--claims", type=int, default=200)
    args = options.parse_args()
    reason = skip_reason()
    if reason:
        print(f"skipped: {reason}")
        return
    cluster = Cluster()
    try:
        url = cluster.new_database("hook")
        with tempfile.TemporaryDirectory(prefix="bench-team-hook-") as tmp:
            data_dir = Path(tmp) / "data"
            env = bench_env(data_dir)
            env.pop("LOOPSTATE_STORE", None)
            ls = loopstate_command()
            roots = {"local": Path(tmp) / "local", "team": Path(tmp) / "team"}
            for root in roots.values():
                root.mkdir()
            subprocess.run([*ls, "init", "--root", str(roots["team"]), "--store", url], env=env, check=True,
                           stdout=subprocess.DEVNULL)
            service = Service(data_dir=data_dir)
            for name, root in roots.items():
                started = service.execute(str(root), i.IntentTaskStart(label="bench"), f"{name}-0")
                task = started.events[0]["task_id"]
                for n in range(1, args.claims):
                    claim = i.ClaimInput(statement=f"claim {n}", role="user", epistemic_status="explicit", facets=["outcome"])
                    service.execute(str(root), i.IntentClaimAdd(task_id=task, actor="user", claim=claim), f"{name}-{n}")
            service.close() if hasattr(service, "close") else None
            hook = [*ls, "hook", "claude"]
            tool = {"tool_name": "Bash", "tool_input": {"command": "ls"}, "tool_use_id": "toolu_1"}
            for root in roots.values():
                timed([*hook, "SessionStart"], env, str(root), payload("SessionStart", root, "s", source="startup"))
            connect = f"import psycopg; psycopg.connect({url!r}, autocommit=True).close()"
            commands: dict[str, tuple[list[str], str, bytes | None]] = {
                "python -c pass": ([sys.executable, "-c", "pass"], tmp, None),
                'python -c "import psycopg"': ([sys.executable, "-c", "import psycopg"], tmp, None),
                "python: import psycopg, connect": ([sys.executable, "-c", connect], tmp, None),
            }
            for name, root in roots.items():
                commands[f"hook PreToolUse, {name}"] = ([*hook, "PreToolUse"], str(root), payload("PreToolUse", root, "s", **tool))
                commands[f"hook UserPromptSubmit (unchanged), {name}"] = (
                    [*hook, "UserPromptSubmit"], str(root), payload("UserPromptSubmit", root, "s", prompt="go on"))
            for argv, cwd, stdin in commands.values():  # warm: page cache, .pyc files
                timed(argv, env, cwd, stdin)
            walls: dict[str, list[float]] = {name: [] for name in commands}
            cpus: dict[str, list[float]] = {name: [] for name in commands}
            for _ in range(args.rounds):
                for name, (argv, cwd, stdin) in commands.items():
                    wall, cpu = timed(argv, env, cwd, stdin)
                    walls[name].append(wall)
                    cpus[name].append(cpu)
        print(f"{args.rounds} rounds, interleaved, {args.claims} claims in each project; load average "
              f"{'/'.join(f'{x:.1f}' for x in os.getloadavg())}\n")
        print(f"{'command':<46} {'p50 ms':>8} {'p90 ms':>8} {'CPU ms':>8}")
        p50 = {}
        for name in commands:
            samples = sorted(walls[name])
            p50[name] = statistics.median(samples)
            p90 = samples[min(len(samples) - 1, round(0.9 * (len(samples) - 1)))]
            print(f"{name:<46} {p50[name] * 1e3:8.1f} {p90 * 1e3:8.1f} {statistics.median(cpus[name]) * 1e3:8.1f}")
        for event in ("PreToolUse", "UserPromptSubmit (unchanged)"):
            team, local = p50[f"hook {event}, team"], p50[f"hook {event}, local"]
            print(f"{event}: team {team * 1e3:.1f} ms, local {local * 1e3:.1f} ms, "
                  f"+{(team - local) * 1e3:.1f} ms (import psycopg and connect alone: "
                  f"+{(p50['python: import psycopg, connect'] - p50['python -c pass']) * 1e3:.1f} ms over python)")
    finally:
        cluster.stop()


if __name__ == "__main__":
    main()
