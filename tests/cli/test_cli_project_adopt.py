"""A repository that moved (`mv`) or was cloned afresh (`git clone`) is recognised, never silently empty.

Through the real CLI in subprocesses: the new folder says it looks like the
old project and names `loopstate project adopt`; adopting carries the state
(intent, goals) over, `verify` stays clean, and what would hide or mix state
is refused with the store left as it was.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
from pathlib import Path

from clirun import cli
from tests.conftest import prerequisite

needs_git = prerequisite(shutil.which("git") is not None, "git is not on PATH")

ENV = {"GIT_AUTHOR_NAME": "t", "GIT_AUTHOR_EMAIL": "t@example.com", "GIT_COMMITTER_NAME": "t",
       "GIT_COMMITTER_EMAIL": "t@example.com"}


def _git(*args: str, cwd: Path) -> None:
    subprocess.run(["git", *args], cwd=cwd, check=True, capture_output=True, env={**os.environ, **ENV}, timeout=60)


def _ok(*args: str, cwd: Path, data: Path) -> str:
    done = cli(*args, cwd=cwd, data_dir=data)
    assert done.returncode == 0, done
    return done.stdout


def _verify_clean(cwd: Path, data: Path) -> None:
    assert json.loads(_ok("verify", "--json", cwd=cwd, data=data))["ok"] is True


def _stores(data: Path) -> dict[str, bytes]:
    return {str(p.relative_to(data)): p.read_bytes() for p in sorted(data.rglob("*.jsonl"))}


def test_a_moved_folder_is_recognised_by_its_config_and_adopted(tmp_path: Path) -> None:
    data, old, new = tmp_path / "data", tmp_path / "app", tmp_path / "moved" / "app"
    old.mkdir()
    _ok("init", cwd=old, data=data)  # .loopstate/config.json names the project it was written for
    _ok("goals", "add", "ship", "write the parser", cwd=old, data=data)
    _ok("intent", "start", "--claim", "outcome:Keep the API", cwd=old, data=data)
    new.parent.mkdir()
    subprocess.run(["mv", str(old), str(new)], check=True)
    empty = cli("goals", "list", cwd=new, data_dir=data)
    assert empty.returncode == 0 and "no goals yet" in empty.stdout
    assert f"looks like the project at {old}, which no longer exists" in empty.stderr
    assert f"loopstate project adopt {old}" in empty.stderr
    before = _stores(data)
    assert "adopted" in _ok("project", "adopt", str(old), cwd=new, data=data).replace("now carries", "adopted")
    assert _stores(data) == before  # adopting writes no event: the events keep the id they were recorded under
    assert "ship" in _ok("goals", "list", cwd=new, data=data)
    assert "Keep the API" in _ok("intent", "show", cwd=new, data=data)
    _ok("goals", "add", "ship", "and the docs", cwd=new, data=data)  # new work lands on the same project
    assert json.loads(_ok("root", "--json", cwd=new, data=data))["exists"] is True
    assert cli("goals", "list", cwd=new, data_dir=data).stderr == ""  # no notice once adopted
    again = json.loads(_ok("project", "adopt", str(old), "--json", cwd=new, data=data))
    assert again["already"] is True and again["adopted"] is False
    _verify_clean(new, data)


@needs_git
def test_a_fresh_clone_elsewhere_is_recognised_by_its_git_history(tmp_path: Path) -> None:
    data, first, clone = tmp_path / "data", tmp_path / "repo", tmp_path / "clone"
    first.mkdir()
    _git("init", "-q", cwd=first)
    (first / "README").write_text("hello\n")
    _git("add", "README", cwd=first)
    _git("commit", "-q", "-m", "first", cwd=first)
    _ok("intent", "start", "--claim", "outcome:Ship it", cwd=first, data=data)
    _ok("intent", "show", cwd=first, data=data)  # any command in a project with state records its git history
    _git("clone", "-q", str(first), str(clone), cwd=tmp_path)
    shown = cli("intent", "show", cwd=clone, data_dir=data)
    assert shown.returncode == 0 and "Ship it" not in shown.stdout
    assert f"looks like the project at {first} (the same first git commit)" in shown.stderr
    listed = json.loads(_ok("project", "adopt", "--list", "--json", cwd=clone, data=data))
    assert [item["root"] for item in listed["look_alike"]] == [str(first)]
    # The old clone still exists: both would share one state, which takes --share.
    before = _stores(data)
    refused = cli("project", "adopt", str(first), cwd=clone, data_dir=data)
    assert refused.returncode == 1 and "CONFLICT" in refused.stderr and "--share" in refused.stderr
    assert _stores(data) == before
    # A re-clone after the old one is gone needs no --share.
    shutil.rmtree(first)
    assert f"{first}, which no longer exists" in cli("intent", "show", cwd=clone, data_dir=data).stderr
    _ok("project", "adopt", str(first), cwd=clone, data=data)
    assert "Ship it" in _ok("intent", "show", cwd=clone, data=data)
    _verify_clean(clone, data)


def test_what_would_hide_or_mix_state_is_refused(tmp_path: Path) -> None:
    data, old, new = tmp_path / "data", tmp_path / "old", tmp_path / "new"
    old.mkdir()
    new.mkdir()
    _ok("goals", "add", "g", "old work", cwd=old, data=data)
    _ok("goals", "add", "g", "new work", cwd=new, data=data)
    before = _stores(data)
    shutil.rmtree(old)
    hidden = cli("project", "adopt", str(old), cwd=new, data_dir=data)
    assert hidden.returncode == 1 and "already has its own loopstate state" in hidden.stderr
    never = cli("project", "adopt", str(tmp_path / "nowhere"), cwd=new, data_dir=data)
    assert never.returncode == 1 and "NOT_FOUND" in never.stderr and "no loopstate project was ever kept" in never.stderr
    itself = cli("project", "adopt", str(new), cwd=new, data_dir=data)
    assert itself.returncode == 1 and "this very project" in itself.stderr
    assert _stores(data) == before and not (data / "adopted").exists()
    assert "new work" in _ok("goals", "board", "g", cwd=new, data=data)
    _verify_clean(new, data)
