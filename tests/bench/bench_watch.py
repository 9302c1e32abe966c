"""Benchmark the store watcher (watchdog) beside the inotify binding it replaced, in the same run.

    .venv/bin/python tests/bench/bench_watch.py [--idle 60] [--strace 60] [--changes 200] [--pause 0.02]

The reference is the old ``service/watch.py``, kept verbatim as
``tests/bench/inotify_watch_reference.py``. Each measurement runs both, every
watcher in a real child process of its own:

1. Idle: CPU seconds (utime + stime, ``/proc/<pid>/stat``) and wake-ups
   (voluntary + involuntary context switches of every thread,
   ``/proc/<pid>/task/*/status``) over ``--idle`` seconds, for a bare Watcher
   on one folder and for a real ``loopstate serve`` holding two subscriptions
   (the reference injected as ``loopstate.service.watch`` before the server
   loads); with watchfiles installed (not a dependency), also the candidate
   that was not chosen, its ``awatch`` with its defaults. All idle at once.
   Target: none.
2. Syscalls while idle: ``strace -f -c`` attached to each of them for
   ``--strace`` seconds (skipped without strace). An idle process makes none;
   attaching interrupts each blocked call once, so up to one restarted call
   per thread is the floor strace itself causes.
3. Change latency, one watcher at a time: this process writes and stamps
   ``CLOCK_MONOTONIC`` (system-wide) just before each change; the watcher's
   process stamps its ``on_change`` call (the candidate: its batch). Appends
   to an open stream, files created, files replaced by rename, files deleted.
4. Through the server: another process appends intent commands through its
   own Service (stamped when each is durable) and the subscribed client
   stamps the ``loopstate/changed`` notification that carries it.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import re
import shutil
import signal
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

from loopstate_protocol.client import LoopstateClient

HERE = Path(__file__).resolve().parent
IMPLS = ("reference", "library")
LABELS = {"reference": "inotify binding (old)", "library": "watchdog (new)", "watchfiles": "watchfiles (candidate)"}
SELF = [sys.executable, str(Path(__file__).resolve())]


def use(impl: str) -> None:
    """Make ``impl`` the module every caller gets as ``loopstate.service.watch``."""
    if impl == "reference":
        sys.path.insert(0, str(HERE))
        import inotify_watch_reference

        sys.modules["loopstate.service.watch"] = inotify_watch_reference


# the child processes ---------------------------------------------------------------------------

def candidate(folder: str) -> None:
    """The rejected candidate, watchfiles' ``awatch`` (its defaults), printing as ``host`` does."""
    import watchfiles

    async def main() -> None:
        print(json.dumps(["ready", True]), flush=True)
        async for batch in watchfiles.awatch(folder):
            now = time.monotonic_ns()
            for _, path in batch:
                sys.stdout.write(json.dumps([os.path.basename(path), now]) + "\n")
            sys.stdout.flush()

    asyncio.run(main())


def host(impl: str, folder: str) -> None:
    """A bare Watcher on ``folder``: one JSON line [name, monotonic ns] per on_change call."""
    if impl == "watchfiles":
        return candidate(folder)
    use(impl)
    from loopstate.service.watch import Watcher

    async def main() -> None:
        loop = asyncio.get_running_loop()

        def on_change(path: Path, name: str | None) -> None:
            sys.stdout.write(json.dumps([name, time.monotonic_ns()]) + "\n")
            sys.stdout.flush()

        watcher = Watcher(loop, on_change)
        watcher.watch(Path(folder))
        print(json.dumps(["ready", watcher.available]), flush=True)
        await asyncio.Event().wait()

    asyncio.run(main())


def serve(impl: str) -> None:
    use(impl)
    from loopstate.cli.main import run

    sys.argv = ["loopstate", "serve"]
    run()


def writer(root: str, count: int, pause: float) -> None:
    """Append ``count`` intent commands, printing [sequence, monotonic ns when durable] per line."""
    from loopstate_protocol.intent import IntentTaskStart

    from loopstate.service.engine import Service

    service = Service()
    for i in range(count):
        outcome = service.execute(root, IntentTaskStart(label=f"bench-{i}"), f"bench-writer-{os.getpid()}-{i}")
        print(json.dumps([outcome.head.sequence, time.monotonic_ns()]), flush=True)
        time.sleep(pause)


# measuring -------------------------------------------------------------------------------------

def cpu_seconds(pid: int) -> float:
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def wakeups(pid: int) -> tuple[int, int]:
    """(context switches of every thread, threads): a process that polls wakes up; one that sleeps does not."""
    total = threads = 0
    for task in Path(f"/proc/{pid}/task").iterdir():
        threads += 1
        for line in (task / "status").read_text().splitlines():
            if line.startswith(("voluntary_ctxt_switches", "nonvoluntary_ctxt_switches")):
                total += int(line.split()[1])
    return total, threads


def rss_mib(pid: int) -> float:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1]) / 1024
    return float("nan")


def percentile(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(round(q / 100 * (len(ordered) - 1))))]


