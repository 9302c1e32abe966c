"""Benchmark the sidecar beside a bare pygls server, in the same run, on this machine.

    .venv/bin/python tests/bench/bench_rpc.py [--requests 2000] [--appends 200] [--idle 10]

1. Round trips: sequential and pipelined ``loopstate/query`` against a bare
   pygls echo server (stock pygls stdio, written below), both driven by the
   same LoopstateClient. Target: within 1.3x.
2. Latency from another process's append (its execute returned: durable) to the
   ``loopstate/changed`` notification at a subscribed client (both stamped with
   CLOCK_MONOTONIC, which is system-wide). Target: p50 under 20 ms, p99 under 100 ms.
3. Idle CPU and wake-ups (context switches of all threads) of a subscribed
   server over N seconds, beside the echo server. Target: none.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

from loopstate_protocol.client import LoopstateClient

SERVE = [sys.executable, "-m", "loopstate.cli.main", "serve"]
ECHO = [sys.executable, os.path.abspath(__file__), "--echo-server"]
WRITER = [sys.executable, os.path.abspath(__file__), "--writer"]


# the reference: a bare pygls server with one echo method --------------------------------------

def echo_server() -> None:
    from pygls.lsp.server import LanguageServer

    server = LanguageServer("echo", "1")

    @server.feature("bench/echo")
    def echo(params):
        return params

    server.start_io()


# another process that appends --------------------------------------------------------------

def writer(root: str, count: int, pause: float) -> None:
    """Append ``count`` commands, printing (sequence, monotonic ns when durable) per line."""
    from loopstate_protocol.intent import IntentTaskStart

    from loopstate.service.engine import Service

    service = Service()
    for i in range(count):
        outcome = service.execute(root, IntentTaskStart(label=f"bench-{i}"), f"bench-writer-{os.getpid()}-{i}")
        print(json.dumps([outcome.head.sequence, time.monotonic_ns()]), flush=True)
        time.sleep(pause)


# measurements --------------------------------------------------------------------------------

def start(command: list[str], env: dict[str, str]) -> LoopstateClient:
    client = LoopstateClient(command, env=env, stderr=subprocess.DEVNULL).start()
    client.initialize()
    return client


def round_trips(client: LoopstateClient, method: str, params: dict, n: int) -> tuple[float, float]:
    for _ in range(50):  # warm up
        client.request(method, params)
    began = time.perf_counter()
    for _ in range(n):
        client.request(method, params)
    sequential = n / (time.perf_counter() - began)
    began = time.perf_counter()
    ids = [client.send(method, params) for _ in range(n)]
    for msg_id in ids:
        client.wait(msg_id)
    pipelined = n / (time.perf_counter() - began)
    return sequential, pipelined


def cpu_seconds(pid: int) -> float:
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def wakeups(pid: int) -> int:
    """Context switches of every thread: a process that polls wakes up; one that sleeps does not."""
    total = 0
    for task in Path(f"/proc/{pid}/task").iterdir():
        for line in (task / "status").read_text().splitlines():
            if line.startswith(("voluntary_ctxt_switches", "nonvoluntary_ctxt_switches")):
                total += int(line.split()[1])
    return total


def percentile(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(round(q / 100 * (len(ordered) - 1))))]


def latency(env: dict[str, str], root: str, appends: int, pause: float) -> dict[str, list[float]]:
    client = start(SERVE, env)
    try:
        client.execute(root, {"kind": "intent.task_start", "label": "warm"})  # the streams folder exists
        sub = client.subscribe(root, "intent/snapshot", deliver="events")
        seen: dict[int, int] = {}

        def collect() -> None:
            while len(seen) < appends:
                method, params = client.next_notification(30)
                if method == "loopstate/changed" and params["subscription_id"] == sub.subscription_id:
                    now = time.monotonic_ns()
                    for event in params["events"] or []:
                        seen[event["sequence"]] = now

        collector = threading.Thread(target=collect, daemon=True)
        collector.start()
        proc = subprocess.run([*WRITER, root, str(appends), str(pause)], env=env, capture_output=True, text=True, check=True)
        collector.join(60)
        durable = dict(tuple(json.loads(line)) for line in proc.stdout.splitlines())
        sidecar = [(seen[s] - t) / 1e6 for s, t in durable.items() if s in seen]
        missing = len(durable) - len(sidecar)
        if missing:
            print(f"  warning: {missing} appends had no notification")
        return sidecar
    finally:
        client.close()


def idle_cpu(command: list[str], env: dict[str, str], root: str | None, seconds: float) -> tuple[float, int]:
    client = start(command, env)
    try:
        if root is not None:
            client.subscribe(root, "intent/snapshot")
            client.subscribe(root, "intent/tasks", deliver="events")
        time.sleep(1.0)  # let start-up work finish
        pid = client.process.pid
        before, woke = cpu_seconds(pid), wakeups(pid)
        time.sleep(seconds)
        return cpu_seconds(pid) - before, wakeups(pid) - woke
    finally:
        client.close()


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--requests", type=int, default=2000)
    parser.add_argument("--appends", type=int, default=200)
    parser.add_argument("--pause", type=float, default=0.02, help="seconds between the writer's appends")
    parser.add_argument("--idle", type=float, default=10.0)
    args = parser.parse_args()

    with tempfile.TemporaryDirectory() as scratch:
        root = Path(scratch) / "project"
        root.mkdir()
        env = dict(os.environ, LOOPSTATE_DATA_DIR=str(Path(scratch) / "data"))
        print(f"loopstate sidecar benchmark ({os.cpu_count()} CPUs, Python {sys.version.split()[0]})\n")

        seeded = start(SERVE, env)
        for i in range(5):
            seeded.execute(str(root), {"kind": "intent.task_start", "label": f"task {i}"})
        query = {"root": str(root), "query": {"kind": "intent.tasks"}}
        ours = round_trips(seeded, "loopstate/query", query, args.requests)
        seeded.close()
        echo = start(ECHO, env)
        theirs = round_trips(echo, "bench/echo", query, args.requests)
        echo.close()
        print(f"1. round trips, {args.requests} requests (requests/s)")
        print(f"   {'':<12}{'pygls echo':>14}{'loopstate/query':>18}{'time ratio':>12}   target: within 1.3x")
        for label, ref, got in (("sequential", theirs[0], ours[0]), ("pipelined", theirs[1], ours[1])):
            print(f"   {label:<12}{ref:>14,.0f}{got:>18,.0f}{ref / got:>11.2f}x")

        values = latency(env, str(root), args.appends, args.pause)
        print(f"\n2. another process's append (durable) -> loopstate/changed at the client, {args.appends} appends (ms)")
        print(f"   {'':<28}{'p50':>8}{'p99':>8}{'max':>8}")
        print(f"   {'measured':<28}{percentile(values, 50):>8.2f}{percentile(values, 99):>8.2f}{max(values):>8.2f}")
        print(f"   {'target':<28}{'< 20':>8}{'< 100':>8}")

        ours_idle = idle_cpu(SERVE, env, str(root), args.idle)
        echo_idle = idle_cpu(ECHO, env, None, args.idle)
        print(f"\n3. idle for {args.idle:.0f} s")
        print(f"   {'':<30}{'CPU s':>8}{'wake-ups':>10}")
        print(f"   {'pygls echo server':<30}{echo_idle[0]:>8.3f}{echo_idle[1]:>10}")
        print(f"   {'loopstate serve, 2 subscribed':<30}{ours_idle[0]:>8.3f}{ours_idle[1]:>10}   target: none")
    return 0


if __name__ == "__main__":
    if len(sys.argv) > 1 and sys.argv[1] == "--echo-server":
        echo_server()
    elif len(sys.argv) > 1 and sys.argv[1] == "--writer":
        writer(sys.argv[2], int(sys.argv[3]), float(sys.argv[4]))
    else:
        sys.exit(main())
