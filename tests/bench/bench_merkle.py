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
leaf alone. Not part of the test run (the file is not named test_*.py).
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
    args = parser.parse_args()
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


if __name__ == "__main__":
    main()
