"""`loopstate mcp` as a verb: its help, and what it says without the optional SDK."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

from tests.conftest import REPO, env_for_child


def test_without_the_sdk_it_says_how_to_install_it_and_exits_2(tmp_path: Path, data_dir: Path):
    # An environment where `import mcp` fails as it does when the extra is not installed.
    hidden = tmp_path / "no-sdk" / "mcp"
    hidden.mkdir(parents=True)
    (hidden / "__init__.py").write_text("raise ModuleNotFoundError(\"No module named 'mcp'\", name='mcp')\n")
    env = env_for_child(data_dir)
    env["PYTHONPATH"] = str(hidden.parent)
    done = subprocess.run([sys.executable, "-m", "loopstate.cli.main", "mcp"], capture_output=True, text=True,
                          env=env, cwd=REPO, stdin=subprocess.DEVNULL, timeout=60)
    assert done.returncode == 2
    assert "pip install 'loopstate[mcp]'" in done.stderr and done.stdout == ""
    assert not data_dir.exists()


def test_help_names_the_verb_and_its_root_rules(data_dir: Path):
    done = subprocess.run([sys.executable, "-m", "loopstate.cli.main", "mcp", "--help"], capture_output=True,
                          text=True, env=env_for_child(data_dir), cwd=REPO, timeout=60)
    assert done.returncode == 0 and "--root" in done.stdout and "sandbox cwd" in done.stdout
    listing = subprocess.run([sys.executable, "-m", "loopstate.cli.main", "--help"], capture_output=True, text=True,
                             env=env_for_child(data_dir), cwd=REPO, timeout=60)
    assert "mcp" in listing.stdout
