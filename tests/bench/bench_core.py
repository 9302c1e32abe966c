"""Event core benchmark: every figure beside a reference measured in the same run, on the same disk.

    .venv/bin/python tests/bench/bench_core.py [--dir DIR] [--quick] [--only PART ...]

1. Durable append latency at 1k, 10k, 100k and 1M events, interleaved in rounds
   with a raw write+fsync loop of lines of the same size (so disk noise hits
   both alike), and the seed-000 whole-file rewrite at 1k and 100k events.
2. Cold open + verify + fold of 100k and 1M events in a fresh process: wall
   time after imports, events/s and peak RSS (VmHWM), for `loopstate verify`
   and for a cold open with a full re-hash (each with its worker processes
   and, for comparison, without), and from a checkpoint, beside a plain
   streaming msgspec decode loop; and from a checkpoint with the request
   index a mutating service keeps.
3. Group commit: 8 threads appending through Ledger.submit against the same
   appends one at a time from one thread (the reference) and from 8 threads
   queueing on the ledger, three rounds.

Big streams are built fast by sealing lines in memory and writing the file
directly; the appends that are timed are real durable appends through Ledger.
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
import threading
import time
from pathlib import Path
from typing import Any

from loopstate.core import checkpoint
from loopstate.core.chain import ChainLayout, Position, seal
from loopstate.core.ledger import Ledger
from loopstate.core.project import Project


def _classify(value: Any) -> str:
    return "ok" if value == 1 and type(value) is int else ("future" if type(value) is int and value > 1 else "invalid")


LAYOUT = ChainLayout("sequence", "prev_hash", "event_hash", "schema_version", _classify)
PROJECT_ID = "4f6c1f0c9a0b7e3d2c1b0a99887766554433221100ffeeddccbbaa9988776655"


def body(n: int) -> dict[str, Any]:
    """An intent-like claim event of seed 000's envelope (about 730 bytes sealed, with request id and fingerprint)."""
    return {
        "schema_version": 1, "event_id": f"00000000-0000-4000-8000-{n:012d}", "event_type": "claim_added",
        "project_id": PROJECT_ID, "task_id": "00000000-0000-4000-8000-000000000001",
        "occurred_at": "2026-01-01T00:00:00Z", "actor": "user",
        "payload": {"claim_id": f"c{n}", "statement": "appends must survive a crash and stay fast at a million events",
                    "epistemic_status": "explicit", "facets": ["hard_constraint"]},
    }


def new_project(base: Path, name: str) -> Project:
    root = base / name / "ws"
    root.mkdir(parents=True)
    project = Project(str(root), data_dir=base / name / "data", lock_timeout=60)
    project.ensure()
    return project


