"""The goals board at 100 and 100k todo events: warm pages, a real sidecar, the cold CLI, memory.

    .venv/bin/python tests/bench/bench_goals_board.py [--sizes 100,100000] [--repeat 5] [--memory-events 100000,1000000]

Each store is one goal whose history is todos added, claimed and completed (a
third of the events each: most todos completed, as in a goal a year old), built
through the domain's own ``decide`` and a real Ledger (bench_reads.build), then
compacted (`loopstate compact`: the projection snapshot at the head). Figures,
each beside its same-run reference:

- warm, in process (in the child process that built the store): the default
  ``goals.board`` page (median of 50 queries of a Service that has the goal
  folded) and its JSON size, beside the whole board (``limit: null``: what
  every board was before paging);
- warm, a real `loopstate serve` over stdio: the first query (it loads the
  snapshot) and the median round trip of the default page, beside the same
  server's round trip on the 100-event goal;
- cold CLI: `loopstate goals board bench` in a fresh process (best of
  ``--repeat``, wall time and peak RSS from ``wait4``) at each size, beside
  `python -c "import msgspec"` (children run with bytecode caching on, as an
  installed package has it, whatever PYTHONDONTWRITEBYTECODE says here);
- with ``--memory-events N,M,...``: the RSS of a `loopstate serve` subscribed to
  the board of a goal of N (then M...) such events (from /proc), beside the same
  server subscribed to the smallest goal, and the growth between sizes in MB
  per further 100k events.

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

import msgspec
from bench_reads import build, cold, goal_command

from loopstate_protocol import goals as g
from loopstate_protocol.client import LoopstateClient

from loopstate.domains.goals import DOMAIN as GOALS
from loopstate.service.engine import Service

WARM = 50


def store_paths(base: Path, events: int) -> tuple[str, dict[str, str]]:
    data, root = base / f"data-{events}", base / f"root-{events}"
    return str(root), {**child_env(), "LOOPSTATE_DATA_DIR": str(data)}


def make_store(base: Path, events: int) -> None:
    """Build and compact the store in a child process, which also times the warm in-process page:
    a child forked from a parent that holds a large state reports the parent's pages as its peak RSS."""
    started = time.perf_counter()
    subprocess.run([sys.executable, __file__, "--child", str(base), str(events)], check=True)
    print(f"  (built in {time.perf_counter() - started:.1f} s)")


def child(base: Path, events: int) -> None:
    root, env = store_paths(base, events)
    Path(root).mkdir()
    service = Service(data_dir=Path(env["LOOPSTATE_DATA_DIR"]))
    build(service, root, GOALS, "goals.bench", goal_command, events)
    service.compact(root)
    warm_in_process(service, root)


def child_env() -> dict[str, str]:
    """The environment of measured processes: bytecode cached, as an installed package has it
    (a first, unmeasured-best run writes it)."""
    return {k: v for k, v in os.environ.items() if k != "PYTHONDONTWRITEBYTECODE"}


def median_ms(fn, repeat: int = WARM) -> float:
    times = []
    for _ in range(repeat):
        start = time.perf_counter()
        fn()
        times.append(time.perf_counter() - start)
    return statistics.median(times) * 1000


def warm_in_process(service: Service, root: str) -> None:
    page = service.query(root, g.GetBoard(goal_id="bench"))
    whole = service.query(root, g.GetBoard(goal_id="bench", limit=None))
    page_ms = median_ms(lambda: service.query(root, g.GetBoard(goal_id="bench")))
    whole_ms = median_ms(lambda: service.query(root, g.GetBoard(goal_id="bench", limit=None)), repeat=5)
    print(f"  warm in process, default page  {page_ms:9.2f} ms  {len(msgspec.json.encode(page)):>11,} bytes"
          f"   (whole board: {whole_ms:8.1f} ms, {len(msgspec.json.encode(whole)):,} bytes)")


