"""The README's quick-start demo runs end to end: real server, real CLI processes, real store."""

from __future__ import annotations

import os
import subprocess
import sys


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
