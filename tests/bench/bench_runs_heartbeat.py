"""Runs heartbeat benchmark: what an hour of frequent heartbeats costs the audit log, beside the seed's way.

    .venv/bin/python tests/bench/bench_runs_heartbeat.py [--interval 5] [--hours 1]

A harness heartbeats every INTERVAL seconds (pinned clock, real store, real
fsync) for HOURS. Printed beside each other:

* loopstate: events and bytes the run's log grew by, and the wall time per
  heartbeat call (coalesced calls write nothing; a durable renewal appends
  one event with the full projection);
* reference: the same count of heartbeats if each wrote one full-projection
  event, as the seed's runtime does (bytes estimated from the size of the real
  lease_renewed events written here).

Not part of the test run (the file is not named test_*.py).
"""

from __future__ import annotations

import argparse
import statistics
import sys
import tempfile
import time
from pathlib import Path

from loopstate_protocol import runs as proto

from loopstate.core.clock import FixedClock
from loopstate.core.ids import SequentialIds
from loopstate.service.engine import Service

AGENT = {"harness": "codex", "actor": "bench-agent", "session_id": "bench"}
SCOPE = {"assets": ["bench"], "actions": ["local_write"], "destinations": ["repository"], "exclusions": []}


def main() -> int:
    parser = argparse.ArgumentParser()
    parser.add_argument("--interval", type=float, default=5.0)
    parser.add_argument("--hours", type=float, default=1.0)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        root = Path(tmp) / "workspace"
        root.mkdir()
        clock = FixedClock("2026-08-16T08:00:00Z")
        ids = SequentialIds(prefix=1)
        service = Service(data_dir=Path(tmp) / "data", clock=clock, new_id=ids)
        grant_id, run_id = ids(), ids()
        n = iter(range(10**9))
        run = lambda command: service.execute(str(root), command, f"bench-{next(n)}")  # noqa: E731
        run(proto.AuthorityGrant(grant_id=grant_id, level="bounded", actor="bench", scope=SCOPE, risks_shown=["r"],
                                 confirmation_text="C", expires_at="2026-08-17T08:00:00Z"))
        run(proto.Create(run_id=run_id, asset={"name": "bench", "root": ".", "track": "code", "boundaries": ["b"]},
                         objective="bench", done_gate=["g"], authority_grant_id=grant_id, actor=AGENT,
                         budgets={"max_duration_seconds": 86400, "max_stage_attempts": 3, "max_mutations": 100,
                                  "max_external_actions": 0, "max_cost_usd": None}))
        lease = run(proto.Acquire(run_id=run_id, owner=AGENT)).events[0]["projection"]["lease"]
        log = service.project(str(root)).dir / "streams" / f"runs.{run_id}.jsonl"
        size_before, lines_before = log.stat().st_size, len(log.read_bytes().splitlines())
        calls = int(args.hours * 3600 / args.interval)
        coalesced, durable = [], []
        for _ in range(calls):
            clock.advance(args.interval)
            start = time.perf_counter()
            events = run(proto.Heartbeat(run_id=run_id, lease_id=lease["lease_id"], generation=0)).events
            (durable if events else coalesced).append(time.perf_counter() - start)
        lines = log.read_bytes().splitlines()
        grown_events = len(lines) - lines_before
        grown_bytes = log.stat().st_size - size_before
        per_event = grown_bytes / grown_events if grown_events else 0
        print(f"{calls} heartbeats every {args.interval:g} s for {args.hours:g} h")
        print(f"  loopstate: {grown_events} events, {grown_bytes / 1024:.1f} KiB "
              f"({per_event:.0f} bytes per written event)")
        print(f"  reference (one full-projection event per heartbeat): {calls} events, "
              f"{calls * per_event / 1024:.1f} KiB")
        if coalesced:
            print(f"  coalesced call: median {statistics.median(coalesced) * 1e3:.2f} ms ({len(coalesced)} calls)")
        if durable:
            print(f"  durable renewal: median {statistics.median(durable) * 1e3:.2f} ms ({len(durable)} calls)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
