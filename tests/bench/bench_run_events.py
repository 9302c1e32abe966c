"""Run events beside intent claim appends, as the run's log grows.

    .venv/bin/python tests/bench/bench_run_events.py [--events 10000] [--samples 200] [--dir DIR] [--baseline TREE]

One `Service` (real store, real fsync, pinned clock) holds a run and an
intent task. Both streams are grown to the same size (the run with a mix of
durable heartbeats, evidence records and issues: 8:1:1; the task with claims),
then each kind of command is timed, interleaved so every kind sees the same
disk and the same load:

* reference: `intent.claim_add`, one claim appended to a task of that many events;
* `runs.heartbeat` (a durable renewal: the clock moves past the renewal threshold);
* `runs.evidence_add` (a new evidence record, and its projection file);
* `runs.issue_open` (a new issue: the run's issue ledger changes);

p50 and p99 of wall time, and CPU (user+sys of this process) per command. The
sizes are printed at 100 events and at `--events`, so the growth is visible in
one run. Verdict: every run event's p50 within 1.5x of the claim append's p50 at
the same size. With ``--baseline TREE`` (a folder holding another tree's ``server`` and
``protocol``, e.g. ``git archive main server protocol | tar -x -C TREE``) the same
script then runs again on that tree in a child process, in the same run, and its
table is printed after this one's. Not part of the test run (the file is not named test_*.py).
"""

from __future__ import annotations

import argparse
import os
import resource
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from loopstate_protocol import intent as i
from loopstate_protocol import runs as proto

from loopstate.core.clock import FixedClock
from loopstate.core.ids import SequentialIds
from loopstate.service.engine import Service

AGENT = {"harness": "codex", "actor": "bench-agent", "session_id": "bench"}
SCOPE = {"assets": ["bench"], "actions": ["local_write"], "destinations": ["repository"], "exclusions": []}
EVIDENCE = {"stage": "test", "requirement_ids": ["R1"], "type": "manual", "description": "looked", "procedure": ["look"],
            "outcome": "passed", "artifact_refs": [], "manual_observation": "fine", "digest": None, "environment": {}}
STEP = 151.0  # seconds: past the renewal threshold (min(heartbeat, lease / 2)), so every heartbeat is durable


def cpu() -> float:
    usage = resource.getrusage(resource.RUSAGE_SELF)
    return usage.ru_utime + usage.ru_stime


class Bench:
    def __init__(self, tmp: Path) -> None:
        self.root = tmp / "workspace"
        self.root.mkdir()
        self.clock = FixedClock("2026-08-16T08:00:00Z")
        self.ids = SequentialIds(prefix=1)
        self.service = Service(data_dir=tmp / "data", clock=self.clock, new_id=self.ids)
        self.n = 0
        grant_id, self.run_id = self.ids(), self.ids()
        self.execute(proto.AuthorityGrant(grant_id=grant_id, level="bounded", actor="bench", scope=SCOPE,
                                          risks_shown=["r"], confirmation_text="C", expires_at="2036-08-17T08:00:00Z"))
        self.execute(proto.Create(run_id=self.run_id, objective="bench", done_gate=["g"], authority_grant_id=grant_id,
                                  asset={"name": "bench", "root": ".", "track": "code", "boundaries": ["b"]}, actor=AGENT,
                                  budgets={"max_duration_seconds": 10**9, "max_stage_attempts": 3, "max_mutations": 100,
                                           "max_external_actions": 0, "max_cost_usd": None}))
        lease = self.execute(proto.Acquire(run_id=self.run_id, owner=AGENT)).events[0]["projection"]["lease"]
        self.held = {"lease_id": lease["lease_id"], "generation": lease["generation"]}
        self.task = self.execute(i.IntentTaskStart(label="bench")).events[0]["task_id"]
        self.run_events = 3
        self.claim_events = 1

    def execute(self, command):
        self.n += 1
        return self.service.execute(str(self.root), command, f"bench-{self.n}")

    def heartbeat(self):
        self.clock.advance(STEP)
        return self.execute(proto.Heartbeat(run_id=self.run_id, **self.held))

    def evidence(self):
        return self.execute(proto.EvidenceAdd(run_id=self.run_id, evidence=EVIDENCE, **self.held))

    def issue(self):
        return self.execute(proto.IssueOpen(run_id=self.run_id, title=f"issue {self.n}", severity="low",
                                            blocking=False, **self.held))

    def claim(self):
        claim = i.ClaimInput(statement=f"claim {self.n}: keep the public API stable", role="user",
                             epistemic_status="explicit", facets=["outcome"])
        return self.execute(i.IntentClaimAdd(task_id=self.task, claim=claim))

    def grow(self, events: int) -> None:
        """Both streams up to ``events``: the run 8 heartbeats : 1 evidence : 1 issue, the task claims."""
        kinds = [self.heartbeat] * 8 + [self.evidence, self.issue]
        while self.run_events < events:
            kinds[self.run_events % len(kinds)]()
            self.run_events += 1
        while self.claim_events < events:
            self.claim()
            self.claim_events += 1

    def sample(self, samples: int) -> dict[str, tuple[list[float], float]]:
        kinds = {"intent.claim_add (reference)": self.claim, "runs.heartbeat": self.heartbeat,
                 "runs.evidence_add": self.evidence, "runs.issue_open": self.issue}
        wall: dict[str, list[float]] = {name: [] for name in kinds}
        spent = dict.fromkeys(kinds, 0.0)
        for _ in range(samples):
            for name, call in kinds.items():
                c0, t0 = cpu(), time.perf_counter()
                events = call().events
                wall[name].append(time.perf_counter() - t0)
                spent[name] += cpu() - c0
                assert events, name  # every sample appended an event
        self.run_events += 3 * samples
        self.claim_events += samples
        return {name: (wall[name], spent[name] / samples) for name in kinds}


