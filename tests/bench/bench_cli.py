"""CLI cold start: what a hook pays on every prompt, beside Python's own floor, in one run.

Builds a throwaway store whose intent ledger, goal and run each hold about
EVENTS events (default 10,000), then times fresh processes of the installed
`loopstate` script in the same venv, interleaved round by round with two
references: `python -c pass` (the interpreter alone) and
`python -c "import msgspec"` (the library every read needs). Prints p50/p90
wall per command, its ratio to the msgspec reference, and, from one extra run
under `-X importtime`, how much of it is spent importing.

CPU time (user + sys) of each process is printed beside its wall: on a loaded machine the wall
is mostly waiting for a CPU, the CPU time is not.

Usage: python tests/bench/bench_cli.py [--events 100,10000] [--rounds R] [--baseline TREE]
"""

from __future__ import annotations

import argparse
import datetime as dt
import os
import resource
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from loopstate_protocol import goals as g
from loopstate_protocol import intent as i
from loopstate_protocol import runs as r

from loopstate.core.clock import format_time
from loopstate.service import Service

OWNER = {"harness": "manual", "actor": "bench", "session_id": "bench"}


class SteppingClock:
    """Service time that moves four minutes at each step: past every 300-second lease's renewal point."""

    def __init__(self, start: dt.datetime) -> None:
        self.now = start

    def __call__(self) -> dt.datetime:
        return self.now

    def step(self) -> None:
        self.now += dt.timedelta(minutes=4)


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
    # A long run's log is mostly lease renewals: a clock that moves past each renewal's due time
    # makes every heartbeat one event.
    clock = SteppingClock(service.clock())
    service.clock = clock
    expires = format_time(clock.now + dt.timedelta(days=365))
    grant = "00000000-0000-4000-8000-00000000000a"
    service.execute(root, r.AuthorityGrant(
        grant_id=grant, level="attended", actor="bench",
        scope={"assets": ["app"], "actions": ["local_write"], "destinations": ["repository"], "exclusions": []},
        risks_shown=["bench"], confirmation_text="bench", expires_at=expires), "r-grant")
    run_id = "00000000-0000-4000-8000-00000000000b"
    service.execute(root, r.Create(
        run_id=run_id, objective="bench", done_gate=["bench"], authority_grant_id=grant, actor=OWNER,
        asset={"name": "app", "root": ".", "track": "code", "boundaries": ["repository-local files"]},
        budgets={"max_duration_seconds": 365 * 86400, "max_mutations": 10, "max_external_actions": 0,
                 "max_cost_usd": None}), "r-create")
    lease = service.execute(root, r.Acquire(run_id=run_id, owner=OWNER), "r-acquire").events[-1]["projection"]["lease"]
    n = 0
    while service.query(root, r.Status(run_id=run_id)).sequence < events:
        clock.step()
        n += 1
        service.execute(root, r.Heartbeat(run_id=run_id, lease_id=lease["lease_id"], generation=lease["generation"]),
                        f"r{n}")
    return {"run_id": run_id, "task_id": task}


def bench_env(data_dir: Path) -> dict[str, str]:
    """The environment of every timed process: this one's, minus what would time something else.

    PYTHONDONTWRITEBYTECODE is dropped: with it set, every fresh process compiles
    each loopstate module from source (the editable install has no .pyc until a
    process writes one), while msgspec, the reference, loads the bytecode pip
    compiled at install. An installed loopstate has its bytecode too, so the
    warm-up run here writes it and every timed run reads it, as the reference does.
    """
    env = {**os.environ, "LOOPSTATE_DATA_DIR": str(data_dir)}
    for name in ("PYTHONPROFILEIMPORTTIME", "PYTHONDONTWRITEBYTECODE", "LOOPSTATE_RUN", "LOOPSTATE_GOAL"):
        env.pop(name, None)
    return env


def loopstate_command() -> list[str]:
    script = Path(sys.executable).with_name("loopstate")
    return [str(script)] if script.exists() else [sys.executable, "-m", "loopstate.cli.main"]


