"""Goals replay: a cold full replay vs. a replay from a snapshot checkpoint, and the fold alone.

Prints, in one run: two references (a streaming msgspec decode of the same
file; the core's chain verification without folding), a full verified replay of the goal stream,
and a replay that starts from the snapshot written by `goals compact` with a
few events after it; then the fold alone (``evolve`` over the events already
decoded in memory, best of three, in µs per event) and what the folded state
holds in bytes, part by part. Usage: python tests/bench/goals_replay.py [events]
"""

from __future__ import annotations

import sys
import tempfile
import time
from pathlib import Path

import msgspec
from bench_reads import build as build_events
from bench_reads import goal_command

from loopstate_protocol import goals as g

from loopstate.core.clock import FixedClock
from loopstate.core.project import Project
from loopstate.core.stream import Stream
from loopstate.domains.goals import DOMAIN
from loopstate.domains.goals.domain import LAYOUT
from loopstate.domains.goals.state import evolve, initial, state_bytes
from loopstate.service.engine import Service
from loopstate.service.goals_effects import load_state

def build(data: Path, root: Path, count: int, clock: FixedClock) -> None:
    """Append ``count`` realistic events (adds, claims, completions) through the domain's decide and a
    real Ledger, a thousand per write+fsync (bench_reads.build)."""
    service = Service(data_dir=data, clock=clock, domains=[DOMAIN])
    build_events(service, str(root), DOMAIN, "goals.bench", goal_command, count)


def fold_alone(path: Path) -> None:
    """``evolve`` over every event of the stream, decoded beforehand; and the state's parts in bytes."""
    decoder = msgspec.json.Decoder()
    with open(path, "rb") as handle:
        events = [decoder.decode(line) for line in handle]
    best, state = float("inf"), None
    for _ in range(3):
        start = time.perf_counter()
        state = initial("bench")
        for event in events:
            state = evolve(state, event)
        best = min(best, time.perf_counter() - start)
    print(f"{'fold alone (evolve, events in memory)':<44} {best * 1e6 / len(events):9.2f} us/event")
    ids, done = state.event_ids, state.done
    parts = {
        "event ids: tags": len(ids.index.tags), "event ids: probe slots": len(ids.index.slots),
        "event ids: digest marks and times": len(ids.marks), "archive: records": len(done.data),
        "archive: offsets and keys": len(done.index),
        "done ids: tags and probe slots": len(state.done_ids.tags) + len(state.done_ids.slots),
    }
    for label, size in parts.items():
        print(f"  {label:<42} {size / 1e6:9.2f} MB  {size / len(events):6.1f} bytes/event")
    print(f"  {'snapshot encoding of the whole state':<42} {len(state_bytes(state)) / 1e6:9.2f} MB")


def timed(label: str, count: int, fn) -> float:
    start = time.perf_counter()
    result = fn()
    seconds = time.perf_counter() - start
    print(f"{label:<44} {seconds * 1000:9.1f} ms  {count / seconds:12,.0f} events/s")
    return result


def main() -> None:
    count = int(sys.argv[1]) if len(sys.argv) > 1 else 30_000
    with tempfile.TemporaryDirectory() as tmp:
        data, root = Path(tmp) / "data", Path(tmp) / "root"
        root.mkdir()
        clock = FixedClock("2026-03-02T12:00:00Z")
        project = Project(root, data_dir=data)
        build(data, root, count, clock)
        path = project.dir / "streams" / "goals.bench.jsonl"
        decoder = msgspec.json.Decoder()

        def reference() -> int:
            with open(path, "rb") as handle:
                return sum(1 for line in handle if decoder.decode(line))

        def verify_only() -> int:
            stream = Stream(project.dir, "goals.bench", LAYOUT)
            return sum(1 for _ in stream.read_new())

        print(f"goal stream of {count:,} events, {path.stat().st_size / 1e6:.1f} MB")
        timed("reference: streaming msgspec decode only", count, reference)
        timed("reference: core chain verify, no fold", count, verify_only)
        full = timed("full replay (verify chain + fold)", count, lambda: load_state(project, "bench", use_snapshot=False))
        service = Service(data_dir=data, clock=clock, domains=[DOMAIN])
        service.execute(str(root), g.Compact(goal_id="bench"), "compact-1")
        for n in range(10):
            service.execute(str(root), g.AddTodo(goal_id="bench", title=f"after {n}"), f"after-{n}")
        fast = timed("replay from snapshot (+10 events after it)", count, lambda: load_state(project, "bench"))
        print(f"full replay folded {full.events_folded:,} events; snapshot replay folded {fast.events_folded} "
              f"(snapshot through sequence {fast.snapshot_sequence})")
        fold_alone(path)


if __name__ == "__main__":
    main()
