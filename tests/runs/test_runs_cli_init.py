"""Issue 12: `loopstate init` writes the seed's default config and keeps `.loopstate/` out of git (real CLI)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from tests.runs.clikit import Cli, files_under


@pytest.fixture
def cli(root: Path, data_dir: Path) -> Cli:
    return Cli(root, data_dir)


def test_init_writes_a_valid_default_config_and_ignores_the_state_folder(cli, root, data_dir):
    text = cli.ok("init")
    config = root / ".loopstate" / "config.json"
    assert f"wrote {config}" in text and "added .loopstate/ to" in text
    assert cli.ok("validate", "config", str(config), root=False).strip().endswith("a valid config record")
    written = json.loads(config.read_text())
    assert written["kill_switches"][0] == ".loopstate/STOP" and written["telemetry"] is False
    assert (root / ".gitignore").read_text() == ".loopstate/\n"
    assert files_under(data_dir) == []  # the store itself is made by the first mutation, not by init


def test_init_appends_to_an_existing_gitignore_once(cli, root):
    (root / ".gitignore").write_text("node_modules")  # no final newline
    cli.ok("init")
    assert (root / ".gitignore").read_text() == "node_modules\n.loopstate/\n"
    again = cli.json("init", "--force")
    assert again["gitignore_added"] is False and again["config_replaced"] is True
    assert (root / ".gitignore").read_text() == "node_modules\n.loopstate/\n"


@pytest.mark.parametrize("line", ["/.loopstate/", ".loopstate", "/.loopstate"])
def test_init_leaves_a_gitignore_that_already_ignores_the_folder(cli, root, line):
    (root / ".gitignore").write_text(f"build/\n{line}\n")
    assert cli.json("init")["gitignore_added"] is False
    assert (root / ".gitignore").read_text() == f"build/\n{line}\n"


def test_init_refuses_an_existing_config_unless_forced(cli, root):
    config = root / ".loopstate" / "config.json"
    config.parent.mkdir()
    config.write_text('{"mine": true}')
    error = cli.refused("init")
    assert error["code"] == "CONFLICT" and "--force" in error["message"]
    assert config.read_text() == '{"mine": true}'
    assert not (root / ".gitignore").exists()  # refused: nothing else was done either
    assert cli.json("init", "--force")["config_replaced"] is True
    assert json.loads(config.read_text())["default_mode"] == "auto"


def test_runs_use_the_config_init_wrote(cli, root):
    cli.ok("init")
    config = root / ".loopstate" / "config.json"
    edited = {**json.loads(config.read_text()), "default_mode": "loop"}
    config.write_text(json.dumps(edited))
    run_id = cli.create()
    assert cli.status(run_id)["run"]["mode"] == "loop"


def test_init_refuses_to_write_through_a_linked_gitignore(cli, root, tmp_path):
    outside = tmp_path / "elsewhere"
    outside.write_text("")
    (root / ".gitignore").symlink_to(outside)
    error = cli.refused("init")
    assert error["code"] == "UNSAFE_PATH" and ".loopstate/" in error["message"]
    assert outside.read_text() == ""
    assert not (root / ".loopstate").exists()  # refused before anything was written
