"""The intent and runs flows through the CLI, once on the local JSONL store and once on PostgreSQL, with the
same assertions: what the domains' own suites check on files, checked here where the store is the only
difference (real processes, a real server). A subset: intent start/replace/audit (a retired claim read back
by its place), runs create/acquire/heartbeat/stop/status (the kill switch halting the run), verify, log."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from urllib.parse import urlsplit

import pytest

CLI = [sys.executable, "-m", "loopstate.cli.main"]


@pytest.fixture(params=["jsonl", "postgresql"])
def cli(request: pytest.FixtureRequest, tmp_path: Path):
    """``cli(*args)``: a `loopstate ... --root ROOT --json` process on the parametrized store; its JSON."""
    root = tmp_path / "work"
    root.mkdir()
    env = {k: v for k, v in os.environ.items() if k != "LOOPSTATE_STORE"}
    env["LOOPSTATE_DATA_DIR"] = str(tmp_path / "data")
    if request.param == "postgresql":
        url = request.getfixturevalue("pg_url")
        env.update(LOOPSTATE_STORE=url, PGUSER=urlsplit(url).username or "")

    def run(*args: str, ok: bool = True) -> dict:
        done = subprocess.run([*CLI, *args, "--root", str(root), "--json"], capture_output=True, text=True, env=env,
                              timeout=60)
        assert (done.returncode == 0) == ok, f"{args}: {done.stderr}{done.stdout}"
        return json.loads(done.stdout or done.stderr)

    run.kind, run.data_dir = request.param, tmp_path / "data"  # type: ignore[attr-defined]
    return run


@pytest.mark.slow
def test_intent_a_replaced_claim_stays_in_the_audit(cli):
    started = cli("intent", "start", "--label", "t", "--claim", "outcome:ship it")
    task_id = started["events"][0]["task_id"]
    (first,) = cli("intent", "show")["by_facet"]["outcome"]["explicit"]
    cli("intent", "replace", "--supersedes", first["claim_id"], "--facet", "outcome", task_id, "ship it well")
    (now,) = cli("intent", "show")["by_facet"]["outcome"]["explicit"]
    assert now["statement"] == "ship it well"
    audit = cli("intent", "audit")
    statements = sorted(c["statement"] for c in audit["claims"])
    assert statements == ["ship it", "ship it well"] and audit["edges"]  # the retired one, read back from the store
    assert cli("verify")["ok"]
    (jsonl_files,) = {bool(list(cli.data_dir.rglob("*.jsonl")))}
    assert jsonl_files == (cli.kind == "jsonl")


@pytest.mark.slow
def test_runs_a_leased_run_halts_on_stop_and_the_log_has_it(cli):
    run_id = cli("run", "create", "--objective", "x", "--done-gate", "g", "--asset", "app")["run_id"]
    cli("run", "acquire", run_id)
    cli("run", "heartbeat", run_id)
    cli("run", "stop")
    status = cli("run", "status", run_id)
    assert json.dumps(status).count("halted_kill_switch") >= 1
    refused = cli("run", "create", "--objective", "y", "--done-gate", "g", "--asset", "app", ok=False)
    assert refused["error"]["code"] == "KILL_SWITCH"
    (stream,) = cli("log", "--stream", f"runs.{run_id}")["streams"]
    types = [e.get("type") for e in stream["events"]]
    assert "kill_switch_detected" in types and stream["head"]["sequence"] == len(stream["events"])
    assert cli("verify")["ok"]


@pytest.mark.slow
def test_goals_a_goal_added_is_listed_and_on_its_board(cli):
    cli("goals", "add", "g1", "ship the thing")
    assert "g1" in json.dumps(cli("goals", "list"))
    board = json.dumps(cli("goals", "board", "g1"))
    assert "ship the thing" in board and "T001" in board


@pytest.mark.slow
def test_compact_writes_every_streams_snapshot_and_the_next_read_starts_from_it(cli):
    started = cli("intent", "start", "--label", "t", "--claim", "outcome:ship it")
    task_id = started["events"][0]["task_id"]
    cli("intent", "add", "--facet", "hard_constraint", task_id, "keep the API")
    done = cli("compact")
    assert [(s["stream"], s["snapshot"]) for s in done["streams"]] == [("intent", True)]
    assert done["streams"][0]["sequence"] == 2
    (kept,) = cli.data_dir.glob("projects/*/snapshots/postgresql/intent.msgpack" if cli.kind == "postgresql"
                                else "projects/*/snapshots/intent.msgpack")
    assert kept.stat().st_size > 0
    shown = cli("intent", "show")["by_facet"]
    assert [c["statement"] for c in shown["hard_constraint"]["explicit"]] == ["keep the API"]
