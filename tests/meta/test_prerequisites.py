"""A test that skips for a missing prerequisite passes a fresh clone and fails CI.

Runs pytest in a subprocess on a throwaway test file, with tests/conftest.py's
hooks loaded as a plugin, with and without LOOPSTATE_REQUIRE_PREREQUISITES=1.
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

from tests.conftest import REPO

PROBE = '''
from tests.conftest import prerequisite

@prerequisite(False, "a tool this machine lacks")
def test_needs_the_tool():
    pass

def test_plain():
    pass
'''


def run_probe(tmp_path: Path, **env: str) -> subprocess.CompletedProcess:
    (tmp_path / "test_probe.py").write_text(PROBE)
    environ = {k: v for k, v in os.environ.items() if k != "LOOPSTATE_REQUIRE_PREREQUISITES"} | env
    return subprocess.run(
        [sys.executable, "-m", "pytest", "-q", "-p", "tests.conftest", "-p", "no:cacheprovider",
         "--rootdir", str(tmp_path), "-c", os.devnull, str(tmp_path / "test_probe.py")],
        cwd=REPO, env=environ, capture_output=True, text=True, timeout=120,
    )


def test_a_missing_prerequisite_is_a_skip_with_its_reason(tmp_path):
    result = run_probe(tmp_path)
    assert result.returncode == 0, result.stdout + result.stderr
    assert "1 passed, 1 skipped" in result.stdout


def test_under_require_prerequisites_the_same_skip_fails_the_run_naming_the_test(tmp_path):
    result = run_probe(tmp_path, LOOPSTATE_REQUIRE_PREREQUISITES="1")
    assert result.returncode == 1, result.stdout + result.stderr
    assert "test_needs_the_tool" in result.stdout
    assert "prerequisite missing: a tool this machine lacks" in result.stdout