def rss_mib(pid: int, field: str = "VmRSS:") -> float:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith(field):
            return int(line.split()[1]) / 1024
    return float("nan")


def serve(env: dict[str, str]) -> LoopstateClient:
    client = LoopstateClient([sys.executable, "-m", "loopstate.cli.main", "serve"], env=env).start()
    client.initialize()
    return client


def warm_sidecar(env: dict[str, str], root: str, reference_root: str, reference_env: dict[str, str]) -> None:
    with serve(env) as client:
        start = time.perf_counter()
        first = client.query(root, g.GetBoard(goal_id="bench"), timeout=120)
        first_ms = (time.perf_counter() - start) * 1000
        page_ms = median_ms(lambda: client.query(root, g.GetBoard(goal_id="bench")))
        size = len(msgspec.json.encode(first))
    with serve(reference_env) as client:
        client.query(reference_root, g.GetBoard(goal_id="bench"))
        reference_ms = median_ms(lambda: client.query(reference_root, g.GetBoard(goal_id="bench")))
    print(f"  sidecar, default page          {page_ms:9.2f} ms  {size:>11,} bytes"
          f"   (first query {first_ms:.1f} ms; 100-event goal: {reference_ms:.2f} ms)")


def subscribed_rss(env: dict[str, str], root: str) -> tuple[float, float]:
    """RSS and peak RSS (MiB) of a server that answered a subscription to the goal's board."""
    with serve(env) as client:
        client.subscribe(root, "goals/board/bench", timeout=600)
        return rss_mib(client.process.pid), rss_mib(client.process.pid, "VmHWM:")


def main() -> None:
    if sys.argv[1:2] == ["--child"]:
        return child(Path(sys.argv[2]), int(sys.argv[3]))
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--sizes", default="100,100000")
    parser.add_argument("--repeat", type=int, default=5)
    parser.add_argument("--memory-events", default="", help="sizes for the sidecar RSS, e.g. 100000,500000,1000000")
    args = parser.parse_args()
    sizes = [int(s) for s in args.sizes.split(",")]
    print(f"load average {os.getloadavg()[0]:.2f}; {time.strftime('%Y-%m-%d %H:%M UTC', time.gmtime())}")
    with tempfile.TemporaryDirectory() as tmp:
        base = Path(tmp)
        msgspec_s, msgspec_rss = cold([sys.executable, "-c", "import msgspec"], child_env(), args.repeat)
        print(f"reference: python -c 'import msgspec'  {msgspec_s * 1000:7.1f} ms  {msgspec_rss:5.1f} MiB")
        small_root, small_env = store_paths(base, sizes[0])
        for size in sizes:
            print(f"\n{size:,} todo events")
            make_store(base, size)
            root, env = store_paths(base, size)
            warm_sidecar(env, root, small_root, small_env)
            seconds, rss = cold([sys.executable, "-m", "loopstate.cli.main", "goals", "board", "bench", "--root", root],
                                env, args.repeat)
            print(f"  cold `loopstate goals board`   {seconds * 1000:9.1f} ms  {rss:8.1f} MiB peak RSS"
                  f"   ({seconds / msgspec_s:.2f}x import msgspec)")
        small = subscribed_rss(small_env, small_root)[0] if args.memory_events else 0.0
        grown: list[tuple[int, float]] = []
        for size in [int(s) for s in args.memory_events.split(",") if s]:
            print(f"\n{size:,} todo events")
            if size not in sizes:
                make_store(base, size)
            root, env = store_paths(base, size)
            rss, peak = subscribed_rss(env, root)
            growth = "" if not grown else (f"; {(rss - grown[-1][1]) * 1.048576 / ((size - grown[-1][0]) / 1e5):.1f} MB"
                                           " per further 100k events")
            grown.append((size, rss))
            print(f"  sidecar subscribed to the board: {rss:7.1f} MiB RSS (peak {peak:.1f})"
                  f"   ({sizes[0]}-event goal: {small:.1f} MiB{growth})")


if __name__ == "__main__":
    main()
