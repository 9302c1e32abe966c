"""Purge records under crashes, through the real CLI: a torn record stops nothing, and a
purge cut short between its record and the stream's replacement is finished by its retry."""

from __future__ import annotations

import pytest

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

pytestmark = pytest.mark.jsonl_only("purge rewrites the intent file; on PostgreSQL it is refused (tests/team/test_team_proofs_on_pg.py)")

DOOMED = "The launch codename is Bluebird"


def cli(data_dir: Path, root: Path, *args: str) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "LOOPSTATE_DATA_DIR": str(data_dir)}
    return subprocess.run(
        [sys.executable, "-m", "loopstate.cli.main", *args, "--root", str(root), "--json"],
        env=env, capture_output=True, text=True, timeout=60,
    )


def ok(result: subprocess.CompletedProcess[str]) -> dict:
    assert result.returncode == 0, (result.returncode, result.stdout, result.stderr)
    return json.loads(result.stdout)


def store(data_dir: Path) -> Path:
    (project,) = (data_dir / "projects").iterdir()
    return project


def a_task_with_a_doomed_claim(data_dir: Path, root: Path) -> tuple[str, str]:
    task = ok(cli(data_dir, root, "intent", "start", "--label", "demo", "--request-id", "s1"))["events"][0]["task_id"]
    claim = ok(cli(data_dir, root, "intent", "add", task, DOOMED, "--request-id", "a1"))["events"][0]["payload"]["claim"]["claim_id"]
    return task, claim


def test_a_torn_purge_record_stops_no_later_intent_mutation(data_dir: Path, root: Path) -> None:
    task, claim = a_task_with_a_doomed_claim(data_dir, root)
    ok(cli(data_dir, root, "intent", "purge", "claim", claim, "--yes", "--request-id", "p1"))
    log = store(data_dir) / "purges" / "intent.jsonl"
    with open(log, "ab") as fh:  # what a power cut in the middle of the next record's write leaves
        fh.write(b'{"schema_version":1,"state":"prep')
    ok(cli(data_dir, root, "intent", "add", task, "Release on Monday", "--request-id", "a2"))
    assert ok(cli(data_dir, root, "intent", "purge", "claim", claim, "--yes", "--request-id", "p1"))["replayed"]
    # A purge request id is still refused for anything else, the torn line notwithstanding.
    reused = cli(data_dir, root, "intent", "add", task, "Something else", "--request-id", "p1")
    assert reused.returncode == 1 and "REQUEST_ID_REUSED" in reused.stdout + reused.stderr
    # The next record starts on a line of its own.
    other = ok(cli(data_dir, root, "intent", "add", task, "Purge me too", "--request-id", "a3"))["events"][0]
    ok(cli(data_dir, root, "intent", "purge", "claim", other["payload"]["claim"]["claim_id"], "--yes", "--request-id", "p2"))
    lines = log.read_bytes().splitlines()
    assert lines[2] == b'{"schema_version":1,"state":"prep' and all(json.loads(line) for line in lines[3:])


def test_a_purge_cut_short_after_its_record_is_finished_by_its_retry(data_dir: Path, root: Path, tmp_path: Path) -> None:
    """The record is durable before the stream is replaced: put the store back to the
    moment between the two (the record there, the old stream and checkpoint still in place)."""
    task, claim = a_task_with_a_doomed_claim(data_dir, root)
    folder = store(data_dir)
    before = tmp_path / "before"
    shutil.copytree(folder / "streams", before)
    ok(cli(data_dir, root, "intent", "purge", "claim", claim, "--yes", "--request-id", "p1"))
    log = folder / "purges" / "intent.jsonl"
    prepared, done = log.read_bytes().splitlines()
    assert json.loads(prepared)["state"] == "prepared" and json.loads(done)["state"] == "done"
    log.write_bytes(prepared + b"\n")
    shutil.rmtree(folder / "streams")
    shutil.copytree(before, folder / "streams")
    assert DOOMED.encode() in (folder / "streams" / "intent.jsonl").read_bytes()
    retried = ok(cli(data_dir, root, "intent", "purge", "claim", claim, "--yes", "--request-id", "p1"))
    assert not retried["replayed"]
    assert DOOMED.encode() not in (folder / "streams" / "intent.jsonl").read_bytes()
    assert ok(cli(data_dir, root, "verify"))
    # Now it is done: the same id for another target is refused, the exact retry replays.
    keep = ok(cli(data_dir, root, "intent", "add", task, "Keep me", "--request-id", "a2"))["events"][0]["payload"]["claim"]["claim_id"]
    refused = cli(data_dir, root, "intent", "purge", "claim", keep, "--yes", "--request-id", "p1")
    assert refused.returncode == 1 and "REQUEST_ID_REUSED" in refused.stdout + refused.stderr
    assert ok(cli(data_dir, root, "intent", "purge", "claim", claim, "--yes", "--request-id", "p1"))["replayed"]


def test_a_purge_whose_done_mark_was_lost_is_replayed_and_marked_done(data_dir: Path, root: Path) -> None:
    task, claim = a_task_with_a_doomed_claim(data_dir, root)
    ok(cli(data_dir, root, "intent", "purge", "claim", claim, "--yes", "--request-id", "p1"))
    log = store(data_dir) / "purges" / "intent.jsonl"
    log.write_bytes(log.read_bytes().splitlines()[0] + b"\n")  # the stream was replaced; the done mark lost
    assert ok(cli(data_dir, root, "intent", "purge", "claim", claim, "--yes", "--request-id", "p1"))["replayed"]
    assert [json.loads(line)["state"] for line in log.read_bytes().splitlines()] == ["prepared", "done"]
    keep = ok(cli(data_dir, root, "intent", "add", task, "Keep me", "--request-id", "a2"))["events"][0]["payload"]["claim"]["claim_id"]
    refused = cli(data_dir, root, "intent", "purge", "claim", keep, "--yes", "--request-id", "p1")
    assert refused.returncode == 1 and "REQUEST_ID_REUSED" in refused.stdout + refused.stderr
