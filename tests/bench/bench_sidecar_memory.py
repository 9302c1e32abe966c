"""Sidecar memory while following a long stream, and the first query of a large project.

    .venv/bin/python tests/bench/bench_sidecar_memory.py [--events 1000000] [--step 100000] [--project 100000]

Part 1: a real `loopstate serve` over stdio, subscribed to one run's status
(`runs/status/<run>`), while this process appends lease renewals to that run
(a long run's log: the live state stays one lease), a thousand per group-commit
write+fsync, up to ``--events``. After each ``--step`` events, once the server
has pushed the change through the new head, the server's resident set
(VmRSS, from /proc/<pid>/status) is printed beside two references read the
same way: a `loopstate serve` that was only initialized, and `python -c`
sleeping (the interpreter alone).

Part 2: a project whose intent ledger holds ``--project`` events (bench_reads'
shape: tasks of 50 events, most claims superseded), then a fresh `loopstate
serve`'s first `intent.hook_context` query for one task, wall time from the
request to the answer, beside the same query on a 100-event project; then the
same query again (warm).

Not part of the test run (the file is not named test_*.py).
"""

from __future__ import annotations

import argparse
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from loopstate_protocol.client import LoopstateClient

from loopstate.core.clock import parse_time
from loopstate.core.ids import SequentialIds
from loopstate.domains.intent import DOMAIN as INTENT
from loopstate.domains.runs import DOMAIN as RUNS
from loopstate.service.engine import Service

sys.path.insert(0, str(Path(__file__).parent))
from bench_reads import RUN_ID, SteppingClock, asked_task, build, heartbeat, intent_command, start_run  # noqa: E402

SERVE = [sys.executable, "-m", "loopstate.cli.main", "serve"]


def rss_mib(pid: int) -> float:
    with open(f"/proc/{pid}/status") as status:
        for line in status:
            if line.startswith("VmRSS:"):
                return int(line.split()[1]) / 1024
    raise SystemExit(f"no VmRSS for {pid}")


def server(env: dict[str, str]) -> LoopstateClient:
    client = LoopstateClient(SERVE, env=env, stderr=subprocess.DEVNULL).start()
    client.initialize()
    return client


def follow(data_dir: Path, env: dict[str, str], events: int, step: int) -> None:
    root = data_dir.parent / "run-project"
    root.mkdir()
    clock = SteppingClock(parse_time("2026-03-02T12:00:00Z"))
    writer = Service(data_dir=data_dir, clock=clock, new_id=SequentialIds(), domains=[RUNS])
    start_run(writer, str(root))
    idle = server(env)
    bare = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(3600)"])
    follower = server(env)
    try:
        follower.subscribe(str(root), f"runs/status/{RUN_ID}")
        print(f"after subscribe: server {rss_mib(follower.process.pid):.1f} MiB; initialized-only server "
              f"{rss_mib(idle.process.pid):.1f} MiB; bare python {rss_mib(bare.pid):.1f} MiB")
        print("| events in the stream | following server RSS | growth since the last row | "
              "initialized-only server | bare python |")
        print("|---:|---:|---:|---:|---:|")
        stream = f"runs.{RUN_ID}"
        made, last = 3, rss_mib(follower.process.pid)
        while made < events:
            count = min(step, events - made)
            build(writer, str(root), RUNS, stream, heartbeat(clock), count)
            made += count
            while True:  # the server has folded and pushed the new head
                change = follower.next_change(timeout=600)
                if getattr(change, "head", None) is not None and change.head.sequence >= made:
                    break
            now = rss_mib(follower.process.pid)
            print(f"| {made:,} | {now:.1f} MiB | {now - last:+.1f} MiB | {rss_mib(idle.process.pid):.1f} MiB | "
                  f"{rss_mib(bare.pid):.1f} MiB |", flush=True)
            last = now
    finally:
        follower.close()
        idle.close()
        bare.kill()
        bare.wait()


def first_query(data_dir: Path, env: dict[str, str], size: int) -> None:
    rows = []
    for events in (100, size):
        root = data_dir.parent / f"intent-{events}"
        root.mkdir()
        builder = Service(data_dir=data_dir, new_id=SequentialIds(), domains=[INTENT])
        build(builder, str(root), INTENT, "intent", intent_command, events)
        client = server(env)
        try:
            query = {"kind": "intent.hook_context", "task_id": asked_task(events)}
            start = time.perf_counter()
            client.query(str(root), query, timeout=600)
            first = time.perf_counter() - start
            start = time.perf_counter()
            client.query(str(root), query)
            warm = time.perf_counter() - start
            rows.append((events, first, warm, rss_mib(client.process.pid)))
        finally:
            client.close()
    print("\n| intent events in the project | first hook_context query | warm | server RSS after |")
    print("|---:|---:|---:|---:|")
    for events, first, warm, rss in rows:
        print(f"| {events:,} | {first * 1000:.1f} ms | {warm * 1000:.2f} ms | {rss:.1f} MiB |")


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--events", type=int, default=1_000_000)
    parser.add_argument("--step", type=int, default=100_000)
    parser.add_argument("--project", type=int, default=100_000)
    args = parser.parse_args()
    print(f"load average at start: {os.getloadavg()[0]:.2f}")
    with tempfile.TemporaryDirectory(prefix="bench-sidecar-") as tmp:
        data_dir = Path(tmp) / "data"
        env = {**os.environ, "LOOPSTATE_DATA_DIR": str(data_dir)}
        follow(data_dir, env, args.events, args.step)
        first_query(data_dir, env, args.project)
    print(f"load average at end: {os.getloadavg()[0]:.2f}")


if __name__ == "__main__":
    main()
