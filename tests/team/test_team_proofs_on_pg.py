"""Signed checkpoints and proofs on a team's PostgreSQL store, through the real CLI: the Merkle tree is grown
from the stored lines (the same bytes a JSONL file holds), so `checkpoint`, `prove` (by sequence and by event
id, inclusion and consistency) and `verify --against` work there, and `check-proof` accepts the proofs with the
public key alone. A history cut in the database (rows deleted: a chain that still verifies) is caught by the
checkpoint kept from before. Real server, real processes."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from urllib.parse import urlsplit

import psycopg
import pytest

from loopstate.core.project import Project

CLI = [sys.executable, "-m", "loopstate.cli.main"]


@pytest.fixture
def on_pg(tmp_path: Path, pg_url: str):
    """``on_pg(*args, ok=True, cwd=ROOT)``: a CLI process on the PostgreSQL store; its completed process."""
    root = tmp_path / "work"
    root.mkdir()
    env = {k: v for k, v in os.environ.items() if k != "LOOPSTATE_STORE"}
    env.update(LOOPSTATE_DATA_DIR=str(tmp_path / "data"), LOOPSTATE_STORE=pg_url, PGUSER=urlsplit(pg_url).username or "")

    def run(*args: str, ok: bool = True, cwd: Path | None = None, data_dir: Path | None = None):
        here = dict(env, LOOPSTATE_DATA_DIR=str(data_dir)) if data_dir else env
        done = subprocess.run([*CLI, *args], capture_output=True, text=True, env=here, cwd=cwd or root, timeout=60)
        assert (done.returncode == 0) == ok, f"{args}: {done.stderr}{done.stdout}"
        return done

    run.root, run.data_dir = root, tmp_path / "data"  # type: ignore[attr-defined]
    return run


def five_events(on_pg) -> None:
    on_pg("intent", "start", "--claim", "outcome:Ship the proof")
    task = json.loads(on_pg("intent", "tasks", "--json").stdout)["current_task_id"]
    for n in range(4):
        on_pg("intent", "add", task, f"Constraint {n}")


@pytest.mark.slow
def test_checkpoint_and_both_proofs_on_pg_check_offline(on_pg, tmp_path: Path, pg_url: str):
    five_events(on_pg)
    key = on_pg("checkpoint", "--public-key").stdout.strip()
    old = on_pg("checkpoint", "intent").stdout
    assert old.splitlines()[1] == "5"
    (tmp_path / "old.checkpoint").write_text(old)
    task = json.loads(on_pg("intent", "tasks", "--json").stdout)["current_task_id"]
    on_pg("intent", "add", task, "Later")

    inclusion = on_pg("prove", "intent:2").stdout
    (logged,) = json.loads(on_pg("log", "--stream", "intent", "--json").stdout)["streams"]
    by_id = on_pg("prove", logged["events"][1]["event_id"]).stdout
    assert by_id.split("\n\n")[0] == inclusion.split("\n\n")[0]
    consistency = on_pg("prove", "--from", str(tmp_path / "old.checkpoint")).stdout
    (tmp_path / "inc.proof").write_text(inclusion)
    (tmp_path / "con.proof").write_text(consistency)

    elsewhere, empty = tmp_path / "elsewhere", tmp_path / "empty-data"
    elsewhere.mkdir()
    said = json.loads(on_pg("check-proof", str(tmp_path / "inc.proof"), "--key", key, "--json", cwd=elsewhere,
                            data_dir=empty).stdout)
    assert said["ok"] and said["index"] == 1 and said["tree_size"] == 6
    said = on_pg("check-proof", str(tmp_path / "con.proof"), "--old", str(tmp_path / "old.checkpoint"), "--key", key,
                 cwd=elsewhere, data_dir=empty).stdout
    assert "at 6 events still begins with the 5 events" in said
    assert "still beginning with the 5 events" in on_pg("verify", "--against", str(tmp_path / "old.checkpoint")).stdout
    assert not list(on_pg.data_dir.rglob("*.jsonl"))  # the lines came from the database

    # Someone with the database cuts the history: the chain that is left still verifies; the checkpoint does not.
    project_id = Project(str(on_pg.root), data_dir=on_pg.data_dir).project_id
    with psycopg.connect(pg_url, autocommit=True) as conn:
        conn.execute("DELETE FROM loopstate.events WHERE project = %s AND stream = 'intent' AND sequence > 3",
                     (project_id,))
    assert json.loads(on_pg("verify", "--json").stdout)["ok"]
    refused = on_pg("verify", "--against", str(tmp_path / "old.checkpoint"), ok=False)
    assert "CORRUPT_LEDGER" in refused.stderr and "history was cut" in refused.stderr


@pytest.mark.slow
def test_a_stream_or_event_that_is_not_there_is_refused_clearly_on_pg(on_pg):
    five_events(on_pg)
    assert "no stream 'runs.nope'" in on_pg("checkpoint", "runs.nope", ok=False).stderr
    assert "no event number 99" in on_pg("prove", "intent:99", ok=False).stderr
    assert "no event 'not-an-id'" in on_pg("prove", "not-an-id", ok=False).stderr


@pytest.mark.slow
def test_an_intent_purge_on_pg_is_refused_before_anything_changes_saying_what_to_do(on_pg, pg_url: str):
    on_pg("intent", "start", "--claim", "outcome:Ship the proof")
    (claim,) = json.loads(on_pg("intent", "show", "--json").stdout)["by_facet"]["outcome"]["explicit"]
    before = json.loads(on_pg("log", "--stream", "intent", "--json").stdout)["streams"][0]["events"]
    refused = json.loads(on_pg("intent", "purge", "claim", claim["claim_id"], "--yes", "--json", ok=False).stdout)
    error = refused["error"]
    assert error["code"] == "INVALID_PARAMS" and "refused on the shared store" in error["message"]
    assert "write-ahead log" in error["message"] and "loopstate intent invalidate" in error["message"]
    assert error["details"]["store"].startswith("postgresql://")
    after = json.loads(on_pg("log", "--stream", "intent", "--json").stdout)["streams"][0]["events"]
    assert after == before  # not a row re-chained
    project = Project(str(on_pg.root), data_dir=on_pg.data_dir)
    assert not (project.dir / "purges").exists()  # no prepared record a retry would act on
    # An unknown id gets the same refusal, not a NOT_FOUND that would send the user looking for it.
    unknown = json.loads(on_pg("intent", "purge", "claim", "0" * 8 + "-0000-4000-8000-" + "0" * 12, "--yes",
                               "--json", ok=False).stdout)["error"]
    assert "refused on the shared store" in unknown["message"]
    with psycopg.connect(pg_url) as conn:
        (rows,) = conn.execute("SELECT count(*) FROM loopstate.events WHERE project = %s AND stream = 'intent'",
                               (project.project_id,)).fetchone()
    assert rows == len(before)
