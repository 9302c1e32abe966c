"""The CLI's project verbs ask the same service messages the sidecar serves: `run unstop`
clears what `run stop` set, and `log --limit` pages backward through project.log."""

from __future__ import annotations

import json
from pathlib import Path

from rpckit import run_cli

from loopstate_protocol import project as proto

from loopstate.service.engine import Service


def make_run(data_dir: Path, root: Path) -> str:
    done = run_cli(data_dir, "run", "create", "--root", str(root), "--objective", "o", "--done-gate", "g", "--asset", "a")
    assert done.returncode == 0, done.stderr
    return done.stdout.strip()


def test_run_unstop_clears_the_switch_run_stop_set_and_leaves_halted_runs_halted(data_dir: Path, root: Path) -> None:
    run_id = make_run(data_dir, root)
    stopped = run_cli(data_dir, "run", "stop", "--root", str(root), "--json")
    assert stopped.returncode == 0, stopped.stderr
    assert json.loads(stopped.stdout)["halted"] == [run_id]
    assert (root / ".loopstate" / "STOP").exists()

    cleared = run_cli(data_dir, "run", "unstop", "--root", str(root))
    assert cleared.returncode == 0, cleared.stderr
    assert f"removed {root / '.loopstate' / 'STOP'}" in cleared.stdout
    assert "stay halted" in cleared.stdout and run_id[:8] in cleared.stdout
    assert not (root / ".loopstate" / "STOP").exists()
    listed = json.loads(run_cli(data_dir, "run", "list", "--root", str(root), "--json").stdout)
    assert listed["kill_switch"]["set"] is False and listed["runs"][0]["status"] == "halted_kill_switch"

    again = run_cli(data_dir, "run", "unstop", "--root", str(root), "--json")
    assert again.returncode == 0 and json.loads(again.stdout)["removed"] == []


def test_run_unstop_keeps_a_switch_outside_loopstate_and_says_so(data_dir: Path, root: Path) -> None:
    (root / ".the-loop").mkdir()
    (root / ".the-loop" / "STOP").write_text("mine\n")
    done = run_cli(data_dir, "run", "unstop", "--root", str(root))
    assert done.returncode == 1, "the switch still stands"
    assert "kill switch still set" in done.stdout and "remove it yourself" in done.stdout
    assert (root / ".the-loop" / "STOP").exists()


def test_log_pages_forward_and_backward_through_the_service(data_dir: Path, root: Path) -> None:
    run_id = make_run(data_dir, root)
    for _ in range(3):
        assert run_cli(data_dir, "run", "stop", "--root", str(root)).returncode == 0  # a halt, then nothing new
    stream = f"runs.{run_id}"
    whole = json.loads(run_cli(data_dir, "log", "--root", str(root), "--stream", stream, "--json").stdout)["streams"][0]
    service = Service(data_dir=data_dir)
    sequences = [e["sequence"] for e in whole["events"]]
    assert len(sequences) >= 2
    back, before = [], None
    while True:
        page = service.query(str(root), proto.ProjectLog(stream=stream, limit=1, tail=True, before=before))
        back = page.events + back
        if page.next_before is None:
            break
        before = page.next_before
    assert back == whole["events"]
    last = json.loads(run_cli(data_dir, "log", "--root", str(root), "--stream", stream, "--limit", "1",
                              "--json").stdout)["streams"][0]
    assert last["events"] == whole["events"][-1:] and last["event_count"] == whole["event_count"]
