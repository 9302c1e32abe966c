"""The VS Code extension (editors/vscode/), tested at its three levels from pytest.

- unit and integration: `npm test` (vitest): the view models and status text with a small
  fake `vscode` module, then the extension's live state against a real `loopstate serve`
  spoken to with vscode-jsonrpc, the CLI changing the store from another process;
- end to end: `npm run build` makes the .vsix, then test/e2e/run.mjs installs it into a
  private code-server 4.100.3 (VS Code 1.100) and drives Debian's chromium through
  puppeteer-core, with loopstate pip-installed into the folder's own .venv and no setting: the
  venv found, the status item and trees live, each command (Add claim, Resolve gate and the
  Goals badge, Render, Verify, the audit log from the palette and a run's click, Stop with its
  true halted count, Resume, Retract claim from the context menu), STOP removed by hand, a
  corrupted stream marked and back after `loopstate recover`, a crash restarted with one Output
  line, a missing server's notification, an empty window left idle (no process), multi-root labels; and, counted in the extension host
  throughout, no process but `loopstate serve` and no file watcher.

Each needs what `npm ci` installs (editors/vscode/node_modules; the e2e also
editors/vscode/e2e/node_modules: .ci/run installs both) and skips without it, with the
`prerequisite` marker, so CI (LOOPSTATE_REQUIRE_PREREQUISITES=1) cannot pass without them.
The repository's own `loopstate` comes first on PATH, so the tests exercise this checkout.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from tests.conftest import REPO, prerequisite

EXTENSION = REPO / "editors" / "vscode"
CHROMIUM = os.environ.get("LOOPSTATE_CHROMIUM", "/usr/bin/chromium")
HAVE_NODE = shutil.which("node") is not None and shutil.which("npm") is not None
HAVE_MODULES = (EXTENSION / "node_modules" / ".bin" / "vitest").exists()
HAVE_CODE_SERVER = (EXTENSION / "e2e" / "node_modules" / "code-server" / "out" / "node" / "entry.js").exists()
HAVE_CHROMIUM = Path(CHROMIUM).exists()

needs_npm = prerequisite(
    HAVE_NODE and HAVE_MODULES,
    "node, npm and editors/vscode/node_modules (`npm ci` in editors/vscode; .ci/run does it)",
)
needs_code_server = prerequisite(
    HAVE_NODE and HAVE_MODULES and HAVE_CODE_SERVER and HAVE_CHROMIUM,
    "code-server (`npm ci` in editors/vscode/e2e) and Debian's chromium (`apt-get install chromium`)",
)


def _env() -> dict[str, str]:
    """This interpreter's `loopstate` first on PATH (the venv the tests run in)."""
    env = dict(os.environ)
    env["PATH"] = os.pathsep.join([str(Path(sys.executable).parent), env.get("PATH", "")])
    env.pop("LOOPSTATE_DATA_DIR", None)  # each test makes its own store
    return env


def _npm(*args: str, timeout: int) -> subprocess.CompletedProcess[str]:
    return subprocess.run(["npm", *args], cwd=EXTENSION, env=_env(), capture_output=True, text=True, timeout=timeout)


def _report(result: subprocess.CompletedProcess[str]) -> str:
    return f"exit {result.returncode}\n--- stdout\n{result.stdout[-6000:]}\n--- stderr\n{result.stderr[-4000:]}"


def test_python_m_loopstate_is_the_cli(tmp_path: Path) -> None:
    """The extension's fallback without `loopstate` on PATH: `python -m loopstate` is the same CLI."""
    env = {**_env(), "LOOPSTATE_DATA_DIR": str(tmp_path / "data")}
    (tmp_path / "proj").mkdir()
    listed = subprocess.run([sys.executable, "-m", "loopstate", "goals", "list", "--json"], cwd=tmp_path / "proj",
                            env=env, capture_output=True, text=True, timeout=60)
    assert listed.returncode == 0, listed.stderr
    assert json.loads(listed.stdout) == {"goals": []}
    wrong = subprocess.run([sys.executable, "-m", "loopstate", "no-such-verb"], env=env, capture_output=True,
                           text=True, timeout=60)
    assert wrong.returncode == 2
    assert "invalid choice: 'no-such-verb'" in wrong.stderr


@pytest.mark.slow
@needs_npm
def test_unit_and_integration() -> None:
    """vitest: view models, status text, wire types fresh; LiveProjects against a real server."""
    result = _npm("test", timeout=600)
    assert result.returncode == 0, _report(result)
    plain = re.sub(r"\x1b\[[0-9;]*m", "", result.stdout)
    summaries = re.findall(r"^\s*Tests\s+(.+)$", plain, re.MULTILINE)
    assert len(summaries) == 2, _report(result)  # test:unit, then test:integration
    assert all(re.fullmatch(r"\d+ passed \(\d+\)", line.strip()) for line in summaries), summaries


@pytest.mark.slow
@needs_code_server
def test_end_to_end_in_code_server() -> None:
    """The built .vsix in a real VS Code (code-server) driven by chromium: see test/e2e/run.mjs."""
    build = _npm("run", "build", timeout=600)
    assert build.returncode == 0, _report(build)
    assert (EXTENSION / "dist" / "loopstate.vsix").exists()
    result = _npm("run", "test:e2e", timeout=900)
    assert result.returncode == 0, _report(result)
    assert "19 passed, 0 failed" in result.stdout, _report(result)
    assert re.search(r"^accounted: \d+ loopstate serve, 0 other process\(es\), 0 file watcher\(s\)$", result.stdout, re.MULTILINE), _report(result)


@needs_code_server
def test_a_history_alarm_end_to_end_in_code_server() -> None:
    """A real rewrite behind code-server's back: the notification, the status item's alarm state through a reload, Acknowledge.

    See test/e2e/historyAlarm.mjs; its screenshots stay in editors/vscode/artifacts/history-alarm-*.png.
    """
    build = _npm("run", "build", timeout=600)
    assert build.returncode == 0, _report(build)
    result = subprocess.run(["node", "test/e2e/historyAlarm.mjs"], cwd=EXTENSION, env=_env(), capture_output=True,
                            text=True, timeout=600)
    assert result.returncode == 0, _report(result)
    assert "5 passed, 0 failed" in result.stdout, _report(result)
    shots = sorted(path.name for path in (EXTENSION / "artifacts").glob("history-alarm-*.png"))
    assert shots == ["history-alarm-1-notification.png", "history-alarm-2-tooltip.png", "history-alarm-3-acknowledged.png"]
