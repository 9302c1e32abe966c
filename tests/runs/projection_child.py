"""A real process that keeps writing run events until it is killed (the projection crash test).

    projection_child.py DATA_DIR ROOT RUN_ID LEASE_ID GENERATION START

From START (the time after the run's last event) it loops: a durable heartbeat,
an evidence record, an issue opened, that issue moved on; each command through
its own Service on the real store, so each rewrites the run's projection files.
It prints one line per acknowledged command and never stops by itself. With
``SPARE_FROM`` in its environment, the writer's threshold for patching issues.json
into a spare file instead of writing it whole is set to that (0: every issue event patches).
"""

from __future__ import annotations

import itertools
import os
import sys
import uuid
from pathlib import Path

from loopstate_protocol import runs as proto

from loopstate.core.clock import FixedClock
from loopstate.service import run_projections
from loopstate.service.engine import Service

EVIDENCE = {"stage": "test", "requirement_ids": ["R1"], "type": "manual", "description": "looked", "procedure": ["look"],
            "outcome": "passed", "artifact_refs": [], "manual_observation": "fine", "digest": None, "environment": {}}


def main() -> None:
    data_dir, root, run_id, lease_id, generation, start = sys.argv[1:]
    if "SPARE_FROM" in os.environ:
        run_projections.SPARE_FROM = int(os.environ["SPARE_FROM"])
    clock = FixedClock(start)
    service = Service(data_dir=Path(data_dir), clock=clock, lock_timeout=30)
    held = {"run_id": run_id, "lease_id": lease_id, "generation": int(generation)}
    for n in itertools.count():
        clock.advance(140)  # past the renewal threshold since the last cycle's heartbeat: a durable renewal
        service.execute(root, proto.Heartbeat(**held), str(uuid.uuid4()))
        clock.advance(1)
        service.execute(root, proto.EvidenceAdd(evidence=EVIDENCE, **held), str(uuid.uuid4()))
        clock.advance(1)
        opened = service.execute(root, proto.IssueOpen(title=f"issue {n}", severity="low", blocking=False, **held),
                                 str(uuid.uuid4()))
        clock.advance(1)
        service.execute(root, proto.IssueUpdate(issue_id=opened.events[0]["data"]["issue_id"], status="acknowledged",
                                                **held), str(uuid.uuid4()))
        print(n, flush=True)


if __name__ == "__main__":
    main()
