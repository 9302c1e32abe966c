"""Issue 26: on a shared store the hook's kill switch still works from the work tree, and a store that is
down never blocks a tool call by itself (the real `loopstate hook` in a subprocess)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from tests.hooks.hookkit import claude_input, denial_of, hook


def _team(root: Path, url: str) -> None:
    (root / ".loopstate").mkdir(exist_ok=True)
    (root / ".loopstate" / "store.json").write_text(json.dumps({"url": url, "project_id": "b" * 64}))


def _pre(root: Path, data_dir: Path, **env: str) -> str | None:
    return denial_of(hook("claude", "PreToolUse", claude_input("PreToolUse", root, "s-1"), data_dir=data_dir,
                          cwd=root, env=env))


@pytest.mark.slow
def test_the_stop_file_denies_on_a_shared_store(root, data_dir, team_url, pg_user):
    _team(root, team_url)
    assert _pre(root, data_dir, PGUSER=pg_user) is None
    (root / ".loopstate" / "STOP").write_text("")
    assert ".loopstate/STOP" in (_pre(root, data_dir, PGUSER=pg_user) or "")


def test_a_shared_store_that_is_down_blocks_nothing_and_the_file_still_denies(root, data_dir, tmp_path):
    _team(root, f"postgresql:///nodb?host={tmp_path / 'no-server'}&connect_timeout=1")
    assert _pre(root, data_dir) is None  # fails open
    (root / ".loopstate" / "STOP").write_text("")
    assert ".loopstate/STOP" in (_pre(root, data_dir) or "")


def test_a_bad_store_file_still_lets_the_stop_file_deny(root, data_dir):
    (root / ".loopstate").mkdir()
    (root / ".loopstate" / "store.json").write_text("{not json")
    (root / ".loopstate" / "STOP").write_text("")
    assert ".loopstate/STOP" in (_pre(root, data_dir) or "")


@pytest.mark.slow
def test_a_denial_after_run_stop_on_a_shared_store_names_run_unstop_beside_the_file(root, data_dir, team_url, pg_user,
                                                                                     monkeypatch):
    """`run stop` sets the file and the shared row; the file alone removed would leave the row standing."""
    import subprocess
    import sys

    _team(root, team_url)
    monkeypatch.setenv("PGUSER", pg_user)
    subprocess.run([sys.executable, "-m", "loopstate.cli.main", "run", "stop", "--root", str(root)], check=True,
                   capture_output=True, timeout=60)
    denial = _pre(root, data_dir, PGUSER=pg_user) or ""
    assert "the kill switch .loopstate/STOP and a stop recorded in the shared store postgresql://" in denial
    assert "Run `loopstate run unstop` (on any machine of the project) to lift both" in denial
    (root / ".loopstate" / "STOP").unlink()
    alone = _pre(root, data_dir, PGUSER=pg_user) or ""  # the row still stands
    assert "a stop recorded in the shared store postgresql://" in alone and "stands for this project" in alone
    assert "Run `loopstate run unstop` (on any machine of the project) to lift it." in alone and ".loopstate/STOP" not in alone
    subprocess.run([sys.executable, "-m", "loopstate.cli.main", "run", "unstop", "--root", str(root)], check=True,
                   capture_output=True, timeout=60)
    assert _pre(root, data_dir, PGUSER=pg_user) is None
