"""Fixtures of the goals tests."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest
from goalkit import Harness


@pytest.fixture
def h(data_dir, root) -> Harness:
    return Harness(data_dir, root)


@pytest.fixture
def cli(data_dir: Path, root: Path):
    """`loopstate goals ARGS --root ROOT` in a real process; asserts the exit code (0 unless ``expect``)."""
    env = {**os.environ, "LOOPSTATE_DATA_DIR": str(data_dir)}

    def run(*args: str, expect: int = 0) -> subprocess.CompletedProcess:
        done = subprocess.run([sys.executable, "-m", "loopstate.cli.main", "goals", *args, "--root", str(root)],
                              capture_output=True, text=True, env=env, timeout=60)
        assert done.returncode == expect, (done.returncode, done.stdout, done.stderr)
        return done

    return run
