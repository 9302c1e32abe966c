"""Where a separate writer process's append goes when many contend: CPU and wall per append, phase by phase.

    .venv/bin/python tests/bench/bench_writer_phases.py [--appends 100] [--writers 16] [--rounds 2] [--dir DIR] [--baseline TREE]

The same real durable appends as bench_writers.py (`Ledger.mutation()`, the
~730-byte claim events of bench_core.py), one serial writer process against
WRITERS processes released at once, alternating, each on a fresh store. Each
writer process times, with `time.thread_time` (CPU) and `time.perf_counter`
(wall) around each call, the phases of its appends:

* lock wait: `core.lock.wait_for_flock` (the flock, blocking in the kernel when busy);
* catch-up: `Ledger._catch_up` (read, verify, fold and index what the other writers appended);
* stage: `Stream.stage` (seal the event: canonical encode, SHA-256);
* write+fsync: `Stream.flush`;
* total: the whole append loop (CPU of the process, wall from the first to the last append).

What the phases leave out of the total is the rest of the mutation (the
`with`, the fold, the request index, the bookkeeping after the fsync). Figures
are per append, summed over the writer processes. With ``--baseline TREE``
(another tree's ``server`` and ``protocol``) every row is measured again in the
same round with the writer processes importing that tree. A measuring tool, not a
verdict: bench_writers.py gives the throughput verdicts. Not part of the test run.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any, Callable

sys.path.insert(0, str(Path(__file__).parent))

from bench_core import LAYOUT, body, new_project  # noqa: E402

from loopstate.core import lock as lock_module  # noqa: E402
from loopstate.core.ledger import Ledger  # noqa: E402
from loopstate.core.project import Project  # noqa: E402

PHASES = ("lock wait", "catch-up", "stage", "write+fsync", "total")


def child(data_dir: str, root: str, name: str, appends: int) -> None:
    project = Project(root, data_dir=Path(data_dir), lock_timeout=120)
    ledger = Ledger(project, "core", LAYOUT)
    ledger.refresh(collect=False)
    spent: dict[str, list[float]] = {phase: [0.0, 0.0] for phase in PHASES}

    def timed(owner: Any, attribute: str, phase: str) -> None:
        call: Callable[..., Any] = getattr(owner, attribute)

        def wrapper(*args: Any, **kwargs: Any) -> Any:
            cpu, wall = time.thread_time(), time.perf_counter()
            try:
                return call(*args, **kwargs)
            finally:
                spent[phase][0] += time.thread_time() - cpu
                spent[phase][1] += time.perf_counter() - wall

        setattr(owner, attribute, wrapper)

    timed(lock_module, "wait_for_flock", "lock wait")
    timed(ledger, "_catch_up", "catch-up")
    timed(ledger.stream, "stage", "stage")
    timed(ledger.stream, "flush", "write+fsync")
    print("ready", flush=True)
    sys.stdin.readline()
    cpu, wall = time.process_time(), time.perf_counter()
    for k in range(appends):
        with ledger.mutation() as tx:
            tx.append([body(k)], request_id=f"{name}-{k}", fp="f" * 64)
    spent["total"] = [time.process_time() - cpu, time.perf_counter() - wall]
    print(json.dumps(spent), flush=True)


def run(base: Path, label: str, writers: int, appends: int, tree: str | None = None) -> tuple[float, dict[str, list[float]]]:
    project = new_project(base, label)
    env = None
    if tree is not None:  # the writers import the baseline tree's loopstate
        env = {**os.environ, "PYTHONPATH": os.pathsep.join((os.path.join(tree, "server"), os.path.join(tree, "protocol")))}
    procs = [subprocess.Popen([sys.executable, __file__, "--child", str(project.data_dir), project.root, f"w{w}",
                               str(appends)], stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True, env=env)
             for w in range(writers)]
    for proc in procs:
        assert proc.stdout is not None and proc.stdout.readline().strip() == "ready"
    start = time.monotonic()
    for proc in procs:
        assert proc.stdin is not None
        proc.stdin.write("go\n")
        proc.stdin.flush()
    total: dict[str, list[float]] = {phase: [0.0, 0.0] for phase in PHASES}
    for proc in procs:
        out, _ = proc.communicate(timeout=600)
        assert proc.returncode == 0, f"writer exited {proc.returncode}"
        for phase, (cpu, wall) in json.loads(out.strip().splitlines()[-1]).items():
            total[phase][0] += cpu
            total[phase][1] += wall
    return writers * appends / (time.monotonic() - start), total


def main() -> int:
    parser = argparse.ArgumentParser()
    parser.add_argument("--appends", type=int, default=100)
    parser.add_argument("--writers", type=int, default=16)
    parser.add_argument("--rounds", type=int, default=2)
    parser.add_argument("--dir", default=None)
    parser.add_argument("--baseline", default=None, help="another tree (its server/ and protocol/), measured beside")
    parser.add_argument("--child", nargs=4, metavar=("DATA_DIR", "ROOT", "NAME", "APPENDS"))
    args = parser.parse_args()
    if args.child:
        child(*args.child[:3], int(args.child[3]))
        return 0
    n, w = args.appends, args.writers
    print(f"python {sys.version.split()[0]}, {os.cpu_count()} CPUs, load average {os.getloadavg()[0]:.2f}")
    print(f"per append, summed over the writers: CPU us / wall us ({w * n} appends per row)")
    print(f"  {'writers':22} {'events/s':>9}  " + "  ".join(f"{phase:>17}" for phase in PHASES))
    with tempfile.TemporaryDirectory(dir=args.dir, prefix="loopstate-phases-") as tmp:
        for r in range(1, args.rounds + 1):
            trees = [(None, "")] + ([(os.path.abspath(args.baseline), "baseline ")] if args.baseline else [])
            for writers, appends in ((1, w * n), (w, n)):
                for tree, tag in trees:
                    rate, total = run(Path(tmp), f"r{r}-{writers}{tag[:4]}", writers, appends, tree)
                    count = writers * appends
                    cells = "  ".join(f"{total[p][0] / count * 1e6:7.0f} /{total[p][1] / count * 1e6:8.0f}" for p in PHASES)
                    print(f"  {f'{tag}{writers} x {appends}':22} {rate:9,.0f}  {cells}")
    print(f"load average {os.getloadavg()[0]:.2f}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
