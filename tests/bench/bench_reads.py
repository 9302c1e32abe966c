"""Cold reads with and without projection snapshots, each beside the same command at 100 events.

    .venv/bin/python tests/bench/bench_reads.py [--sizes 100,10000,100000] [--repeat 3]

For each size it builds one project with the shape issue 17 calls "a year of
history": an intent ledger of that many events spread over tasks of 50 events
each (2,000 tasks at 100k: a start, one claim, then 48 claims each superseding
the one before, so most claims are superseded and each task has one active), a
goal stream of that many events (todos added, claimed and completed: nearly
all completed) and a run of that many events (lease renewals, what a long
run's log is mostly), through
the domains' own ``decide`` and a real Ledger (events sealed and appended by
group commit, a thousand per write+fsync, so a 100k store builds in seconds).
Then it times the real CLI in a fresh process, each read asking about one
thing: `loopstate intent show --task` and `loopstate intent hook-context` for
one task (the middle one), the default `loopstate goals board` and
`loopstate run status` of the run, first with the snapshot the writer left at its
last checkpoint, then at the head after `loopstate compact`, then without any
snapshot (the file deleted: the cold read folds every event, starting from the
core checkpoint). Each figure is the best of ``--repeat`` runs: wall time and
the child's peak RSS (``wait4``, in a small launcher process of its own), with `python -c pass` as
the process floor.
Last, the append side (`--appends N`): N single-command durable appends
(`intent add`'s command through Service.execute, one write+fsync each) on the
largest store, in alternating rounds with the snapshot codec on and off, and
the time of one snapshot write of that store's state (a writer pays one each
time its tail passes 64 KiB and an eighth of the last snapshot's size).
With ``--postgres`` the same stores are built in a PostgreSQL database of a cluster the
script starts (tests/pg/pg_cluster.py) and read through it: the snapshots are this
machine's (docs/storage.md, *Projection snapshots on PostgreSQL*), and the append side is
not run.
Not part of the test run (the file is not named test_*.py).
"""

from __future__ import annotations

import argparse
import datetime as dt
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any, Callable

from loopstate_protocol import goals as g
from loopstate_protocol import intent as p
from loopstate_protocol import runs as r

from loopstate.core.clock import format_time, parse_time
from loopstate.core.ids import SequentialIds
from loopstate.domains.goals import DOMAIN as GOALS
from loopstate.domains.intent import DOMAIN as INTENT
from loopstate.domains.runs import DOMAIN as RUNS
from loopstate.service.engine import Service
from loopstate.service.lifecycle import NO_EFFECTS

BATCH = 1000
TASK_EVENTS = 50  # events per intent task: a start, a claim, then claims superseding the one before


def build(service: Service, root: str, domain: Any, stream: str, commands: Callable[[Any, int], Any], count: int) -> None:
    """Append ``count`` events decided by ``domain`` from ``commands(state, n)``, a batch per fsync."""
    project = service.project(root)
    folded = service.folded(project, domain, stream)
    made = 0

    def work(tx: Any) -> None:
        nonlocal made
        effects = service.effects_of(domain) or NO_EFFECTS
        for _ in range(min(BATCH, count - made)):
            command = commands(folded.state, made)
            prepared = effects.before_decide(service, project, folded.state, command,
                                             service.context(project, f"bench-{made}"))
            try:
                events = domain.decide(folded.state, command, prepared.ctx)
                tx.append(events, request_id=f"bench-{made}", fp="bench")
            finally:
                effects.release(prepared)
            made += len(events)

    while made < count:
        folded.ledger.submit(work)


def task_id(number: int) -> str:
    return f"00000000-0000-4000-8000-{number:012d}"