def strace_counts(pids: dict[str, int], seconds: float) -> dict[str, tuple[int, str]]:
    """(syscalls, the busiest few) per name, from ``strace -f -c`` attached for ``seconds``."""
    tracers = {name: subprocess.Popen(["strace", "-f", "-c", "-p", str(pid)], stdout=subprocess.DEVNULL,
                                      stderr=subprocess.PIPE, text=True) for name, pid in pids.items()}
    time.sleep(seconds)
    counts = {}
    for name, tracer in tracers.items():
        tracer.send_signal(signal.SIGINT)
        _, err = tracer.communicate(timeout=30)
        rows = []
        for line in err.splitlines():
            fields = line.split()
            # "% time seconds usecs/call calls [errors] syscall"
            if len(fields) >= 5 and re.fullmatch(r"[\d.]+", fields[0]) and fields[3].isdigit():
                rows.append((int(fields[3]), fields[-1]))
        total = sum(calls for calls, syscall in rows if syscall != "total")
        top = ", ".join(f"{syscall} {calls}" for calls, syscall in sorted(rows, reverse=True) if syscall != "total")
        counts[name] = (total, top or "none")
    return counts


class Host:
    """A watcher child and the notifications it prints, read on a thread."""

    def __init__(self, impl: str, folder: Path) -> None:
        self.proc = subprocess.Popen([*SELF, "--host", impl, str(folder)], stdout=subprocess.PIPE, text=True,
                                     bufsize=1)
        said = json.loads(self.proc.stdout.readline())
        while said[0] is None:  # arming an existing folder reports it once ("anything may have changed")
            said = json.loads(self.proc.stdout.readline())
        assert said == ["ready", True], said
        self.seen: list[tuple[str | None, int]] = []
        self.lock = threading.Lock()
        threading.Thread(target=self._read, daemon=True).start()

    def _read(self) -> None:
        for line in self.proc.stdout:
            name, at = json.loads(line)
            with self.lock:
                self.seen.append((name, at))

    def first(self, name: str, after: int, timeout: float = 5.0) -> int | None:
        """The first notification naming ``name`` at or after ``after`` (monotonic ns), waiting up to ``timeout``."""
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            with self.lock:
                for seen, at in self.seen:
                    if seen == name and at >= after:
                        return at
            time.sleep(0.0005)
        return None

    def close(self) -> None:
        self.proc.kill()
        self.proc.wait()


