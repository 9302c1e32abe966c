"""Which project a command means, found the way git finds a repository: real CLI processes, real folders."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from clirun import cli

from loopstate.core.discovery import resolve_root


@pytest.fixture
def project(tmp_path: Path, data_dir: Path) -> Path:
    """A project (not a git work tree) with one claim recorded from its root, and a deep subfolder."""
    root = tmp_path / "proj"
    (root / "src" / "sub").mkdir(parents=True)
    done = cli("intent", "start", "--claim", "hard_constraint:Keep the API", "--json", cwd=root, data_dir=data_dir)
    assert done.returncode == 0, done.stderr
    return root


def claims_seen(cwd: Path, data_dir: Path, *args: str) -> list[str]:
    done = cli("intent", "show", "--json", *args, cwd=cwd, data_dir=data_dir)
    assert done.returncode == 0, done.stderr
    view = json.loads(done.stdout)
    return [c["statement"] for by_status in view["by_facet"].values() for claims in by_status.values() for c in claims]


def test_a_read_from_a_subfolder_reaches_the_project_and_says_which_root(project: Path, data_dir: Path) -> None:
    assert claims_seen(project / "src" / "sub", data_dir) == ["Keep the API"]
    human = cli("intent", "show", cwd=project / "src" / "sub", data_dir=data_dir)
    assert "Keep the API" in human.stdout
    assert human.stderr == f"loopstate: project root {project} (the nearest loopstate project above the current directory)\n"
    # From the root itself, and with --json, nothing is said.
    assert cli("intent", "show", cwd=project, data_dir=data_dir).stderr == ""
    assert cli("intent", "show", "--json", cwd=project / "src", data_dir=data_dir).stderr == ""


def test_run_stop_from_a_subfolder_halts_the_run_created_at_the_root(project: Path, data_dir: Path) -> None:
    created = cli("run", "create", "--objective", "ship", "--done-gate", "tests pass", "--asset", "app",
                  cwd=project, data_dir=data_dir)
    assert created.returncode == 0, created.stderr
    run_id = created.stdout.strip()
    assert cli("run", "acquire", run_id, cwd=project, data_dir=data_dir).returncode == 0
    stopped = cli("run", "stop", "--json", cwd=project / "src" / "sub", data_dir=data_dir)
    assert stopped.returncode == 0, stopped.stderr
    report = json.loads(stopped.stdout)
    assert report["halted"] == [run_id]
    assert report["kill_switch"] == str(project / ".loopstate" / "STOP")
    assert not (project / "src" / "sub" / ".loopstate").exists()
    status = cli("run", "status", run_id, "--json", cwd=project / "src", data_dir=data_dir)
    assert status.returncode == 0, status.stderr
    assert json.loads(status.stdout)["run"]["status"] == "halted_kill_switch"


def test_outside_any_project_the_git_work_tree_top_is_the_root(tmp_path: Path, data_dir: Path) -> None:
    repo = tmp_path / "repo"
    (repo / ".git").mkdir(parents=True)
    (repo / "a" / "b").mkdir(parents=True)
    started = cli("intent", "start", "--claim", "outcome:From deep inside", cwd=repo / "a" / "b", data_dir=data_dir)
    assert started.returncode == 0, started.stderr
    assert started.stderr == f"loopstate: project root {repo} (the top of the git work tree)\n"
    assert claims_seen(repo, data_dir) == ["From deep inside"]
    # A linked worktree or submodule has a .git file, not a folder: it is a work tree's top all the same.
    linked = tmp_path / "linked"
    (linked / "src").mkdir(parents=True)
    (linked / ".git").write_text("gitdir: /elsewhere/.git/worktrees/linked\n")
    assert resolve_root(cwd=str(linked / "src"), data_dir=data_dir).root == str(linked)


def test_a_loopstate_project_inside_a_git_work_tree_wins_over_its_top(tmp_path: Path, data_dir: Path) -> None:
    repo = tmp_path / "mono"
    (repo / ".git").mkdir(parents=True)
    (repo / "services" / "api" / "src").mkdir(parents=True)
    api = repo / "services" / "api"
    assert cli("intent", "start", "--claim", "outcome:API only", "--root", str(api), cwd=tmp_path, data_dir=data_dir).returncode == 0
    assert claims_seen(api / "src", data_dir) == ["API only"]
    assert claims_seen(repo / "services", data_dir) == []  # above the project: the repository's top


def test_with_neither_the_current_directory_is_the_root(tmp_path: Path, data_dir: Path) -> None:
    plain = tmp_path / "plain"
    plain.mkdir()
    done = cli("intent", "start", "--claim", "outcome:Here", cwd=plain, data_dir=data_dir)
    assert done.returncode == 0 and done.stderr == ""
    assert resolve_root(cwd=str(plain), data_dir=data_dir).how == "project"  # now it is one


@pytest.mark.parametrize("where", ["before", "after"])
def test_root_is_accepted_before_or_after_the_verb(project: Path, tmp_path: Path, data_dir: Path, where: str) -> None:
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    args = ["--root", str(project), "intent", "show", "--json"] if where == "before" else [
        "intent", "show", "--json", "--root", str(project)]
    done = cli(*args, cwd=elsewhere, data_dir=data_dir)
    assert done.returncode == 0, done.stderr
    assert "Keep the API" in done.stdout
    equals = cli(f"--root={project}", "intent", "show", cwd=elsewhere, data_dir=data_dir)
    assert "Keep the API" in equals.stdout


def test_a_relative_root_with_dotdot_is_resolved_not_refused(project: Path, tmp_path: Path, data_dir: Path) -> None:
    sibling = tmp_path / "sibling"
    sibling.mkdir()
    assert claims_seen(sibling, data_dir, "--root", "../proj") == ["Keep the API"]
    assert claims_seen(sibling, data_dir, "--root", "../proj/src/..") == ["Keep the API"]
    # An absolute path keeps the seed's rule: '..' in it is refused.
    refused = cli("intent", "show", "--root", f"{project}/src/..", cwd=sibling, data_dir=data_dir)
    assert refused.returncode == 1 and "'..'" in refused.stderr
    missing = cli("intent", "show", "--root", "../nowhere", cwd=sibling, data_dir=data_dir)
    assert missing.returncode == 1 and f"{tmp_path}/nowhere" in missing.stderr and "does not exist" in missing.stderr


def test_the_home_folder_as_root_says_what_happened_and_what_to_do(tmp_path: Path) -> None:
    home = tmp_path / "home"
    home.mkdir()
    env = {"HOME": str(home), "XDG_STATE_HOME": ""}
    done = cli("intent", "show", cwd=home, data_dir=None, env=env)
    assert done.returncode == 1
    message = done.stderr
    assert f"the project root is your home folder ({home})" in message
    assert "--root" in message and "cd into" in message
    assert "inside the project workspace" not in message
    # From a project folder below home, the same environment works.
    work = home / "work"
    work.mkdir()
    assert cli("intent", "show", cwd=work, data_dir=None, env=env).returncode == 0


def test_a_folder_reached_through_a_symlink_finds_the_same_project(project: Path, tmp_path: Path, data_dir: Path) -> None:
    link = tmp_path / "shortcut"
    link.symlink_to(project / "src")
    found = resolve_root(cwd=str(link), data_dir=data_dir)
    assert (found.root, found.how) == (str(project), "project")
    assert claims_seen(link, data_dir) == ["Keep the API"]


def test_a_relative_root_resolves_dotdot_after_symlinks_as_the_kernel_does(tmp_path: Path, data_dir: Path) -> None:
    deep = tmp_path / "elsewhere" / "deep"
    deep.mkdir(parents=True)
    here = tmp_path / "here"
    here.mkdir()
    (here / "link").symlink_to(deep)
    # "link/.." is the parent of what link points to (what `ls link/..` lists), not `here` itself.
    assert resolve_root("link/..", cwd=str(here)).root == str(tmp_path / "elsewhere")
    assert resolve_root("link/..", cwd=str(here)).how == "explicit"