def intent_command(state: Any, n: int) -> Any:
    """Task ``n // TASK_EVENTS``: its start, one claim, then claims each superseding the one before."""
    number, step = divmod(n, TASK_EVENTS)
    if step == 0:
        return p.IntentTaskStart(task_id=task_id(number), label=f"task {number}")
    claim = p.ClaimInput(statement=f"rule {n} of task {number}: keep the public API stable", role="user",
                         epistemic_status="explicit", facets=["hard_constraint"], scope="task")
    if step == 1:
        return p.IntentClaimAdd(task_id=task_id(number), claim=claim)
    last = next(reversed(state.section(task_id(number)).active))  # the task's newest active claim
    return p.IntentClaimReplace(task_id=task_id(number), supersedes=[last], claim=claim)


def asked_task(size: int) -> str:
    """The task the intent reads ask about: the middle one of the store."""
    return task_id(max(0, (size - 1) // TASK_EVENTS) // 2)


def goal_command(state: Any, n: int) -> Any:
    number = n // 3 + 1
    if n % 3 == 0:
        return g.AddTodo(goal_id="bench", todo_id=f"T{number}", title=f"task {number}", priority="P1")
    if n % 3 == 1:
        return g.ClaimTodo(goal_id="bench", todo_id=f"T{number}", claimed_by="codex")
    return g.CompleteTodo(goal_id="bench", todo_id=f"T{number}", rationale="done")


class SteppingClock:
    """Service time that moves four minutes at each call past the start: every heartbeat renews."""

    def __init__(self, start: dt.datetime) -> None:
        self.now = start

    def __call__(self) -> dt.datetime:
        return self.now


OWNER = {"harness": "manual", "actor": "bench", "session_id": "bench"}
RUN_ID = "00000000-0000-4000-8000-00000000000b"


def start_run(service: Service, root: str) -> None:
    """A grant and an active run leased to OWNER (three events in the run's stream)."""
    expires = format_time(service.clock() + dt.timedelta(days=3650))
    grant = "00000000-0000-4000-8000-00000000000a"
    service.execute(root, r.AuthorityGrant(
        grant_id=grant, level="attended", actor="bench",
        scope={"assets": ["app"], "actions": ["local_write"], "destinations": ["repository"], "exclusions": []},
        risks_shown=["bench"], confirmation_text="bench", expires_at=expires), "r-grant")
    service.execute(root, r.Create(
        run_id=RUN_ID, objective="bench", done_gate=["bench"], authority_grant_id=grant, actor=OWNER,
        asset={"name": "app", "root": ".", "track": "code", "boundaries": ["repository-local files"]},
        budgets={"max_duration_seconds": 3650 * 86400, "max_mutations": 10, "max_external_actions": 0,
                 "max_cost_usd": None}), "r-create")
    service.execute(root, r.Acquire(run_id=RUN_ID, owner=OWNER), "r-acquire")


def heartbeat(clock: SteppingClock) -> Callable[[Any, int], Any]:
    """Lease renewals, what a long run's log is mostly made of: the clock passes each renewal's due time."""
    def command(state: Any, n: int) -> Any:
        clock.now += dt.timedelta(minutes=4)
        lease = state.lease
        return r.Heartbeat(run_id=RUN_ID, lease_id=lease["lease_id"], generation=lease["generation"])
    return command


# Started fresh for each measured process, it spawns that process and reports its wall time, peak
# RSS and exit code. A child spawned by this script itself would count this script's pages (psycopg
# and a cluster's client under --postgres) in its peak RSS: Linux carries the spawning memory's high
# water mark into the child across exec. This launcher's own few MiB are the floor instead.
SPAWN = """import os, sys, time
actions = [(os.POSIX_SPAWN_OPEN, 1, os.devnull, os.O_WRONLY, 0)]
start = time.perf_counter()
pid = os.posix_spawn(sys.argv[1], sys.argv[1:], os.environ, file_actions=actions)
_, status, usage = os.wait4(pid, 0)
print(time.perf_counter() - start, usage.ru_maxrss, os.waitstatus_to_exitcode(status))
"""


def cold(argv: list[str], env: dict[str, str], repeat: int, before: Callable[[], None] | None = None) -> tuple[float, float]:
    """Best wall time (s) and peak RSS (MiB) of ``argv`` in a fresh process (``before`` runs before each),
    spawned by a fresh launcher (``SPAWN``), which also times it."""
    best, rss = float("inf"), 0.0
    for _ in range(repeat):
        if before is not None:
            before()
        done = subprocess.run([sys.executable, "-c", SPAWN, *argv], env=env, capture_output=True, text=True)
        if done.returncode != 0 or len(done.stdout.split()) != 3:
            raise SystemExit(f"the launcher of {' '.join(argv)} failed: {done.stderr}")
        seconds, peak, code = done.stdout.split()
        if int(code) != 0:
            raise SystemExit(f"{' '.join(argv)} failed (exit code {code}): {done.stderr}")
        if float(seconds) < best:
            best, rss = float(seconds), int(peak) / 1024
    return best, rss


def append_cost(data_dir: Path, root: Path, task_id: str, count: int) -> None:
    """Median durable append with and without snapshots written at each checkpoint."""
    from loopstate.service.engine import Folded

    medians: dict[str, list[float]] = {"snapshots on": [], "snapshots off": []}
    made = 0
    for _ in range(2):
        for variant in medians:
            service = Service(data_dir=data_dir, domains=[INTENT])
            project = service.project(str(root))
            if variant == "snapshots off":
                service._folded[(project.project_id, "intent")] = Folded(service, project, INTENT, "intent", snapshots=False)
            service.refresh(project, INTENT, "intent")
            times = []
            for _ in range(count):
                made += 1
                claim = p.ClaimInput(statement=f"appended {made}", role="user", epistemic_status="explicit",
                                     facets=["outcome"], scope="project")
                start = time.perf_counter()
                service.execute(str(root), p.IntentClaimAdd(task_id=task_id, claim=claim), f"append-{made}")
                times.append(time.perf_counter() - start)
            times.sort()
            medians[variant].append(times[len(times) // 2])
            if variant == "snapshots on":
                ledger = service.folded(project, INTENT, "intent").ledger
                with ledger.mutation():
                    start = time.perf_counter()
                    ledger.save_snapshot()
                    write = time.perf_counter() - start
    print(f"\n{count} durable appends per round, median per append over two rounds each:")
    for variant, values in medians.items():
        print(f"  {variant}: " + ", ".join(f"{v * 1000:.2f} ms" for v in values))
    print(f"  one checkpoint + snapshot write of this store's intent state: {write * 1000:.1f} ms "
          f"({os.path.getsize(project.dir / 'snapshots' / 'intent.msgpack') / 1e6:.1f} MB)")


def build_store(root: str, size: int) -> None:
    """Every stream of one benchmark project, ``size`` events each (LOOPSTATE_DATA_DIR is the store)."""
    clock = SteppingClock(parse_time("2026-03-02T12:00:00Z"))
    service = Service(clock=clock, new_id=SequentialIds(), domains=[INTENT, GOALS, RUNS])
    build(service, root, INTENT, "intent", intent_command, size)
    build(service, root, GOALS, "goals.bench", goal_command, size)
    start_run(service, root)
    build(service, root, RUNS, f"runs.{RUN_ID}", heartbeat(clock), size - 3)


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--sizes", default="100,10000,100000")
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument("--appends", type=int, default=2000)
    parser.add_argument("--postgres", action="store_true", help="read a PostgreSQL store (a cluster of its own)")
    parser.add_argument("--build", type=int, help=argparse.SUPPRESS)  # the child that builds one store
    parser.add_argument("--root", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.build is not None:
        return build_store(args.root, args.build)
    sizes = [int(size) for size in args.sizes.split(",")]
    loopstate = [sys.executable, "-m", "loopstate.cli.main"]
    cluster = None
    if args.postgres:
        sys.path.insert(0, str(Path(__file__).resolve().parents[2]))
        from tests.pg.pg_cluster import Cluster, skip_reason

        if skip_reason():
            raise SystemExit(skip_reason())
        cluster = Cluster()
    try:
        run(args, sizes, loopstate, None if cluster is None else cluster.new_database("reads"))
    finally:
        if cluster is not None:
            cluster.stop()


def run(args: argparse.Namespace, sizes: list[int], loopstate: list[str], store: str | None) -> None:
    with tempfile.TemporaryDirectory() as tmp:
        env = {**os.environ, "LOOPSTATE_DATA_DIR": str(Path(tmp) / "data")}
        env.pop("LOOPSTATE_STORE", None)
        if store is not None:
            env["LOOPSTATE_STORE"] = store
            print(f"store: PostgreSQL ({store})")
        floor, floor_rss = cold([sys.executable, "-c", "pass"], env, args.repeat)
        print(f"process floor (python -c pass): {floor * 1000:.0f} ms, {floor_rss:.0f} MiB peak RSS\n")
        rows: dict[tuple[str, str], dict[int, tuple[float, float]]] = {}
        for size in sizes:
            reads = {
                "intent show --task": ["intent", "show", "--task", asked_task(size)],
                "intent hook-context": ["intent", "hook-context", asked_task(size)],
                "goals board": ["goals", "board", "bench"],
                "run status": ["run", "status", RUN_ID],
            }
            root = Path(tmp) / f"ws{size}"
            root.mkdir()
            built = time.perf_counter()
            # Built in a child process: a child forked from a parent that had grown would report
            # the parent's pages as its own peak RSS.
            subprocess.run([sys.executable, __file__, "--build", str(size), "--root", str(root)], env=env, check=True)
            folder = Service(data_dir=Path(tmp) / "data").project(str(root)).dir
            size_of = "" if store else f" (intent {os.path.getsize(folder / 'streams' / 'intent.jsonl') / 1e6:.1f} MB)"
            print(f"{size:,} events per stream built in {time.perf_counter() - built:.1f} s{size_of}")
            snapshots = folder / "snapshots" / "postgresql" if store else folder / "snapshots"
            for label, argv in reads.items():
                command = [*loopstate, *argv, "--root", str(root)]
                rows.setdefault((label, "writer's snapshot"), {})[size] = cold(command, env, args.repeat)
            subprocess.run([*loopstate, "compact", "--root", str(root)], env=env, check=True, capture_output=True)
            for label, argv in reads.items():
                command = [*loopstate, *argv, "--root", str(root)]
                rows.setdefault((label, "after compact"), {})[size] = cold(command, env, args.repeat)
            def no_snapshots(folder: Path = snapshots) -> None:
                for path in folder.iterdir():
                    if path.is_file():
                        path.unlink()

            no_snapshots()
            # On PostgreSQL a cold reader keeps the snapshot of its long fold: each read starts without one.
            again = no_snapshots if store else None
            for label, argv in reads.items():
                command = [*loopstate, *argv, "--root", str(root)]
                rows.setdefault((label, "no snapshot"), {})[size] = cold(command, env, args.repeat, again)
        print()
        header = "| read | snapshot | " + " | ".join(f"{size:,} events" for size in sizes) + " |"
        print(header)
        print("|" + "---|" * (2 + len(sizes)))
        for (label, kind), by_size in rows.items():
            reference = by_size[sizes[0]][0]
            cells = [f"{by_size[size][0]:.3f} s ({by_size[size][0] / reference:.2f}x, {by_size[size][1]:.0f} MiB)"
                     for size in sizes]
            print(f"| `{label}` | {kind} | " + " | ".join(cells) + " |")
        if args.appends and store is None:
            append_cost(Path(tmp) / "data", Path(tmp) / f"ws{sizes[-1]}", asked_task(sizes[-1]), args.appends)


if __name__ == "__main__":
    main()
