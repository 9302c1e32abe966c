"""The README's quick-start demo runs end to end: real server, real CLI processes, real store."""

from __future__ import annotations

import pytest
import os
import subprocess
import sys


@pytest.mark.slow
def test_demo_shows_every_change_as_a_status_bar_and_verifies() -> None:
    env = {k: v for k, v in os.environ.items() if k != "LOOPSTATE_DATA_DIR"}
    done = subprocess.run(
        [sys.executable, "-m", "loopstate.cli.main", "demo"], env=env, capture_output=True, text=True, timeout=180
    )
    assert done.returncode == 0, done.stdout + done.stderr
    bars = [line for line in done.stdout.splitlines() if "[status bar]" in line]
    assert [b.split("]")[1].split(":")[0].strip() for b in bars] == ["intent", "intent", "goal demo-goal", "goal demo-goal", "run", "run"]
    assert "3 active claims" in bars[1]
    assert "2 open todos" in bars[3]
    assert "run: active" in bars[4] and "run: halted_kill_switch" in bars[5]
    assert "exit code 0" in done.stdout
    assert "CORRUPT" not in done.stdout and done.stdout.count("\nok      ") == 4


@pytest.mark.slow
def test_the_harness_commands_it_prints_run_as_printed_when_pasted_into_a_shell(tmp_path) -> None:
    """Every printed `harness$` line is shell-quoted: pasted into bash in a fresh project, the ones that name
    no id from the demo's own store run (exit 0), with their multi-word arguments intact."""
    env = {k: v for k, v in os.environ.items() if k != "LOOPSTATE_DATA_DIR"}
    done = subprocess.run([sys.executable, "-m", "loopstate.cli.main", "demo"], env=env, capture_output=True,
                          text=True, timeout=180)
    assert done.returncode == 0, done.stdout + done.stderr
    lines = [line.split("harness$ ", 1)[1] for line in done.stdout.splitlines() if "harness$ " in line]
    pasteable = [line for line in lines if not any(word in line for word in ("intent add", "--grant", "acquire"))]
    assert len(pasteable) >= 5 and any("'demo task'" in line for line in pasteable)
    project = tmp_path / "proj"
    project.mkdir()
    shell_env = {**env, "LOOPSTATE_DATA_DIR": str(tmp_path / "data"),
                 "PATH": os.path.dirname(sys.executable) + os.pathsep + env.get("PATH", "")}
    for line in pasteable:
        pasted = subprocess.run(["bash", "-c", line], cwd=project, env=shell_env, capture_output=True, text=True,
                                timeout=60)
        assert pasted.returncode == 0, (line, pasted.stderr)
    shown = subprocess.run(["bash", "-c", "loopstate intent show --json"], cwd=project, env=shell_env,
                           capture_output=True, text=True, timeout=60).stdout
    assert "Do not change the public API" in shown and "Add a --json flag to the export command" in shown