def p(values: list[float], q: float) -> float:
    return sorted(values)[min(len(values) - 1, int(q * len(values)))]


def main() -> int:
    parser = argparse.ArgumentParser()
    parser.add_argument("--events", type=int, default=10_000)
    parser.add_argument("--samples", type=int, default=200)
    parser.add_argument("--dir", default=None, help="scratch folder (default: the system's temp folder)")
    parser.add_argument("--baseline", default=None, help="another tree (its server/ and protocol/) run after this one")
    args = parser.parse_args()
    print(f"python {sys.version.split()[0]}, load average {os.getloadavg()[0]:.2f}")
    verdicts = []
    with tempfile.TemporaryDirectory(dir=args.dir) as tmp:
        bench = Bench(Path(tmp))
        for size in (100, args.events):
            t0 = time.perf_counter()
            bench.grow(size)
            print(f"\n{size:,} events in each stream (grown in {time.perf_counter() - t0:.1f} s)")
            results = bench.sample(args.samples)
            ref = statistics.median(results["intent.claim_add (reference)"][0])
            ref_cpu = results["intent.claim_add (reference)"][1]
            print(f"  {'command':32} {'p50':>9} {'p99':>9} {'CPU':>9} {'p50 / claim':>12} {'CPU / claim':>12}")
            for name, (wall, spent) in results.items():
                ratio = statistics.median(wall) / ref
                print(f"  {name:32} {statistics.median(wall) * 1e3:7.2f}ms {p(wall, 0.99) * 1e3:7.2f}ms "
                      f"{spent * 1e3:7.2f}ms {ratio:11.2f}x {spent / ref_cpu:11.2f}x")
                if size == args.events and not name.endswith("(reference)"):
                    verdicts.append((name, ratio, spent / ref_cpu))
        print(f"\nload average {os.getloadavg()[0]:.2f}")
    print(f"verdict at {args.events:,} events (each run event's p50 within 1.5x of the claim append's; the CPU "
          "ratio beside it is what a quiet machine's wall tends to, where the fsync is short):")
    for name, ratio, cpu_ratio in verdicts:
        print(f"  {name}: {ratio:.2f}x wall {'met' if ratio <= 1.5 else 'NOT MET'}, {cpu_ratio:.2f}x CPU "
              f"{'(within 1.5x)' if cpu_ratio <= 1.5 else '(above 1.5x)'}")
    if args.baseline:
        tree = os.path.abspath(args.baseline)
        print(f"\n=== the same script on the baseline tree {tree} ===", flush=True)
        env = {**os.environ, "PYTHONPATH": os.pathsep.join((os.path.join(tree, "server"), os.path.join(tree, "protocol")))}
        command = [sys.executable, __file__, "--events", str(args.events), "--samples", str(args.samples)]
        subprocess.run(command + (["--dir", args.dir] if args.dir else []), env=env, check=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