def changes(impl: str, folder: Path, count: int, pause: float) -> dict[str, list[float | None]]:
    """Latency (ms, None: never reported) of each kind of change, made by this process."""
    folder.mkdir(parents=True)
    stream = folder / "bench.jsonl"
    fd = os.open(stream, os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o600)
    watcher = Host(impl, folder)
    out: dict[str, list[float | None]] = {"append": [], "create": [], "rename": [], "delete": []}
    try:
        time.sleep(0.5)

        def timed(kind: str, name: str, change) -> None:
            began = time.monotonic_ns()
            change()
            unreported = bool(out[kind]) and out[kind][-1] is None  # a kind this watcher does not report
            at = watcher.first(name, began, timeout=0.3 if unreported else 5.0)
            out[kind].append(None if at is None else (at - began) / 1e6)
            time.sleep(pause)

        for i in range(count):
            timed("append", "bench.jsonl", lambda i=i: os.write(fd, b'{"i": %d}\n' % i))
        for i in range(count // 4):
            name = f"c{i}.jsonl"
            timed("create", name, lambda name=name: os.close(os.open(folder / name, os.O_WRONLY | os.O_CREAT, 0o600)))
            (folder / "r.tmp").write_bytes(b"replacement\n")
            timed("rename", f"r{i}.jsonl", lambda i=i: os.rename(folder / "r.tmp", folder / f"r{i}.jsonl"))
            timed("delete", name, lambda name=name: os.unlink(folder / name))
    finally:
        watcher.close()
        os.close(fd)
    return out


def start(impl: str, env: dict[str, str]) -> LoopstateClient:
    client = LoopstateClient([*SELF, "--serve", impl], env=env, stderr=subprocess.DEVNULL).start()
    client.initialize()
    return client


def served_latency(impl: str, env: dict[str, str], root: str, count: int, pause: float) -> list[float]:
    client = start(impl, env)
    try:
        client.execute(root, {"kind": "intent.task_start", "label": "warm"})  # the streams folder exists
        sub = client.subscribe(root, "intent/snapshot", deliver="events")
        seen: dict[int, int] = {}

        def collect() -> None:
            while len(seen) < count:
                method, params = client.next_notification(30)
                if method == "loopstate/changed" and params["subscription_id"] == sub.subscription_id:
                    now = time.monotonic_ns()
                    for event in params["events"] or []:
                        seen[event["sequence"]] = now

        collector = threading.Thread(target=collect, daemon=True)
        collector.start()
        proc = subprocess.run([*SELF, "--writer", root, str(count), str(pause)], env=env, capture_output=True,
                              text=True, check=True)
        collector.join(60)
        durable = dict(tuple(json.loads(line)) for line in proc.stdout.splitlines())
        missing = [s for s in durable if s not in seen]
        if missing:
            print(f"   warning: {LABELS[impl]}: {len(missing)} appends had no notification")
        return [(seen[s] - t) / 1e6 for s, t in durable.items() if s in seen]
    finally:
        client.close()


def row(label: str, values: list[float | None]) -> str:
    got = [v for v in values if v is not None]
    if not got:
        return f"   {label:<34}{'not reported':>26}   ({len(values)} changes)"
    lost = len(values) - len(got)
    tail = f"   ({lost} of {len(values)} not reported)" if lost else ""
    return f"   {label:<34}{percentile(got, 50):>8.2f}{percentile(got, 99):>8.2f}{max(got):>8.2f}{tail}"


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--idle", type=float, default=60.0, help="seconds of the idle count")
    parser.add_argument("--strace", type=float, default=60.0, help="seconds of strace -f -c (0: skip)")
    parser.add_argument("--changes", type=int, default=200, help="appends (and a quarter as many of each other change)")
    parser.add_argument("--pause", type=float, default=0.02, help="seconds between changes")
    args = parser.parse_args()

    import watchdog.version

    try:
        import watchfiles  # noqa: F401  (not a dependency: measured when installed)

        candidates = [*IMPLS, "watchfiles"]
    except ImportError:
        candidates = list(IMPLS)

    print(f"store watcher benchmark ({os.cpu_count()} CPUs, load {os.getloadavg()[0]:.1f}, Python "
          f"{sys.version.split()[0]}, watchdog {watchdog.version.VERSION_STRING})\n")
    with tempfile.TemporaryDirectory() as scratch:
        base = Path(scratch)
        root = base / "project"
        root.mkdir()
        env = dict(os.environ, LOOPSTATE_DATA_DIR=str(base / "data"))
        seed = start("library", env)
        seed.execute(str(root), {"kind": "intent.task_start", "label": "seed"})
        seed.close()

        procs: dict[str, int] = {}
        hosts, clients = [], []
        try:
            for impl in candidates:
                (base / f"idle-{impl}").mkdir()
                hosts.append(Host(impl, base / f"idle-{impl}"))
                procs[f"{LABELS[impl]}, bare Watcher"] = hosts[-1].proc.pid
            for impl in IMPLS:
                client = start(impl, env)
                client.subscribe(str(root), "intent/snapshot")
                client.subscribe(str(root), "intent/tasks", deliver="events")
                clients.append(client)
                procs[f"{LABELS[impl]}, serve + 2 subs"] = client.process.pid
            time.sleep(5.0)  # past the server's quiet-spell snapshot check (2 s after the last request)
            before = {name: (cpu_seconds(pid), wakeups(pid)[0]) for name, pid in procs.items()}
            time.sleep(args.idle)
            print(f"1. idle for {args.idle:.0f} s (all {len(procs)} at once)")
            print(f"   {'':<42}{'CPU s':>8}{'wake-ups':>10}{'threads':>9}{'RSS MiB':>9}")
            for name, pid in procs.items():
                woke, threads = wakeups(pid)
                print(f"   {name:<42}{cpu_seconds(pid) - before[name][0]:>8.3f}{woke - before[name][1]:>10}"
                      f"{threads:>9}{rss_mib(pid):>9.1f}")
            print(f"   {'target':<42}{'0':>8}{'0':>10}")
            if args.strace and shutil.which("strace"):
                counts = strace_counts(procs, args.strace)
                print(f"\n2. strace -f -c, {args.strace:.0f} s idle (each blocked call is restarted once by the attach)")
                for name, (total, top) in counts.items():
                    print(f"   {name:<42}{total:>6} syscalls: {top}")
            else:
                print("\n2. strace -f -c: skipped (no strace, or --strace 0)")
        finally:
            for item in hosts:
                item.close()
            for client in clients:
                client.close()

        print(f"\n3. a change by another process -> on_change in the watcher's process (ms; {args.changes} appends, "
              f"{args.changes // 4} of each other change, {args.pause * 1000:.0f} ms apart)")
        print(f"   {'':<34}{'p50':>8}{'p99':>8}{'max':>8}")
        measured = {impl: changes(impl, base / f"changes-{impl}", args.changes, args.pause) for impl in candidates}
        for kind in ("append", "create", "rename", "delete"):
            for impl in candidates:
                print(row(f"{kind}: {LABELS[impl]}", measured[impl][kind]))

        print(f"\n4. another process's durable append -> loopstate/changed at a subscribed client (ms; "
              f"{args.changes} appends)")
        print(f"   {'':<34}{'p50':>8}{'p99':>8}{'max':>8}")
        for impl in IMPLS:
            print(row(f"serve: {LABELS[impl]}", served_latency(impl, env, str(root), args.changes, args.pause)))
    return 0


if __name__ == "__main__":
    if len(sys.argv) > 1 and sys.argv[1] == "--host":
        host(sys.argv[2], sys.argv[3])
    elif len(sys.argv) > 1 and sys.argv[1] == "--serve":
        serve(sys.argv[2])
    elif len(sys.argv) > 1 and sys.argv[1] == "--writer":
        writer(sys.argv[2], int(sys.argv[3]), float(sys.argv[4]))
    else:
        sys.exit(main())
