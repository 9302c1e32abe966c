"""Projection files under SIGKILL: a real process writing run events, killed at random points, many times.

After every kill, each projection file that exists is whole, valid against the
run records' schema, and equal to the projection of some prefix of the log (a
file is only ever replaced atomically, after the append it shows); the next
command, from a fresh process, puts every file equal to the log's latest state
and leaves no temp file behind; and `run status` reads the log's answer. Every
other child patches issues.json into its spare file on every issue event
(``SPARE_FROM=0``), so kills land in that path too.
"""

from __future__ import annotations

import pytest

import json
import os
import random
import subprocess
import sys
import time
from pathlib import Path


from loopstate.core import canonical
from loopstate.domains.runs import DOMAIN, records
from loopstate.domains.runs.projections import issue_ledger
from loopstate.domains.runs.state import RunState

CHILD = Path(__file__).with_name("projection_child.py")
KILLS = 24
BUDGETS = {"max_duration_seconds": 10**8, "max_stage_attempts": 3, "max_mutations": 100, "max_external_actions": 0,
           "max_cost_usd": None}


class Prefixes:
    """The projections every prefix of the log gives, kept for the prefixes since the last repair.

    After each kill the test puts every file at the log's latest state, so at the next kill a file
    can only show that state or one of a later prefix: only those are encoded (all prefixes from
    the first event made this quadratic in the log, gigabytes on a machine fast enough to write
    thousands of events between kills)."""

    def __init__(self, run_id: str) -> None:
        self.state = RunState(run_id=run_id)
        self.folded = 0
        self.seen: dict[str, set[bytes]] = {"run.json": set(), "lease.json": set(), "issues.json": set()}
        self.issues_key: tuple | None = None

    def after(self, events: list[dict]) -> tuple[RunState, dict[str, set[bytes]]]:
        """Fold the events past the last call; the latest state and every file's valid contents."""
        for event in events[self.folded:]:
            self.state = DOMAIN.evolve(self.state, event)
            self.seen["run.json"].add(canonical.encode(self.state.run))
            if self.state.lease is not None:
                self.seen["lease.json"].add(canonical.encode(self.state.lease))
            # The ledger changes only with an issue's count or newest change time: encoded once per change.
            issues = self.state.issues
            key = (self.state.run is None, len(issues), max((i["updated_at"] for i in issues.values()), default=None))
            if key != self.issues_key:
                self.issues_key = key
                self.seen["issues.json"].add(canonical.encode(issue_ledger(self.state)))
        self.folded = len(events)
        return self.state, self.seen

    def repaired(self) -> None:
        """Every file was put at the latest state: only it and later ones are valid from now on."""
        self.seen = {"run.json": {canonical.encode(self.state.run)},
                     "lease.json": set() if self.state.lease is None else {canonical.encode(self.state.lease)},
                     "issues.json": {canonical.encode(issue_ledger(self.state))}}


@pytest.mark.jsonl_only("kills a child between JSONL appends and projection writes; the PostgreSQL store's faults are tests/pg/test_pg_faults.py")
def test_projection_files_stay_whole_and_right_under_sigkill(h, tmp_path):
    h.record_sweep = False  # the child's events are checked below, file by file
    run_id, lease = h.leased(budgets=BUDGETS)
    folder = h.service.project(h.root).dir / "runs" / run_id
    rng = random.Random(28)
    cycles = 0
    prefixes = Prefixes(run_id)
    for kill in range(KILLS):
        start = h.events(run_id)[-1]["at"]
        child = subprocess.Popen([sys.executable, str(CHILD), str(h.data_dir), h.root, run_id, lease["lease_id"],
                                  str(lease["generation"]), start], stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                                 env={**os.environ, **({"SPARE_FROM": "0"} if kill % 2 else {})})
        try:
            time.sleep(0.4 + rng.random() * 0.8)  # the child's imports take ~0.3 s: most kills land in its loop
        finally:
            child.kill()
            out, err = child.communicate(timeout=30)
        assert child.returncode == -9, err.decode()[-2000:]
        cycles += len(out.splitlines())
        events = h.events(run_id)
        final, seen = prefixes.after(events)
        for name, valid in seen.items():
            path = folder / name
            if not path.exists():
                continue
            data = path.read_bytes()
            assert data in valid, f"kill {kill}: {name} is no state of the log: {data[:200]!r}"
            records.validate({"run.json": "run", "lease.json": "lease", "issues.json": "issue_ledger"}[name],
                             json.loads(data))
        for path in (folder / "evidence").glob("*.json"):
            records.validate("evidence", json.loads(path.read_bytes()))
            assert path.stem in final.evidence, f"kill {kill}: evidence file {path.name} has no event"
        # The next command, in a fresh process, repairs from the log (here: a Sync through the CLI's Service).
        fresh = subprocess.run([sys.executable, "-c", (
            "import sys, uuid; from pathlib import Path; from loopstate.service.engine import Service;"
            "from loopstate_protocol import runs as proto; from loopstate.core.clock import FixedClock;"
            "Service(data_dir=Path(sys.argv[1]), clock=FixedClock(sys.argv[4]), lock_timeout=30).execute("
            "sys.argv[2], proto.Sync(run_id=sys.argv[3]), str(uuid.uuid4()))"), str(h.data_dir), h.root, run_id,
            events[-1]["at"]], capture_output=True, timeout=60)
        assert fresh.returncode == 0, fresh.stderr.decode()[-2000:]
        assert h.events(run_id) == events, "a sync with nothing to repair appended"
        assert (folder / "run.json").read_bytes() == canonical.encode(final.run)
        assert (folder / "lease.json").read_bytes() == canonical.encode(final.lease)
        assert (folder / "issues.json").read_bytes() == canonical.encode(issue_ledger(final))
        assert sorted(p.stem for p in (folder / "evidence").glob("*.json")) == sorted(final.evidence)
        assert not [p.name for p in folder.rglob("*") if ".loopstate-tmp-" in p.name], f"kill {kill}: temp left"
        status = h.status(run_id)
        assert (status.run, status.lease, status.sequence) == (final.run, final.lease, final.sequence)
        prefixes.repaired()
    assert cycles > KILLS, f"the child completed only {cycles} cycles in {KILLS} runs: the kills hit nothing"
