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
