"""`loopstate root`: the project a directory belongs to, as editors ask for it (real CLI processes)."""

from __future__ import annotations

import json
from pathlib import Path

from clirun import cli

from loopstate.core.paths import project_id_for


def root_of(cwd: Path, data_dir: Path, *args: str) -> dict:
    done = cli("root", "--json", *args, cwd=cwd, data_dir=data_dir)
    assert done.returncode == 0, done.stderr
    return json.loads(done.stdout)


def test_a_subfolder_of_a_git_tree_resolves_to_its_top_with_the_store_folder(tmp_path: Path, data_dir: Path) -> None:
    top = tmp_path / "repo"
    (top / ".git").mkdir(parents=True)
    (top / "src" / "sub").mkdir(parents=True)
    found = root_of(top / "src" / "sub", data_dir)
    assert found == {"root": str(top), "how": "git", "reason": "the top of the git work tree",
                     "project_id": project_id_for(str(top)), "exists": False,
                     "store": str(data_dir / "projects" / project_id_for(str(top)))}


def test_the_nearest_existing_project_wins_over_the_git_top_and_dir_is_an_argument(tmp_path: Path, data_dir: Path) -> None:
    top = tmp_path / "repo"
    (top / ".git").mkdir(parents=True)
    inner = top / "pkg"
    (inner / "deep").mkdir(parents=True)
    started = cli("--root", str(inner), "intent", "start", "--claim", "keep it", cwd=tmp_path, data_dir=data_dir)
    assert started.returncode == 0, started.stderr
    found = root_of(tmp_path, data_dir, str(inner / "deep"))
    assert (found["root"], found["how"], found["exists"]) == (str(inner), "project", True)
    plain = cli("root", str(inner / "deep"), cwd=tmp_path, data_dir=data_dir)
    assert plain.stdout == f"{inner}\n"


def test_a_directory_that_is_not_there_is_a_clear_refusal(tmp_path: Path, data_dir: Path) -> None:
    done = cli("root", str(tmp_path / "missing"), cwd=tmp_path, data_dir=data_dir)
    assert done.returncode != 0
    assert "INVALID_ROOT" in done.stderr and "does not exist" in done.stderr
    (tmp_path / "file").write_text("x")
    done = cli("root", "file", "--json", cwd=tmp_path, data_dir=data_dir)
    assert done.returncode != 0
    error = json.loads(done.stdout)["error"]  # --json: the refusal is JSON too, for the editor that asked
    assert error["code"] == "INVALID_ROOT" and "is not a directory" in error["message"]
    assert not data_dir.exists()  # nothing written


def test_a_root_that_holds_the_data_dir_is_refused_as_every_command_refuses_it(tmp_path: Path) -> None:
    home = tmp_path / "home"
    home.mkdir()
    done = cli("root", "--json", cwd=home, data_dir=None, env={"HOME": str(home), "XDG_STATE_HOME": str(home / ".local/state")})
    assert done.returncode != 0
    error = json.loads(done.stdout)["error"]
    assert error["code"] == "INVALID_ROOT" and "your home folder" in error["message"]
