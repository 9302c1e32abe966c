"""The service on a team's PostgreSQL store, past what the two-machine test shows: the runs' own kill-switch
check sees the shared stop, `verify` and `log` read the shared streams, the Merkle tree grows from the stored
lines (others' too), and retired claims are read back by their place. Real server, real processes."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import msgspec
import pytest

from loopstate.core import merkle
from loopstate.core.chain import ChainError
from loopstate.core.project import Project
from loopstate.core.stores import open_store
from loopstate.domains.intent import retired
from loopstate.service import tree_heads
from loopstate.service.front import stream_layout
from loopstate.service.intent_effects import StreamRecords
from tests.team.test_team_two_machines import Machine

CLI = [sys.executable, "-m", "loopstate.cli.main"]


@pytest.fixture
def pair(tmp_path: Path, team_url: str, pg_user: str):
    """Two machines of one team (clones of one origin whose committed store file names the PostgreSQL URL)."""
    origin = tmp_path / "origin"
    origin.mkdir()
    git = ["git", "-c", "user.name=t", "-c", "user.email=t@example.org"]
    subprocess.run(["git", "init", "-q"], cwd=origin, check=True, timeout=60)
    subprocess.run([*CLI, "init", "--store", team_url, "--root", str(origin)], check=True, capture_output=True,
                   timeout=60, env={**__import__("os").environ, "LOOPSTATE_DATA_DIR": str(tmp_path / "o")})
    subprocess.run([*git, "add", ".gitignore", ".loopstate/store.json"], cwd=origin, check=True, timeout=60)
    subprocess.run([*git, "commit", "-q", "-m", "the team's store"], cwd=origin, check=True, timeout=60)
    machines = [Machine("a", tmp_path, origin, pg_user), Machine("b", tmp_path, origin, pg_user)]
    yield machines
    for machine in machines:
        machine.close()


def refused(machine: Machine, *args: str) -> dict:
    done = subprocess.run([*CLI, *args, "--root", str(machine.root), "--json"], capture_output=True, text=True,
                          env=machine.env, timeout=60)
    assert done.returncode != 0, done.stdout
    return msgspec.json.decode(done.stdout or done.stderr)["error"]


@pytest.mark.slow
def test_a_stop_set_on_one_machine_refuses_a_run_created_on_the_other_until_lifted(pair):
    a, b = pair
    a.cli("run", "stop", "--reason", "freeze")
    assert not (b.root / ".loopstate" / "STOP").exists()
    error = refused(b, "run", "create", "--objective", "x", "--done-gate", "g", "--asset", "app")
    assert error["code"] == "KILL_SWITCH" and "shared store" in error["message"]
    listed = b.cli("run", "list")
    assert listed["kill_switch"]["set"] and any("shared store" in p for p in listed["kill_switch"]["paths"])
    a.cli("run", "unstop")
    assert b.cli("run", "create", "--objective", "x", "--done-gate", "g", "--asset", "app")["run_id"]
    assert not b.cli("run", "list")["kill_switch"]["set"]


@pytest.mark.slow
def test_verify_and_log_read_the_shared_streams_from_either_machine(pair):
    a, b = pair
    run_id = a.cli("run", "create", "--objective", "x", "--done-gate", "g", "--asset", "app")["run_id"]
    b.cli("run", "acquire", run_id, "--harness", "codex", "--actor", "bot-b")
    verified = b.cli("verify")
    assert verified["ok"] and f"runs.{run_id}" in [s["stream"] for s in verified["streams"]]
    (run,) = [s for s in verified["streams"] if s["stream"] == f"runs.{run_id}"]
    logged = a.cli("log", "--stream", f"runs.{run_id}")
    (only,) = logged["streams"]
    assert only["head"]["sequence"] == run["sequence"] >= 3 and len(only["events"]) == run["events"]
    assert [e["sequence"] for e in only["events"]] == list(range(1, run["events"] + 1))


@pytest.mark.slow
def test_the_tree_grows_from_the_stored_lines_others_appended_too(pair, monkeypatch: pytest.MonkeyPatch):
    a, b = pair
    a.env["LOOPSTATE_CHECKPOINT_EVENTS"] = "1"  # a signs (and keeps its tree) after every append
    run_id = a.cli("run", "create", "--objective", "x", "--done-gate", "g", "--asset", "app")["run_id"]
    b.cli("run", "acquire", run_id, "--harness", "codex", "--actor", "bot-b")  # b's lines, between a's
    a.cli("run", "stop")  # a appends again: its tree must take in b's acquire first
    name = f"runs.{run_id}"
    project = Project(str(a.root), data_dir=a.data_dir)
    monkeypatch.setenv("PGUSER", a.env["PGUSER"])
    store = open_store(project)
    lines = [stored.line for stored in store.read(name, stream_layout(name))]
    folder = a.data_dir / "projects" / project.project_id / "transparency"
    kept = msgspec.msgpack.decode((folder / f"{name}.tree").read_bytes(), type=tree_heads.KeptTree)
    whole = merkle.CompactRange(0, [])
    for line in lines:
        whole.append(merkle.leaf_hash(line))
    assert kept.size == kept.signed_size == len(lines) and kept.compact().root() == whole.root()
    assert (folder / f"{name}.checkpoint").read_text().strip()  # the signed note beside it
    assert not (b.data_dir / "projects" / project.project_id / "transparency").exists()  # b signs nothing here
    assert not list(a.data_dir.rglob("*.jsonl"))


@pytest.mark.slow
def test_a_retired_claim_is_read_back_by_its_place_and_a_wrong_one_refused(pair, monkeypatch: pytest.MonkeyPatch):
    a, _ = pair
    task_id = a.client.execute(str(a.root), {"kind": "intent.task_start", "label": "t"}, "s-1").events[0]["task_id"]
    a.client.execute(str(a.root), {"kind": "intent.claim_add", "task_id": task_id, "claim": {
        "statement": "keep me", "role": "user", "epistemic_status": "explicit", "facets": ["outcome"]}}, "c-1")
    monkeypatch.setenv("PGUSER", a.env["PGUSER"])
    store = open_store(Project(str(a.root), data_dir=a.data_dir))
    layout = stream_layout("intent")
    stored = list(store.read("intent", layout))
    reader = StreamRecords.of_store(store, "intent", layout)
    last = stored[-1]
    event = reader(last.start, retired.digest_of(last.hash))
    assert event["event_hash"] == last.hash
    with pytest.raises(ChainError):
        reader(last.start, retired.digest_of(stored[0].hash))  # not the record its chain had there
    with pytest.raises(ChainError):
        reader(last.start + 1, retired.digest_of(last.hash))  # no record starts there


@pytest.mark.slow
def test_the_kill_switch_topic_on_one_machine_hears_the_others_stop(pair):
    from tests.team.test_team_two_machines import next_change

    a, b = pair
    sub = b.client.subscribe(str(b.root), "project/kill_switch")
    assert not sub.snapshot["set"]
    a.cli("run", "stop")
    note = next_change(b.client, sub.subscription_id, lambda n: n.snapshot["set"])
    assert any("shared store" in path for path in note.snapshot["paths"])
    a.cli("run", "unstop")
    next_change(b.client, sub.subscription_id, lambda n: not n.snapshot["set"])


@pytest.mark.slow
def test_a_machine_that_never_wrote_reads_a_goal_from_the_shared_store_in_the_clis_own_checks(pair):
    """`goals add --role R` takes a role a todo of the goal already has; machine b holds no folder of the
    project, and its check reads the goal from the shared store (it read nothing, and refused the role)."""
    a, b = pair
    a.cli("goals", "add", "g1", "write the notes", "--new-goal", "--role", "tech-writer", "--new-role")
    assert not Project(str(b.root), data_dir=b.data_dir).exists()
    b.cli("goals", "add", "g1", "review the notes", "--role", "tech-writer")
    board = msgspec.json.encode(b.cli("goals", "board", "g1")).decode()
    assert "write the notes" in board and "review the notes" in board


@pytest.mark.slow
def test_a_gate_opened_on_one_machine_holds_the_stop_hook_on_a_machine_that_never_wrote(pair):
    """The stop hook's open gates are read from the shared store, not from a folder this machine lacks."""
    from tests.hooks.hookkit import hook, host_input

    a, b = pair
    a.cli("goals", "gate", "ship", "Owner sign-off", "--new-goal")
    (b.root / ".loopstate" / "hooks.json").write_text('{"enforce_gates": true, "goal": "ship"}')
    assert not Project(str(b.root), data_dir=b.data_dir).exists()
    stopped = hook("claude", "Stop", host_input("claude", "Stop", b.root, "s-team"), data_dir=b.data_dir, cwd=b.root)
    assert stopped.get("decision") == "block" and "Owner sign-off" in stopped["reason"], stopped
