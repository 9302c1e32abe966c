"""A goals snapshot (`goals compact`) never vouches for stream bytes that changed after it was written."""

from __future__ import annotations

import pytest

import json
import os
import subprocess
import sys
from pathlib import Path

from loopstate.core.project import Project


def goals_cli(data_dir: Path, root: Path, *args: str) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "LOOPSTATE_DATA_DIR": str(data_dir)}
    return subprocess.run([sys.executable, "-m", "loopstate.cli.main", "goals", *args, "--root", str(root)],
                          capture_output=True, text=True, env=env, timeout=60)


@pytest.mark.jsonl_only("changes a record in the file before its snapshot (on PostgreSQL a reader "
                        "starting from a snapshot reads no row before it; verify does: docs/storage.md)")
def test_a_board_read_from_a_snapshot_refuses_a_record_changed_before_it(data_dir: Path, root: Path) -> None:
    for number in range(5):
        assert goals_cli(data_dir, root, "add", "g1", f"task {number}").returncode == 0
    assert goals_cli(data_dir, root, "compact", "g1").returncode == 0
    assert goals_cli(data_dir, root, "add", "g1", "after the snapshot").returncode == 0
    assert (Project(str(root), data_dir=data_dir).dir / "snapshots" / "goals.g1.msgpack").exists()
    board = json.loads(goals_cli(data_dir, root, "board", "g1", "--json").stdout)
    assert board["meta"]["last_append_sequence"] == 7

    # A record well before the snapshot, changed in place (same size, same inode).
    stream = Project(str(root), data_dir=data_dir).dir / "streams" / "goals.g1.jsonl"
    data = stream.read_bytes()
    at = data.index(b'"title":"task 1"')
    with open(stream, "r+b") as out:
        out.seek(at)
        out.write(b'"title":"task 7"')

    refused = goals_cli(data_dir, root, "board", "g1", "--json")
    assert refused.returncode == 1, (refused.stdout, refused.stderr)
    error = json.loads(refused.stdout)["error"]  # --json: the error is the output
    assert error["code"] == "CORRUPT_LEDGER" and error["details"]["sequence"] == 2

