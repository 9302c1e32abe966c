"""Merkle checkpoints and proofs at scale, each beside the chain verification a reader already pays.

    .venv/bin/python tests/bench/bench_merkle.py [--sizes 1000,100000,1000000] [--repeat 3]

For each size it writes one intent stream of that many real, sealed events
(core/chain.seal, what an append writes; about 700 bytes each), then times, in
fresh processes as a user runs them: `loopstate verify` (the reference: the
chain check every reader pays), `loopstate checkpoint intent` (verify, hash
every line as a leaf, sign), `loopstate prove intent:N` for the middle event and
`loopstate prove --from` a checkpoint taken at half the size, and the offline
`loopstate check-proof` of each proof (no store). It prints the proofs' sizes
in bytes and hashes. In process, it also times CompactRange.append per leaf
(the O(log n) step an incremental tree adds per event) beside hashing the
leaf alone. Last (`--appends N`), the cost the kept tree adds to an append:
N durable `intent add` commands through Service.execute (one write and fsync
each) in alternating rounds with the engine's tree step on and replaced by a
no-op, p50 and p99 of each, with checkpoints signed every 256 events as by
default. Not part of the test run (the file is not named test_*.py).
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

from loopstate.core import merkle
from loopstate.core.chain import Position, seal
from loopstate.core.project import Project
from loopstate.service.front import stream_layout


def write_stream(path: Path, project_id: str, count: int) -> None:
    layout = stream_layout("intent")
    at = Position()
    path.parent.mkdir(parents=True, exist_ok=True)
    task = "0dee2d65-ea1d-5a48-b6c5-d8e6ef479922"
    with open(path, "wb") as f:
        for n in range(count):
            fields = {
                "schema_version": 1, "event_id": f"00000000-0000-4000-8000-{n:012d}", "project_id": project_id,
                "task_id": task, "occurred_at": "2026-12-01T00:00:00.000000Z", "actor": "user",
                "event_type": "task_started" if n == 0 else "claim_added",
                "payload": {"statement": f"Claim number {n} " + "x" * 400, "facets": ["outcome"]},
                "request_id": f"bench-{n}", "request_fingerprint": "0" * 64,
            }
            event, line = seal(fields, layout, at)
            at = Position(at.offset + len(line), event[layout.sequence_field], event[layout.hash_field])
            f.write(line)
        f.flush()
        os.fsync(f.fileno())


def timed(argv: list[str], env: dict[str, str], cwd: Path, repeat: int, stdin_file: Path | None = None) -> tuple[float, str]:
    best, out = float("inf"), ""
    for _ in range(repeat):
        start = time.perf_counter()
        done = subprocess.run(argv, env=env, cwd=cwd, capture_output=True, text=True,
                              stdin=open(stdin_file) if stdin_file else None)
        elapsed = time.perf_counter() - start
        if done.returncode != 0:
            raise SystemExit(f"{argv} failed: {done.stderr}")
        best, out = min(best, elapsed), done.stdout
    return best, out


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--sizes", default="1000,100000,1000000")
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument("--appends", type=int, default=2000)
    args = parser.parse_args()
    if args.appends:
        append_cost(args.appends)
    if not args.sizes:
        return
    cli = [sys.executable, "-m", "loopstate.cli.main"]
    print(f"{'events':>9} {'verify':>9} {'checkpoint':>11} {'prove':>9} {'prove --from':>13} "
          f"{'check inc':>10} {'check con':>10} {'inc proof':>16} {'con proof':>16}")
    for size in (int(s) for s in args.sizes.split(",")):
        with tempfile.TemporaryDirectory() as tmp:
            root, data = Path(tmp) / "proj", Path(tmp) / "data"
            root.mkdir()
            env = {**os.environ, "LOOPSTATE_DATA_DIR": str(data)}
            project = Project(root, data_dir=data)
            project.ensure()
            write_stream(project.dir / "streams" / "intent.jsonl", project.project_id, size // 2)
            half, _ = timed([*cli, "checkpoint", "intent"], env, root, 1)
            old = Path(tmp) / "old.checkpoint"
            old.write_text(subprocess.run([*cli, "checkpoint", "intent"], env=env, cwd=root, capture_output=True,
                                          text=True, check=True).stdout)
            write_stream(project.dir / "streams" / "intent.jsonl", project.project_id, size)  # same first half, longer
            (project.dir / "checkpoints").exists() and subprocess.run(["rm", "-rf", str(project.dir / "checkpoints")])
            t_verify, _ = timed([*cli, "verify"], env, root, args.repeat)
            t_cp, _ = timed([*cli, "checkpoint", "intent"], env, root, args.repeat)
            t_inc, inc = timed([*cli, "prove", f"intent:{size // 2 + 1}"], env, root, args.repeat)
            t_con, con = timed([*cli, "prove", "--from", str(old)], env, root, args.repeat)
            key = subprocess.run([*cli, "checkpoint", "--public-key"], env=env, cwd=root, capture_output=True,
                                 text=True, check=True).stdout.strip()
            (Path(tmp) / "inc").write_text(inc)
            (Path(tmp) / "con").write_text(con)
            t_ci, _ = timed([*cli, "check-proof", str(Path(tmp) / "inc"), "--key", key], env, root, args.repeat)
            t_cc, _ = timed([*cli, "check-proof", str(Path(tmp) / "con"), "--old", str(old), "--key", key], env, root,
                            args.repeat)
            inc_hashes = len(inc.split("\n\n")[0].split("\n")) - 3
            con_hashes = len(con.split("\n\n")[0].split("\n")) - 2
            print(f"{size:>9} {t_verify:>8.2f}s {t_cp:>10.2f}s {t_inc:>8.2f}s {t_con:>12.2f}s {t_ci:>9.2f}s "
                  f"{t_cc:>9.2f}s {len(inc):>7}B/{inc_hashes:>2} h {len(con):>7}B/{con_hashes:>2} h")
    leaves = [merkle.leaf_hash(n.to_bytes(8, "big")) for n in range(200_000)]
    lines = [n.to_bytes(8, "big") * 88 for n in range(200_000)]
    per = []
    for _ in range(args.repeat):
        compact = merkle.CompactRange()
        start = time.perf_counter()
        for leaf in leaves:
            compact.append(leaf)
        per.append((time.perf_counter() - start) / len(leaves) * 1e6)
    hash_only = []
    for _ in range(args.repeat):
        start = time.perf_counter()
        for line in lines:
            merkle.leaf_hash(line)
        hash_only.append((time.perf_counter() - start) / len(lines) * 1e6)
    print(f"in process, per event: CompactRange.append {statistics.median(per):.2f} us, "
          f"leaf hash of a 704-byte line {statistics.median(hash_only):.2f} us")


def append_cost(count: int) -> None:
    """p50/p99 of one durable claim append with the Merkle step and without it, alternating rounds."""
    from loopstate_protocol import intent as p

    from loopstate.service import Service, engine

    real = engine.grow_tree
    with tempfile.TemporaryDirectory() as tmp:
        root = Path(tmp) / "proj"
        root.mkdir()
        service = Service(data_dir=Path(tmp) / "data")
        task = service.execute(str(root), p.IntentTaskStart(label="bench"), "start").events[0]["task_id"]
        times: dict[str, list[float]] = {"with the tree": [], "without": []}
        n = 0
        for _ in range(10):
            for label in ("with the tree", "without"):
                engine.grow_tree = real if label == "with the tree" else (lambda project, stream, records: None)
                for _ in range(count // 20):
                    claim = p.ClaimInput(statement=f"Claim {n}", role="user", epistemic_status="explicit",
                                         facets=["outcome"])
                    start = time.perf_counter()
                    service.execute(str(root), p.IntentClaimAdd(task_id=task, actor="user", claim=claim), f"c{n}")
                    times[label].append(time.perf_counter() - start)
                    n += 1
        engine.grow_tree = real
        signed = (Path(tmp) / "data").rglob("*.checkpoint")
        print(f"durable claim appends, {n} in alternating rounds ({len(list(signed))} stream(s) with signed checkpoints):")
        base = statistics.median(times["without"])
        for label, values in times.items():
            values.sort()
            p50, p99 = statistics.median(values), values[int(len(values) * 0.99) - 1]
            print(f"  {label:<14} p50 {p50 * 1e3:.3f} ms  p99 {p99 * 1e3:.3f} ms  ({p50 / base:.3f}x)")


if __name__ == "__main__":
    main()