def wall(argv: list[str], env: dict[str, str], cwd: str) -> tuple[float, float]:
    """Wall time of one fresh process, and its CPU time (user + sys: what a loaded machine does not inflate)."""
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    start = time.perf_counter()
    done = subprocess.run(argv, env=env, cwd=cwd, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    elapsed = time.perf_counter() - start
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    if done.returncode != 0:
        raise SystemExit(f"{' '.join(argv)} failed ({done.returncode}): {done.stderr.decode()}")
    return elapsed, after.ru_utime + after.ru_stime - before.ru_utime - before.ru_stime


def modules_of(argv: list[str], env: dict[str, str], cwd: str) -> list[str]:
    """The modules a loopstate command imports beyond the interpreter's own start."""
    probe = ("import sys; base = set(sys.modules)\n"
             "from loopstate.cli.main import main  # as the console script does\n"
             "try:\n    main()\n"
             "except SystemExit:\n    pass\n"
             "print(' '.join(sorted(m for m in set(sys.modules) - base if '.' not in m or m.split('.')[0] in "
             "('loopstate', 'loopstate_protocol', 'msgspec'))), file=sys.stderr)")
    done = subprocess.run([sys.executable, "-c", probe, *argv[1:]], env=env, cwd=cwd, stdout=subprocess.DEVNULL,
                          stderr=subprocess.PIPE, text=True, check=True)
    return done.stderr.split()


def reads(ls: list[str], ids: dict[str, str], label: str) -> dict[str, list[str]]:
    return {
        f"intent show{label}": [*ls, "intent", "show"],
        f"intent hook-context{label}": [*ls, "intent", "hook-context", ids["task_id"]],
        f"goals board bench{label}": [*ls, "goals", "board", "bench"],
        f"run status RUN{label}": [*ls, "run", "status", ids["run_id"]],
        f"run list{label}": [*ls, "run", "list"],
    }


def main() -> None:
    options = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    options.add_argument("--events", default="100,10000",
                         help="comma-separated store sizes, one project each (default 100,10000)")
    options.add_argument("--rounds", type=int, default=30)
    options.add_argument("--baseline", metavar="TREE",
                         help="also time the same commands with an older source tree's server/ and protocol/ "
                              "first on PYTHONPATH (e.g. a `git archive` of an earlier commit), in the same rounds")
    args = options.parse_args()
    sizes = [int(n) for n in args.events.split(",")]
    ls = loopstate_command()
    with tempfile.TemporaryDirectory(prefix="bench-cli-") as tmp:
        data_dir = Path(tmp) / "data"
        env = bench_env(data_dir)
        trees = {"": env}
        if args.baseline:
            base = Path(args.baseline).resolve()
            trees[" (baseline)"] = {**env, "PYTHONPATH": f"{base / 'server'}{os.pathsep}{base / 'protocol'}"}
        commands: dict[str, tuple[list[str], str, dict[str, str]]] = {  # name -> (argv, cwd, env)
            "python -c pass": ([sys.executable, "-c", "pass"], tmp, env),
            'python -c "import msgspec"': ([sys.executable, "-c", "import msgspec"], tmp, env),
        }
        # An older tree runs as `python -m loopstate.cli.main`: the venv's script names this tree's entry point.
        entry = {tag: ls if not tag else [sys.executable, "-m", "loopstate.cli.main"] for tag in trees}
        for tag, tree_env in trees.items():
            commands[f"loopstate --version{tag}"] = ([*entry[tag], "--version"], tmp, tree_env)
        built = {}
        for size in sizes:
            root = Path(tmp) / f"project-{size}"
            root.mkdir()
            started = time.perf_counter()
            built[size] = (root, build(Service(data_dir=data_dir), str(root), size))
            print(f"store: {size} events each in intent, goals.bench and one run's stream "
                  f"(built in {time.perf_counter() - started:.1f} s)")
        for size, (root, ids) in built.items():
            for tag, tree_env in trees.items():
                for name, argv in reads(entry[tag], ids, f" @{size}{tag}").items():
                    commands[f"loopstate {name}"] = (argv, str(root), tree_env)
        # Beside each read of the smallest store, a process that only imports what that read
        # imports: the rest of its wall is work (most of which grows with history).
        smallest, ids = built[sizes[0]]
        for name, argv in reads(ls, ids, "").items():
            imports = "import " + ", ".join(modules_of(argv, env, str(smallest)))
            commands[f"  {name}: its imports only"] = ([sys.executable, "-c", imports], tmp, env)
        for argv, cwd, run_env in commands.values():  # warm the page cache and .pyc files: all figures are warm starts
            wall(argv, run_env, cwd)
        times: dict[str, list[float]] = {name: [] for name in commands}
        cpus: dict[str, list[float]] = {name: [] for name in commands}
        for _ in range(args.rounds):
            for name, (argv, cwd, run_env) in commands.items():
                elapsed, cpu = wall(argv, run_env, cwd)
                times[name].append(elapsed)
                cpus[name].append(cpu)
        reference = statistics.median(times['python -c "import msgspec"'])
        cpu_reference = statistics.median(cpus['python -c "import msgspec"'])
        print(f"\n{args.rounds} rounds, interleaved; wall and CPU per fresh process, run from the project root; "
              f"load average {os.getloadavg()[0]:.2f}\n")
        print(f"{'command':<48} {'p50 ms':>8} {'p99 ms':>8} {'x msgspec':>10} {'CPU p50':>8} {'CPU x msgspec':>14}")
        verdicts = []
        for name in commands:
            samples = sorted(times[name])
            p50 = statistics.median(samples)
            p99 = samples[min(len(samples) - 1, round(0.99 * (len(samples) - 1)))]
            cpu = statistics.median(cpus[name])
            print(f"{name:<48} {p50 * 1000:>8.1f} {p99 * 1000:>8.1f} {p50 / reference:>10.2f} {cpu * 1000:>8.1f} "
                  f"{cpu / cpu_reference:>14.2f}")
            if name.startswith("loopstate ") and name.endswith(f"@{sizes[0]}"):
                verdicts.append((name, p50, p50 / reference, cpu / cpu_reference))
        print(f"\nverdict (target: each read at {sizes[0]} events within 2x `import msgspec` and under 100 ms):")
        for name, p50, ratio, cpu_ratio in verdicts:
            met = ratio <= 2 and p50 < 0.1
            print(f"  {name}: {ratio:.2f}x wall, {p50 * 1000:.0f} ms, {cpu_ratio:.2f}x CPU: "
                  f"{'met' if met else 'NOT MET' if cpu_ratio > 2 else 'not met in wall (CPU within 2x: load)'}")


if __name__ == "__main__":
    main()
