"""Intent reads at 100 claims and at 100k claims, side by side in the same run.

    .venv/bin/python tests/bench/bench_intent_views.py [--sizes 100,100000] [--repeat 3] [--warm 300] [--fold 1000000]

Each store is one project whose intent ledger holds tasks of 51 events each
(the task's start, then 50 claims): in every task but one, nine claims in ten
supersede the claim before (most claims superseded), and one task in a hundred
has a project-wide claim; the last task (the one read) keeps its 50 claims
active. Stores are built by the domain's own ``decide`` through a real Ledger
(bench_reads.build: a thousand events per group-commit write+fsync).

1. Warm ``intent.hook_context``, ``intent.snapshot`` and ``intent.audit`` of the
   50-claim task: median of ``--warm`` queries, in-process (Service.query) and
   through a real ``loopstate serve`` over stdio (LoopstateClient), with the
   sidecar's first query of the project timed on its own.
2. Cold CLI reads in a fresh process (best of ``--repeat``, wall time and the
   child's peak RSS, ``wait4``): ``intent hook-context`` and ``intent show --task``,
   with the snapshot the writer left and after ``loopstate compact intent``;
   ``python -c "import msgspec"`` is the floor.
3. A snapshot write after one task changed, against one of the whole state.
4. ``--fold N``: the RSS of a process that folds N intent events in memory
   (decide + evolve, no store) of the same shape, at every tenth of the way.
Not part of the test run (the file is not named test_*.py).
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
from typing import Any, Callable

sys.path.insert(0, str(Path(__file__).resolve().parent))

from bench_reads import build, cold  # noqa: E402
from loopstate_protocol import intent as p  # noqa: E402
from loopstate_protocol.client import LoopstateClient  # noqa: E402

from loopstate.core.clock import FixedClock, parse_time  # noqa: E402
from loopstate.core.ids import random_uuid  # noqa: E402
from loopstate.domains.intent import DOMAIN as INTENT  # noqa: E402
from loopstate.service.engine import Service  # noqa: E402

PER_TASK = 51
START = parse_time("2026-03-02T12:00:00Z")


def task_id(i: int) -> str:
    return f"00000000-0000-4000-8000-{i:012x}"


def commands(count: int) -> Callable[[Any, int], Any]:
    """The n-th command of a store of ``count`` events (see the module docstring for its shape)."""
    hot = count // PER_TASK - 1

    def command(state: Any, n: int) -> Any:
        i, j = divmod(n, PER_TASK)
        tid = task_id(i)
        if j == 0:
            return p.IntentTaskStart(task_id=tid)
        scope = "project" if j == 1 and i % 100 == 0 else "task"
        claim = p.ClaimInput(statement=f"task {i} rule {j}: keep the public API stable", role="user",
                             epistemic_status="explicit", facets=["hard_constraint"], scope=scope)
        if i != hot and j % 10 != 1:
            last = next(reversed(state.section(tid).active))
            return p.IntentClaimReplace(task_id=tid, supersedes=[last], claim=claim)
        return p.IntentClaimAdd(task_id=tid, claim=claim)
    return command


LONG_TASKS = 20


def long_commands(count: int) -> Callable[[Any, int], Any]:
    """The "long" shape: ``LONG_TASKS`` tasks, claims in turn, each superseding its task's claim before,
    so the live state (the tasks and one active claim each) stays the same size however long the history."""

    def command(state: Any, n: int) -> Any:
        j, i = divmod(n, LONG_TASKS)
        tid = task_id(i)
        if j == 0:
            return p.IntentTaskStart(task_id=tid)
        claim = p.ClaimInput(statement=f"task {i} rule, wording {j}: keep the public API stable", role="user",
                             epistemic_status="explicit", facets=["hard_constraint"])
        if j == 1:
            return p.IntentClaimAdd(task_id=tid, claim=claim)
        return p.IntentClaimReplace(task_id=tid, supersedes=[next(reversed(state.section(tid).active))], claim=claim)
    return command


def store_count(shape: str, size: int) -> int:
    return size if shape == "long" else size // PER_TASK * PER_TASK


def read_task(shape: str, size: int) -> str:
    """The task a store's reads and subscriptions name."""
    return task_id(0) if shape == "long" else task_id(size // PER_TASK - 1)


def build_store(data_dir: Path, root: Path, size: int, shape: str = "tasks") -> None:
    os.environ["LOOPSTATE_DATA_DIR"] = str(data_dir)
    count = store_count(shape, size)
    # Random claim ids, as a real store has (sequential ones would flatter the snapshot's compression).
    service = Service(data_dir=data_dir, clock=FixedClock(START), new_id=random_uuid, domains=[INTENT])
    build(service, str(root), INTENT, "intent", (long_commands if shape == "long" else commands)(count), count)


def median_ms(call: Callable[[], Any], n: int) -> float:
    call()
    times = []
    for _ in range(n):
        began = time.perf_counter()
        call()
        times.append(time.perf_counter() - began)
    return statistics.median(times) * 1000


WARM = {
    "hook_context": lambda t: p.IntentHookContext(task_id=t),
    "snapshot --task": lambda t: p.IntentSnapshot(task_id=t),
    "audit --task (first page)": lambda t: p.IntentAudit(task_id=t),
}


def warm_in_process(data_dir: Path, root: Path, task: str, n: int) -> dict[str, float]:
    service = Service(data_dir=data_dir, domains=[INTENT])
    return {name: median_ms(lambda: service.query(str(root), make(task)), n) for name, make in WARM.items()}


def warm_sidecar(env: dict[str, str], root: Path, task: str, n: int) -> dict[str, float]:
    client = LoopstateClient([sys.executable, "-m", "loopstate.cli.main", "serve"], env=env,
                             stderr=subprocess.DEVNULL).start()
    try:
        client.initialize()
        began = time.perf_counter()
        client.query(str(root), {"kind": "intent.hook_context", "task_id": task})
        out = {"first query of the project": (time.perf_counter() - began) * 1000}
        for name, make in WARM.items():
            wire = {"kind": make(task).__struct_config__.tag, "task_id": task}
            out[name] = median_ms(lambda: client.query(str(root), wire), n)
        return out
    finally:
        client.close()


def snapshot_writes(data_dir: Path, root: Path, task: str) -> tuple[float, float, int]:
    """ms to capture the snapshot after one event on one task, ms for the whole state, bytes of the state."""
    import msgspec

    service = Service(data_dir=data_dir, domains=[INTENT])
    state = service.refresh(service.project(str(root)), INTENT, "intent").state
    INTENT.snapshot_state(state)
    claim = next(iter(state.section(task).active.values()))
    state.retire(claim, "invalidated", invalidated_at="2026-03-02T12:00:00Z")  # what one event does to one section
    began = time.perf_counter()
    one = msgspec.msgpack.encode(INTENT.snapshot_state(state))
    changed = time.perf_counter() - began
    for tid in state.section_ids():
        state.section(tid)
    state._encoded.clear()  # every section decoded and stale: what a whole re-encode costs
    began = time.perf_counter()
    msgspec.msgpack.encode(INTENT.snapshot_state(state))
    return changed * 1000, (time.perf_counter() - began) * 1000, len(one)


def fold_rss(count: int) -> None:
    """Print the RSS of this process while it folds ``count`` events in memory (run in a child)."""
    from loopstate.domains.base import Context

    def rss() -> float:
        with open("/proc/self/statm") as f:
            return int(f.read().split()[1]) * os.sysconf("SC_PAGE_SIZE") / 2**20

    state = INTENT.initial("intent")
    total = count // PER_TASK * PER_TASK
    make = commands(total)
    print(f"  before the fold: {rss():.1f} MiB", flush=True)
    for n in range(total):
        ctx = Context(now=START, new_id=random_uuid, project_id="p" * 64, project_root="/bench", request_id=f"r{n}")
        for event in INTENT.decide(state, make(state, n), ctx):
            event["sequence"] = n + 1
            event["event_hash"] = f"{n:064x}"
            INTENT.evolve(state, event)
        if (n + 1) % (count // 10) == 0 or n + 1 == total:
            print(f"  {n + 1} events: {rss():.1f} MiB", flush=True)


def fold_store(data_dir: Path, root: Path) -> None:
    """Print this process's RSS before and after it folds a store's intent stream, without its snapshot
    (a real Ledger: the records' verified places reach the fold as the engine passes them)."""
    import gc

    from loopstate.service.engine import Folded

    gc.collect()
    before = rss_mib(os.getpid())
    service = Service(data_dir=data_dir, domains=[INTENT])
    folded = Folded(service, service.project(str(root)), INTENT, "intent", snapshots=False)
    folded.ledger.refresh()
    gc.collect()
    print(f"  {folded.ledger.head[0]:,} events folded from the stream: {rss_mib(os.getpid()):.1f} MiB "
          f"(from {before:.1f} MiB before the fold)", flush=True)


def rss_mib(pid: int, field: str = "VmRSS:") -> float:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith(field):
            return int(line.split()[1]) / 1024
    return float("nan")


def serve_rss(sizes: list[int], base: Path, shape: str) -> None:
    """RSS of a real ``loopstate serve`` subscribed to the read task's intent snapshot, one store per size
    (kept in ``base``): starting from the projection snapshot ``loopstate compact intent`` writes, and
    folded from the stream alone (the snapshot deleted)."""
    from loopstate.core import snapshot
    from loopstate.core.stream import Stream

    print("| events | sidecar RSS, after compact | peak | sidecar RSS, stream only | peak | snapshot file |")
    print("|---|---|---|---|---|---|")
    for size in sizes:
        data_dir, root = base / f"data-{shape}-{size}", base / f"root-{shape}-{size}"
        if not (root / ".git").exists():
            (root / ".git").mkdir(parents=True)
            began = time.perf_counter()
            subprocess.run([sys.executable, os.path.abspath(__file__), "--build-child", str(data_dir), str(root), str(size),
                            shape], check=True)
            print(f"built {size} events in {time.perf_counter() - began:.1f} s", flush=True)
        env = {**os.environ, "LOOPSTATE_DATA_DIR": str(data_dir)}
        topic = f"intent/snapshot/{read_task(shape, size)}"
        stream = Stream(Service(data_dir=data_dir, domains=[INTENT]).project(str(root)).dir, "intent", INTENT.layout)
        snap = snapshot.path_for(stream)
        figures = []
        for with_snapshot in (True, False):
            if with_snapshot:
                subprocess.run([sys.executable, "-m", "loopstate.cli.main", "--root", str(root), "compact", "intent"],
                               env=env, check=True, stdout=subprocess.DEVNULL)
                snap_bytes = snap.stat().st_size
            else:
                snap.unlink()
            client = LoopstateClient([sys.executable, "-m", "loopstate.cli.main", "serve"], env=env,
                                     stderr=subprocess.DEVNULL).start()
            try:
                client.initialize()
                client.subscribe(str(root), topic, timeout=900)
                figures.append((rss_mib(client.process.pid), rss_mib(client.process.pid, "VmHWM:")))
            finally:
                client.close()
        (a, ap), (b, bp) = figures
        print(f"| {size:,} | {a:.1f} MiB | {ap:.1f} MiB | {b:.1f} MiB | {bp:.1f} MiB | {snap_bytes / 2**20:.1f} MiB |", flush=True)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sizes", default="100,100000")
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument("--warm", type=int, default=300)
    parser.add_argument("--fold", type=int, default=0, help="also fold this many events in memory and print the RSS")
    parser.add_argument("--store", help="build the stores in this folder and keep them (a later run reuses them)")
    parser.add_argument("--serve-rss", help="sizes: RSS of `loopstate serve` subscribed to intent, one store per size (--store)")
    parser.add_argument("--fold-store", nargs=2, metavar=("DATA_DIR", "ROOT"),
                        help="the RSS of this process folding that store's intent stream (no snapshot)")
    parser.add_argument("--fold-child", type=int, help=argparse.SUPPRESS)
    parser.add_argument("--shape", choices=("tasks", "long"), default="tasks",
                        help="--serve-rss's stores: tasks of 51 events (the default), or 20 long tasks (small live state)")
    parser.add_argument("--build-child", nargs=4, help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.fold_child:
        fold_rss(args.fold_child)
        return 0
    if args.build_child:
        data_dir, root, size, shape = args.build_child
        build_store(Path(data_dir), Path(root), int(size), shape)
        return 0
    if args.fold_store:
        fold_store(Path(args.fold_store[0]), Path(args.fold_store[1]))
        return 0
    if args.serve_rss:
        if not args.store:
            parser.error("--serve-rss needs --store DIR (the stores are kept there)")
        serve_rss([int(s) for s in args.serve_rss.split(",")], Path(args.store), args.shape)
        return 0
    sizes = [int(s) for s in args.sizes.split(",")]
    print(f"load average {os.getloadavg()[0]:.2f}, python {sys.version.split()[0]}")
    floor = cold([sys.executable, "-c", "import msgspec"], dict(os.environ), args.repeat)
    print(f"floor: python -c 'import msgspec' {floor[0] * 1000:.0f} ms, {floor[1]:.0f} MiB")
    rows: dict[str, dict[int, Any]] = {}
    with tempfile.TemporaryDirectory(prefix="bench-intent-views-") as tmp:
        for size in sizes:
            base = Path(args.store or tmp)
            data_dir, root = base / f"data-{size}", base / f"root-{size}"
            if (root / ".git").exists():
                task = task_id(size // PER_TASK - 1)
                print(f"reusing the store of {size} events in {base}", flush=True)
            else:
                (root / ".git").mkdir(parents=True)
                began = time.perf_counter()
                # In a child: a child's peak RSS counts the pages it was forked with, so this
                # process must not hold the folded store when it starts the cold reads.
                subprocess.run([sys.executable, os.path.abspath(__file__), "--build-child", str(data_dir), str(root), str(size),
                                "tasks"], check=True)
                task = task_id(size // PER_TASK - 1)
                print(f"built {size} events in {time.perf_counter() - began:.1f} s", flush=True)
            env = {**os.environ, "LOOPSTATE_DATA_DIR": str(data_dir)}
            cli = [sys.executable, "-m", "loopstate.cli.main", "--root", str(root), "intent"]
            for name, argv in (("hook-context", [*cli, "hook-context", task]), ("show --task", [*cli, "show", "--task", task])):
                rows.setdefault(f"cold `intent {name}`, writer's snapshot", {})[size] = cold(argv, env, args.repeat)
            subprocess.run([*cli[:-1], "compact", "intent"], env=env, check=True, stdout=subprocess.DEVNULL)
            for name, argv in (("hook-context", [*cli, "hook-context", task]), ("show --task", [*cli, "show", "--task", task])):
                rows.setdefault(f"cold `intent {name}`, after compact", {})[size] = cold(argv, env, args.repeat)
            for name, ms in warm_in_process(data_dir, root, task, args.warm).items():
                rows.setdefault(f"warm {name}, in-process", {})[size] = ms
            for name, ms in warm_sidecar(env, root, task, args.warm).items():
                rows.setdefault(f"sidecar {name}", {})[size] = ms
            changed, whole, size_bytes = snapshot_writes(data_dir, root, task)
            rows.setdefault("snapshot capture+encode, one task changed", {})[size] = changed
            rows.setdefault("snapshot capture+encode, every section re-encoded", {})[size] = whole
            rows.setdefault("snapshot state bytes", {})[size] = size_bytes
    first = sizes[0]
    print(f"\n| measure | {' | '.join(f'{s:,} events' for s in sizes)} |")
    print(f"|---|{'---|' * len(sizes)}")
    for name, by_size in rows.items():
        cells = []
        for size in sizes:
            value = by_size[size]
            if isinstance(value, tuple):
                cells.append(f"{value[0] * 1000:.0f} ms ({value[0] / by_size[first][0]:.2f}x, {value[1]:.0f} MiB)")
            elif name.endswith("bytes"):
                cells.append(f"{value / 1e6:.2f} MB")
            else:
                cells.append(f"{value:.3f} ms ({value / by_size[first]:.2f}x)")
        print(f"| {name} | {' | '.join(cells)} |")
    if args.fold:
        print(f"\nRSS of a process folding {args.fold} events in memory:")
        subprocess.run([sys.executable, os.path.abspath(__file__), "--fold-child", str(args.fold)], check=True)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
