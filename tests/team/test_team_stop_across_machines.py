"""Issue 26: `loopstate run stop` on one machine denies the next tool call on another (real CLI, real hooks,
a real PostgreSQL): two clones with the committed store file, two data dirs, one server."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from tests.hooks.hookkit import claude_input, denial_of, hook


class Machine:
    def __init__(self, root: Path, data_dir: Path, pg_user: str) -> None:
        self.root, self.data_dir = root, data_dir
        self.env = {k: v for k, v in os.environ.items() if k != "LOOPSTATE_STORE"}
        self.env.update(LOOPSTATE_DATA_DIR=str(data_dir), PGUSER=pg_user)

    def cli(self, *args: str) -> dict:
        done = subprocess.run([sys.executable, "-m", "loopstate.cli.main", *args, "--root", str(self.root), "--json"],
                              capture_output=True, text=True, env=self.env, timeout=60)
        assert done.returncode == 0, f"{args}: {done.stderr}{done.stdout}"
        return json.loads(done.stdout)

    def pre_tool_use(self) -> str | None:
        return denial_of(hook("claude", "PreToolUse", claude_input("PreToolUse", self.root, "s-1"),
                              data_dir=self.data_dir, cwd=self.root, env={"PGUSER": self.env["PGUSER"]}))


@pytest.fixture
def machines(tmp_path: Path, team_url: str, pg_user: str) -> tuple[Machine, Machine]:
    pair = []
    for name in ("a", "b"):
        root = tmp_path / name / "work"
        root.mkdir(parents=True)
        (root / ".loopstate").mkdir()
        # The committed file, as each clone checks it out (init wrote it once; git carries it).
        (root / ".loopstate" / "store.json").write_text(json.dumps({"url": team_url, "schema_version": 1,
                                                                    "project_id": "c" * 64}))
        pair.append(Machine(root, tmp_path / name / "data", pg_user))
    return pair[0], pair[1]


@pytest.mark.slow
def test_a_stop_on_one_machine_denies_the_others_next_tool_call_until_it_is_lifted(machines):
    a, b = machines
    assert b.pre_tool_use() is None
    stopped = a.cli("run", "stop")
    assert stopped["state"]["shared"] and stopped["state"]["shared"].startswith("postgresql://")
    assert len(stopped["state"]["paths"]) == 2  # the file and the shared store's stop, each once
    assert (a.root / ".loopstate" / "STOP").exists()  # the local switch as always, beside the shared one
    assert not (b.root / ".loopstate" / "STOP").exists()  # b has no switch file of its own
    denied = b.pre_tool_use()
    assert denied is not None and "shared store" in denied and "unstop" in denied
    lifted = a.cli("run", "unstop")
    assert len(lifted["removed"]) == 2 and any("shared store" in path for path in lifted["removed"])
    assert lifted["kept"] == [] and not lifted["state"]["set"] and lifted["state"]["shared"] is None
    assert b.pre_tool_use() is None


@pytest.mark.slow
def test_run_unstop_on_another_machine_lifts_the_shared_stop_and_leaves_the_first_machines_file(machines):
    """The denial says `run unstop` works from any machine: there it lifts the shared stop; the file the
    stop set on the first machine is that machine's, and still denies there, naming only itself."""
    a, b = machines
    said = subprocess.run([sys.executable, "-m", "loopstate.cli.main", "run", "stop", "--root", str(a.root)],
                          capture_output=True, text=True, env=a.env, timeout=60)
    assert said.returncode == 0 and "recorded in the shared store postgresql://" in said.stdout, said
    lifted = b.cli("run", "unstop")
    assert lifted["kept"] == [] and len(lifted["removed"]) == 1 and "shared store" in lifted["removed"][0]
    assert not lifted["state"]["set"] and b.pre_tool_use() is None
    left = a.pre_tool_use() or ""
    assert "the kill switch .loopstate/STOP stands" in left and "shared store" not in left
    text = subprocess.run([sys.executable, "-m", "loopstate.cli.main", "run", "unstop", "--root", str(a.root)],
                          capture_output=True, text=True, env=a.env, timeout=60)
    assert text.returncode == 0 and "kill switch cleared: removed" in text.stdout and "still set" not in text.stdout
    assert a.pre_tool_use() is None


def test_a_stop_while_the_shared_store_is_down_sets_the_local_switch_and_says_the_others_were_not_told(
        root, data_dir, tmp_path):
    (root / ".loopstate").mkdir()
    (root / ".loopstate" / "store.json").write_text(json.dumps(
        {"url": f"postgresql:///nodb?host={tmp_path / 'no-server'}&connect_timeout=1"}))
    env = {k: v for k, v in os.environ.items() if k != "LOOPSTATE_STORE"}
    done = subprocess.run([sys.executable, "-m", "loopstate.cli.main", "run", "stop", "--root", str(root), "--json"],
                          capture_output=True, text=True, env={**env, "LOOPSTATE_DATA_DIR": str(data_dir)}, timeout=60)
    assert done.returncode == 1
    error = json.loads(done.stdout)["error"]
    assert "other machines do not see it" in error["message"] and "/nodb" in error["message"]
    assert (root / ".loopstate" / "STOP").exists()
    assert ".loopstate/STOP" in (denial_of(hook("claude", "PreToolUse", claude_input("PreToolUse", root, "s-1"),
                                                data_dir=data_dir, cwd=root)) or "")


@pytest.mark.slow
def test_a_run_halted_by_the_shared_stop_says_how_that_stop_is_lifted(machines):
    a, b = machines
    run_id = b.cli("run", "create", "--objective", "ship", "--done-gate", "tests pass", "--asset", "app")["run_id"]
    a.cli("run", "stop")
    (a.root / ".loopstate" / "STOP").unlink()  # a's own file gone: only the shared stop stands
    done = subprocess.run([sys.executable, "-m", "loopstate.cli.main", "run", "resume", run_id, "--reason", "go on",
                           "--root", str(b.root), "--json"], capture_output=True, text=True, env=b.env, timeout=60)
    assert done.returncode != 0
    error = json.loads(done.stdout)["error"]
    assert error["code"] == "KILL_SWITCH" and "shared store" in error["message"]
    assert "`loopstate run unstop` lifts a shared store's stop" in error["message"]
    a.cli("run", "unstop")
