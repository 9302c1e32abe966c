"""Many writers on one stream: separate processes, and threads of one process sharing a group commit.

    .venv/bin/python tests/bench/bench_writers.py [--appends 100] [--dir DIR] [--rounds 2] [--baseline TREE]

Every append is a real durable append through `Ledger` (lock, catch-up,
idempotency index, seal, write, fsync), of the ~730-byte claim events of
bench_core.py. Side by side in each round, on fresh stores on the same disk:

* reference: one serial writer process making N x APPENDS appends;
* N separate writer processes (N = 8, 16), each making APPENDS appends, all
  released at once (after their imports and first open), to one stream;
* in one process: one thread making 16 x APPENDS appends one at a time
  (the in-process reference), and 16 threads making APPENDS each through
  `Ledger.submit` (group commit: one write and one fsync per group).

Throughput is events per second from release to the last writer's last append; p50 and
p99 are of each append's latency. After every run the stream is opened fresh and
checked exact: every request id exactly once, the expected count, one chain
(a cold open verifies every link), no torn tail. Verdicts: processes at least
1x the serial writer, group commit at least 5x one thread one at a time.
With ``--baseline TREE`` (another tree's ``server`` and ``protocol``) every row is
measured again in the same round with the writer processes importing that tree (the
thread rows each run in a fresh process of their own, on either tree).
Not part of the test run (the file is not named test_*.py).
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).parent))

from bench_core import LAYOUT, body, new_project  # noqa: E402

from loopstate.core.ledger import Ledger  # noqa: E402
from loopstate.core.project import Project  # noqa: E402


def child(data_dir: str, root: str, name: str, appends: int) -> None:
    """One writer process: open, say ready, wait for the go line, append, report latencies."""
    project = Project(root, data_dir=Path(data_dir), lock_timeout=120)
    ledger = Ledger(project, "core", LAYOUT)
    ledger.refresh(collect=False)
    print("ready", flush=True)
    sys.stdin.readline()
    import resource

    before = resource.getrusage(resource.RUSAGE_SELF)
    latencies = []
    for k in range(appends):
        fields = body(k)
        t = time.perf_counter()
        with ledger.mutation() as tx:
            tx.append([fields], request_id=f"{name}-{k}", fp="f" * 64)
        latencies.append(time.perf_counter() - t)
    # CLOCK_MONOTONIC is one clock for every process: the parent measures from its go to the last append.
    after = resource.getrusage(resource.RUSAGE_SELF)
    switches = after.ru_nvcsw + after.ru_nivcsw - before.ru_nvcsw - before.ru_nivcsw
    cpu = after.ru_utime + after.ru_stime - before.ru_utime - before.ru_stime
    print(json.dumps({"latencies": latencies, "end": time.monotonic(), "switches": switches, "cpu": cpu}), flush=True)


def tree_env(tree: str | None) -> dict[str, str] | None:
    """The environment of a process that imports ``tree``'s loopstate (None: this tree's)."""
    if tree is None:
        return None
    return {**os.environ, "PYTHONPATH": os.pathsep.join((os.path.join(tree, "server"), os.path.join(tree, "protocol")))}


def processes(base: Path, label: str, writers: int, appends: int, tree: str | None = None) -> dict:
    project = new_project(base, label)
    args = [sys.executable, __file__, "--child", str(project.data_dir), project.root]
    env = tree_env(tree)
    procs = [subprocess.Popen([*args, f"w{w}", str(appends)], stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True,
                              env=env)
             for w in range(writers)]
    for proc in procs:
        assert proc.stdout.readline().strip() == "ready"
    t = time.monotonic()
    for proc in procs:
        proc.stdin.write("go\n")
        proc.stdin.flush()
    latencies, ends, switches, cpu = [], [], 0, 0.0
    for proc in procs:
        out, _ = proc.communicate(timeout=600)
        assert proc.returncode == 0, f"writer exited {proc.returncode}"
        report = json.loads(out.strip().splitlines()[-1])
        latencies += report["latencies"]
        ends.append(report["end"])
        switches += report["switches"]
        cpu += report["cpu"]
    elapsed = max(ends) - t  # from the go to the last durable append (not the processes' exits)
    check(project, {f"w{w}-{k}" for w in range(writers) for k in range(appends)})
    return {"rate": writers * appends / elapsed, "p50": statistics.median(latencies), "p99": p99(latencies),
            "switches": switches / (writers * appends), "cpu": cpu / (writers * appends)}


def threads(base: Path, label: str, writers: int, appends: int, grouped: bool) -> dict:
    project = new_project(base, label)
    ledger = Ledger(project, "core", LAYOUT)
    ledger.refresh(collect=False)
    with ledger.mutation() as tx:  # the first mutation builds the (empty) request index: not timed
        tx.append([body(0)], request_id="first", fp="f" * 64)
    latencies: list[float] = []
    start = threading.Barrier(writers + 1)
    flush, flushes = ledger.stream.flush, [0]

    def counted_flush(*a, **kw):  # one flush is one write and one fsync: a group's (or a lone append's)
        flushes[0] += 1
        return flush(*a, **kw)

    ledger.stream.flush = counted_flush

    def writer(w: int) -> None:
        start.wait()
        mine = []
        for k in range(appends):
            fields, request_id = body(k), f"t{w}-{k}"
            t = time.perf_counter()
            if grouped:
                ledger.submit(lambda tx: tx.append([fields], request_id=request_id, fp="f" * 64))
            else:
                with ledger.mutation() as tx:
                    tx.append([fields], request_id=request_id, fp="f" * 64)
            mine.append(time.perf_counter() - t)
        latencies.extend(mine)

    pool = [threading.Thread(target=writer, args=(w,)) for w in range(writers)]
    for thread in pool:
        thread.start()
    start.wait()
    t = time.perf_counter()
    for thread in pool:
        thread.join()
    elapsed = time.perf_counter() - t
    groups = flushes[0]
    check(project, {"first"} | {f"t{w}-{k}" for w in range(writers) for k in range(appends)})
    return {"rate": writers * appends / elapsed, "p50": statistics.median(latencies), "p99": p99(latencies),
            "groups": groups}


def threads_in(tree: str | None, base: Path, label: str, writers: int, appends: int, grouped: bool) -> dict:
    """``threads`` in a fresh process importing ``tree`` (None: this tree)."""
    done = subprocess.run([sys.executable, __file__, "--threads-child", str(base), label, str(writers), str(appends),
                           "grouped" if grouped else "one-at-a-time"], env=tree_env(tree), capture_output=True, text=True,
                          timeout=600)
    assert done.returncode == 0, done.stderr
    return json.loads(done.stdout.strip().splitlines()[-1])


def check(project: Project, expected: set[str]) -> None:
    """A fresh open verifies every link; every request id is there exactly once, nothing else, no torn tail."""
    ledger = Ledger(project, "core", LAYOUT)
    ledger.refresh(collect=False)
    seen = []
    for line in (project.dir / "streams" / "core.jsonl").read_bytes().splitlines(keepends=True):
        assert line.endswith(b"\n"), "torn tail"
        seen.append(json.loads(line)["request_id"])
    assert len(seen) == len(set(seen)), f"duplicated events: {len(seen) - len(set(seen))}"
    assert set(seen) == expected, f"lost {len(expected - set(seen))}, unexpected {len(set(seen) - expected)}"
    assert ledger.stream.position.sequence == len(expected), (ledger.stream.position.sequence, len(expected))


def p99(values: list[float]) -> float:
    return sorted(values)[min(len(values) - 1, int(len(values) * 0.99))]


def main() -> int:
    parser = argparse.ArgumentParser()
    parser.add_argument("--appends", type=int, default=100)
    parser.add_argument("--rounds", type=int, default=2)
    parser.add_argument("--dir", default=None)
    parser.add_argument("--only", choices=("processes", "threads"), default=None)
    parser.add_argument("--child", nargs=4, metavar=("DATA_DIR", "ROOT", "NAME", "APPENDS"))
    parser.add_argument("--threads-child", nargs=5, metavar=("BASE", "LABEL", "WRITERS", "APPENDS", "MODE"))
    parser.add_argument("--baseline", default=None, help="another tree (its server/ and protocol/), measured beside")
    args = parser.parse_args()
    if args.child:
        child(*args.child[:3], int(args.child[3]))
        return 0
    if args.threads_child:
        folder, label, writers, appends, mode = args.threads_child
        print(json.dumps(threads(Path(folder), label, int(writers), int(appends), grouped=mode == "grouped")))
        return 0
    n = args.appends
    print(f"python {sys.version.split()[0]}, {os.cpu_count()} CPUs, load average {os.getloadavg()[0]:.2f}")
    verdicts = []
    with tempfile.TemporaryDirectory(dir=args.dir, prefix="loopstate-writers-") as tmp:
        base = Path(tmp)
        for r in range(1, args.rounds + 1):
            print(f"\nround {r}")
            print(f"  {'writers':44} {'events/s':>10} {'p50':>9} {'p99':>9} {'vs reference':>13}")
            trees = [(None, "")] + ([(os.path.abspath(args.baseline), "baseline: ")] if args.baseline else [])
            for procs in () if args.only == "threads" else (8, 16):
                for tree, tag in trees:
                    serial = processes(base, f"r{r}-serial-{procs}{tag[:4]}", 1, procs * n, tree)
                    shared = processes(base, f"r{r}-procs-{procs}{tag[:4]}", procs, n, tree)
                    ratio = shared["rate"] / serial["rate"]
                    verdicts.append((f"{tag}{procs} processes / one serial process", ratio, 1.0))
                    for name, row, rel in ((f"{tag}1 process, {procs * n} appends (reference)", serial, 1.0),
                                           (f"{tag}{procs} processes x {n} appends", shared, ratio)):
                        print(f"  {name:44} {row['rate']:10,.0f} {row['p50'] * 1e3:7.2f}ms {row['p99'] * 1e3:7.2f}ms "
                              f"{rel:12.2f}x   per append: {row['switches']:.1f} context switches, "
                              f"{row['cpu'] * 1e6:.0f} us CPU (all writers)")
            if args.only == "processes":
                continue
            for tree, tag in trees:
                one = threads_in(tree, base, f"r{r}-one-thread{tag[:4]}", 1, 16 * n, grouped=False)
                group = threads_in(tree, base, f"r{r}-group{tag[:4]}", 16, n, grouped=True)
                ratio = group["rate"] / one["rate"]
                verdicts.append((f"{tag}16 threads group commit / one thread", ratio, 5.0))
                for name, row, rel in ((f"{tag}1 thread, {16 * n} appends one at a time (reference)", one, 1.0),
                                       (f"{tag}16 threads x {n}, group commit", group, ratio)):
                    print(f"  {name:44} {row['rate']:10,.0f} {row['p50'] * 1e3:7.2f}ms {row['p99'] * 1e3:7.2f}ms "
                          f"{rel:12.2f}x")
                print(f"  {tag}group commit: {16 * n} appends in {group['groups']} writes+fsyncs")
            print("  every run exact: each request id once, one verified chain, no torn tail")
    print(f"\nload average {os.getloadavg()[0]:.2f}\nverdicts:")
    for name, ratio, target in verdicts:
        print(f"  {name}: {ratio:.2f}x (target {target:g}x) {'met' if ratio >= target else 'NOT MET'}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