def build(project: Project, n: int) -> tuple[int, int]:
    """Write a verified-valid stream of ``n`` events without per-event fsync; returns (bytes, line size)."""
    folder = project.dir / "streams"
    folder.mkdir(mode=0o700, exist_ok=True)
    at, chunk = Position(), []
    fd = os.open(folder / "core.jsonl", os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    try:
        for i in range(n):
            event, line = seal({**body(i), "request_id": f"req-{i}", "request_fingerprint": "f" * 64}, LAYOUT, at)
            at = Position(at.offset + len(line), event["sequence"], event["event_hash"])
            chunk.append(line)
            if len(chunk) == 20000:
                os.write(fd, b"".join(chunk))
                chunk = []
        os.write(fd, b"".join(chunk))
        os.fsync(fd)
    finally:
        os.close(fd)
    return at.offset, at.offset // max(n, 1)


def fmt_us(seconds: float) -> str:
    return f"{seconds * 1e6:,.0f} us"


# 1. appends ---------------------------------------------------------------------------------


def append_vs_raw(base: Path, n: int, appends: int) -> dict[str, Any]:
    project = new_project(base, f"append-{n}")
    size, line_size = build(project, n)
    ledger = Ledger(project, "core", LAYOUT)
    t = time.perf_counter()
    ledger.refresh(collect=False)  # a long-lived process opens once; not part of the append figure
    opened = time.perf_counter() - t
    # The first mutation builds the request-id index of the whole history (this bench's ledger keeps no stored
    # request file: it has no snapshot codec), a one-off of every process's first mutation of the stream, O(history).
    # It is timed on its own: counted into the per-append mean it made "CPU per append" grow with the stream.
    t, c = time.perf_counter(), time.process_time()
    with ledger.mutation() as tx:
        tx.append([body(n)], request_id="bench-first", fp="f" * 64)
    first, first_cpu = time.perf_counter() - t, time.process_time() - c
    raw_path = project.dir / "raw.jsonl"
    raw_fd = os.open(raw_path, os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o600)
    ours, raw, cpu, raw_cpu = [], [], [], 0.0
    line = None
    try:
        # Strictly alternating, one of ours then one raw, so disk stalls from
        # other work on the machine hit both series alike.
        for k in range(1, appends + 1):
            # The event and its request id are made before the clock starts, as the raw line is.
            fields, request_id = body(n + k), f"bench-{k}"
            t, c = time.perf_counter(), time.process_time()
            with ledger.mutation() as tx:
                (sample,) = tx.append([fields], request_id=request_id, fp="f" * 64)
            ours.append(time.perf_counter() - t)
            cpu.append(time.process_time() - c)
            line = line or b"x" * (sample.end - sample.start - 1) + b"\n"
            t, c = time.perf_counter(), time.process_time()
            os.write(raw_fd, line)
            os.fsync(raw_fd)
            raw.append(time.perf_counter() - t)
            raw_cpu += time.process_time() - c
    finally:
        os.close(raw_fd)
    return {
        "events": n, "file_mb": size / 1e6, "line_bytes": line_size, "open_s": opened,
        "ours_p50": statistics.median(ours), "ours_p99": sorted(ours)[int(len(ours) * 0.99) - 1],
        "raw_p50": statistics.median(raw), "raw_p99": sorted(raw)[int(len(raw) * 0.99) - 1],
        "ratio": statistics.median(ours) / statistics.median(raw), "cpu": sum(cpu) / len(cpu), "cpu_p50": statistics.median(cpu),
        "raw_cpu": raw_cpu / len(raw), "first_s": first, "first_cpu": first_cpu,
    }


def seed_rewrite(base: Path, n: int, times: int) -> dict[str, Any]:
    """Seed 000's mutation: write the complete next ledger to a 0600 sibling, fsync, replace, fsync the folder.

    Generous to the seed: the current ledger is already in memory (no re-read)
    and its chain is not re-validated before each write, which the seed also does.
    """
    project = new_project(base, f"rewrite-{n}")
    build(project, n)
    path = project.dir / "streams" / "core.jsonl"
    data = path.read_bytes()
    at_line = data.rstrip(b"\n").rsplit(b"\n", 1)[-1]
    last = json.loads(at_line)
    at = Position(len(data), last["sequence"], last["event_hash"])
    spent = []
    for k in range(times):
        event, line = seal(body(n + k), LAYOUT, at)
        t = time.perf_counter()
        data = data + line
        tmp = path.with_name(path.name + ".tmp")
        fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
        try:
            os.write(fd, data)
            os.fsync(fd)
        finally:
            os.close(fd)
        os.replace(tmp, path)
        dfd = os.open(path.parent, os.O_RDONLY | os.O_DIRECTORY)
        os.fsync(dfd)
        os.close(dfd)
        spent.append(time.perf_counter() - t)
        at = Position(len(data), event["sequence"], event["event_hash"])
    return {"events": n, "p50": statistics.median(spent), "mb_written": len(data) / 1e6}


# 2. cold open -------------------------------------------------------------------------------


def peak_rss_mb() -> float:
    """This process's own peak RSS (VmHWM).

    Not ru_maxrss: Linux carries the parent's high-water mark into a child
    across fork+exec, so a child of a big parent would report the parent's peak.
    """
    with open("/proc/self/status") as fh:
        for line in fh:
            if line.startswith("VmHWM:"):
                return int(line.split()[1]) / 1024
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024


def cold_child(mode: str, root: str, data_dir: str) -> None:
    """Runs in a fresh interpreter: open, verify, fold; prints one JSON line."""
    rss_imports = peak_rss_mb()
    if mode.endswith(" sequential"):  # the same work with no worker processes, for comparison
        from loopstate.core import parallel_verify

        parallel_verify.PARALLEL_MIN_BYTES = parallel_verify.FOLD_PARALLEL_MIN_BYTES = 1 << 62
        mode = mode[: -len(" sequential")]
    t, cpu = time.perf_counter(), time.process_time()
    if mode == "msgspec":
        import msgspec

        decode = msgspec.json.Decoder().decode
        project = Project(root, data_dir=Path(data_dir))
        count, pending = 0, b""
        with open(project.dir / "streams" / "core.jsonl", "rb") as fh:
            while chunk := fh.read(1 << 20):
                lines = (pending + chunk).split(b"\n")
                pending = lines.pop()
                for line in lines:
                    decode(line)
                    count += 1
    elif mode == "verify":  # what `loopstate verify` does for one stream
        from loopstate.core.recovery import verify_stream
        from loopstate.core.stream import Stream

        project = Project(root, data_dir=Path(data_dir))
        report = verify_stream(Stream(project.dir, "core", LAYOUT))
        assert report["ok"], report
        count = report["events"]
    else:
        counts: dict[str, int] = {}
        last = [None]

        def fold(record) -> None:  # a small projection: events per type and the last time
            event = record.event
            counts[event["event_type"]] = counts.get(event["event_type"], 0) + 1
            last[0] = event["occurred_at"]

        ledger = Ledger(Project(root, data_dir=Path(data_dir)), "core", LAYOUT, on_record=fold,
                        keep_requests=mode == "checkpointed+requests")
        ledger.refresh(collect=False)
        count = ledger.head[0]
    elapsed, cpu = time.perf_counter() - t, time.process_time() - cpu
    children = resource.getrusage(resource.RUSAGE_CHILDREN)  # verify workers, if any ran
    print(json.dumps({"events": count, "seconds": elapsed, "cpu_seconds": cpu,
                      "workers_cpu_seconds": children.ru_utime + children.ru_stime,
                      "workers_rss_mb": children.ru_maxrss / 1024,
                      "rss_mb": peak_rss_mb(), "rss_after_imports_mb": rss_imports}))


def cold_open(base: Path, n: int) -> list[dict[str, Any]]:
    project = new_project(base, f"cold-{n}")
    build(project, n)
    results = []
    for mode in ("msgspec", "verify", "verify sequential", "full", "full sequential", "checkpointed",
                 "checkpointed+requests"):
        if mode == "checkpointed":
            ledger = Ledger(project, "core", LAYOUT, keep_requests=False)
            last_start = [0]
            ledger.on_record = lambda r: last_start.__setitem__(0, r.start)
            ledger.refresh(collect=False)
            checkpoint.save(ledger.stream, last_start[0])
        out = subprocess.run(
            [sys.executable, __file__, "--cold-child", mode, project.root, os.fspath(project.data_dir)],
            check=True, capture_output=True, text=True,
        ).stdout
        result = {"mode": mode, **json.loads(out)}
        assert result["events"] == n, result
        results.append(result)
    return results


# 3. group commit ----------------------------------------------------------------------------


def group_commit(base: Path, writers: int, each: int, rounds: int = 3) -> list[dict[str, Any]]:
    """Per round, in this order on fresh stores: one thread appending one at a time
    (the reference), ``writers`` threads each appending one at a time through
    ``mutation()`` (they queue on the ledger), and ``writers`` threads through
    ``submit`` (group commit). Groups are counted as the stream's writes."""
    out = []
    for k in range(rounds):
        total = writers * each
        solo = Ledger(new_project(base, f"solo-{k}"), "core", LAYOUT)
        t = time.perf_counter()
        for i in range(total):
            with solo.mutation() as tx:
                tx.append([body(i)], request_id=f"s{i}", fp="f" * 64)
        solo_rate = total / (time.perf_counter() - t)

        def threaded(ledger: Ledger, grouped: bool) -> float:
            def writer(w: int) -> None:
                for i in range(each):
                    def work(tx, w=w, i=i):
                        return tx.append([body(w * each + i)], request_id=f"g{w}-{i}", fp="f" * 64)
                    if grouped:
                        ledger.submit(work)
                    else:
                        with ledger.mutation() as tx:
                            work(tx)

            threads = [threading.Thread(target=writer, args=(w,)) for w in range(writers)]
            t = time.perf_counter()
            for thread in threads:
                thread.start()
            for thread in threads:
                thread.join()
            rate = total / (time.perf_counter() - t)
            assert ledger.head[0] == total
            return rate

        plain_rate = threaded(Ledger(new_project(base, f"plain-{k}"), "core", LAYOUT), grouped=False)
        ledger = Ledger(new_project(base, f"group-{k}"), "core", LAYOUT)
        writes = 0
        flush = ledger.stream.flush

        def counted():
            nonlocal writes
            writes += bool(ledger.stream._staged)
            flush()

        ledger.stream.flush = counted
        group_rate = threaded(ledger, grouped=True)
        out.append({"solo_rate": solo_rate, "plain_rate": plain_rate, "group_rate": group_rate,
                    "ratio": group_rate / solo_rate, "appends": total, "groups": writes})
    return out


# main ---------------------------------------------------------------------------------------

PARTS = ["append", "rewrite", "cold", "group"]



def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--dir", help="where to build the stores (default: a temp dir); use the disk you care about")
    parser.add_argument("--quick", action="store_true", help="smaller sizes, for a smoke run")
    parser.add_argument("--only", nargs="+", choices=PARTS, default=PARTS, metavar="PART",
                        help=f"run only these parts ({', '.join(PARTS)}); default: all")
    parser.add_argument("--cold-child", nargs=3, metavar=("MODE", "ROOT", "DATA_DIR"), help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.cold_child:
        cold_child(*args.cold_child)
        return

    sizes = [1_000, 10_000] if args.quick else [1_000, 10_000, 100_000, 1_000_000]
    cold_sizes = [10_000] if args.quick else [100_000, 1_000_000]
    with tempfile.TemporaryDirectory(dir=args.dir, prefix="loopstate-bench-") as tmp:
        base = Path(tmp)
        print(f"# loopstate core benchmark  (python {sys.version.split()[0]}, {os.cpu_count()} CPUs, dir {base})")
        print(f"load average at start: {os.getloadavg()[0]:.2f}")
        print()
        if "append" in args.only:
            durable_append(base, sizes)
        if "rewrite" in args.only:
            rewrite(base, args.quick)
        if "cold" in args.only:
            cold(base, cold_sizes)
        if "group" in args.only:
            group(base, args.quick)
        print(f"load average at end: {os.getloadavg()[0]:.2f}")


def durable_append(base: Path, sizes: list[int]) -> None:
    print("## Durable append (300 of ours alternating with 300 raw; CPU = user+sys time of this process, every "
          "thread counted; the first mutation after the open, which builds the request index, on its own)")
    print("| events in stream | file | line | ours p50 | ours p99 | raw write+fsync p50 | raw p99 | ours / raw p50 "
          "| CPU ours mean | CPU ours p50 | CPU raw | first open | first mutation (CPU) |")
    print("|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|")
    rows = []
    for n in sizes:
        r = append_vs_raw(base, n, appends=300)
        rows.append(r)
        print(f"| {n:,} | {r['file_mb']:.1f} MB | {r['line_bytes']} B | {fmt_us(r['ours_p50'])} | {fmt_us(r['ours_p99'])} "
              f"| {fmt_us(r['raw_p50'])} | {fmt_us(r['raw_p99'])} | {r['ratio']:.2f}x | {fmt_us(r['cpu'])} "
              f"| {fmt_us(r['cpu_p50'])} | {fmt_us(r['raw_cpu'])} "
              f"| {r['open_s']:.2f} s | {r['first_s']:.2f} s ({r['first_cpu']:.2f} s) |", flush=True)
    growth = rows[-1]["cpu"] / rows[0]["cpu"]
    worst = max(r["ratio"] for r in rows)
    print(f"\nverdict: CPU per append {rows[-1]['events']:,} / {rows[0]['events']:,} events = {growth:.2f}x "
          f"({'met' if growth <= 1.5 else 'NOT MET'}: within 1.5x); latency ours / raw at most {worst:.2f}x "
          f"({'met' if worst <= 1.5 else 'NOT MET'}: within 1.5x)")
    print()


def rewrite(base: Path, quick: bool) -> None:
    print("## Seed 000's whole-file rewrite per mutation (temp + fsync + replace + folder fsync)")
    print("| events in stream | rewrite p50 | written per mutation |")
    print("|---:|---:|---:|")
    for n, times in ((1_000, 50), (10_000, 20)) if quick else ((1_000, 50), (100_000, 15)):
        r = seed_rewrite(base, n, times)
        print(f"| {n:,} | {fmt_us(r['p50'])} | {r['mb_written']:.1f} MB |", flush=True)
    print()


def cold(base: Path, cold_sizes: list[int]) -> None:
    print("## Cold open + verify + fold in a fresh process (page cache warm)")
    print("(CPU = this process; workers = the verify worker processes it started, CPU summed, peak RSS of the largest)")
    print("| events | mode | seconds | events/s | CPU seconds | workers' CPU s | events per CPU second (all) "
          "| peak RSS | workers' peak RSS | RSS after imports |")
    print("|---:|---|---:|---:|---:|---:|---:|---:|---:|---:|")
    for n in cold_sizes:
        for r in cold_open(base, n):
            total_cpu = r["cpu_seconds"] + r["workers_cpu_seconds"]
            workers_rss = f"{r['workers_rss_mb']:.1f} MB" if r["workers_cpu_seconds"] > 0 else "-"
            print(f"| {n:,} | {r['mode']} | {r['seconds']:.2f} | {r['events'] / r['seconds']:,.0f} "
                  f"| {r['cpu_seconds']:.2f} | {r['workers_cpu_seconds']:.2f} | {r['events'] / total_cpu:,.0f} "
                  f"| {r['rss_mb']:.1f} MB | {workers_rss} | {r['rss_after_imports_mb']:.1f} MB |", flush=True)
    print()


def group(base: Path, quick: bool) -> None:
    each = 25 if quick else 100
    print(f"## Group commit: 8 threads x {each} appends through Ledger.submit vs the same appends one at a time")
    print("| round | one thread, one at a time | 8 threads, one at a time | 8 threads, group commit "
          "| group / one thread | groups (writes) for all appends |")
    print("|---:|---:|---:|---:|---:|---:|")
    rounds = group_commit(base, 8, each)
    for k, r in enumerate(rounds, start=1):
        print(f"| {k} | {r['solo_rate']:,.0f} events/s | {r['plain_rate']:,.0f} events/s | {r['group_rate']:,.0f} events/s "
              f"| {r['ratio']:.1f}x | {r['groups']} for {r['appends']} |", flush=True)
    print(f"median ratio: {statistics.median(r['ratio'] for r in rounds):.1f}x")
    print()


if __name__ == "__main__":
    main()
