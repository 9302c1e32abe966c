"""A real `loopstate serve` writes the projection snapshots its streams are due when it is
idle (``Service.snapshot_idle``, ``LoopstateServer._idle_check``): after another process
appended past the threshold and the snapshot the writer left is gone, the server, with no
request in flight, writes one at the head it holds, which a cold reader then starts from."""

from __future__ import annotations

import pytest
import os
import subprocess
import sys
import time
from pathlib import Path

import msgspec

from loopstate.core.snapshot import SnapshotFile
from loopstate.service import Service
from loopstate_protocol.client import LoopstateClient

SERVE = [sys.executable, "-m", "loopstate.cli.main", "serve"]
WRITER = """
import sys
from loopstate.service import Service
from loopstate_protocol.intent import IntentTaskStart
service = Service()
for n in range(int(sys.argv[2])):
    service.execute(sys.argv[1], IntentTaskStart(label=f"task {n} " + "x" * 180), f"w-{n}")
"""


def snapshot_head(path: Path) -> int | None:
    try:
        return msgspec.msgpack.decode(path.read_bytes(), type=SnapshotFile).binding.sequence
    except (FileNotFoundError, msgspec.DecodeError):
        return None


@pytest.mark.slow
def test_an_idle_server_writes_the_snapshot_its_stream_is_due(data_dir: Path, root: Path, tmp_path: Path) -> None:
    env = dict(os.environ, LOOPSTATE_DATA_DIR=str(data_dir))
    with open(tmp_path / "serve.log", "wb") as log:
        client = LoopstateClient(SERVE, env=env, stderr=log).start()
    try:
        client.initialize()
        client.execute(str(root), {"kind": "intent.task_start", "label": "first"}, "first")
        subprocess.run([sys.executable, "-c", WRITER, str(root), "400"], env=env, check=True, timeout=300)
        (project,) = (data_dir / "projects").iterdir()
        target = project / "snapshots" / "intent.msgpack"
        target.unlink(missing_ok=True)  # whatever the writer left: only the server can write one now
        tasks = client.query(str(root), {"kind": "intent.tasks"})  # the server folds the writer's appends
        assert len(tasks) == 401
        # Waiting, not timing: the server looks every couple of seconds once it is quiet.
        deadline = time.monotonic() + 120
        while snapshot_head(target) != 401 and time.monotonic() < deadline:
            time.sleep(0.2)
        assert snapshot_head(target) == 401, (tmp_path / "serve.log").read_text()
        cold = Service(data_dir=data_dir)
        folded = cold.refresh(cold.project(str(root)), cold.domains["intent"], "intent")
        assert folded.ledger.started_from == 401
    finally:
        client.close()
