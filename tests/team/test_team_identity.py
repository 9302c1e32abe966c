"""Issue 26: one project across clones and machines, through the committed `.loopstate/store.json` (real CLI, real git)."""

from __future__ import annotations

import json
import shutil
import subprocess
from pathlib import Path

import pytest

from loopstate.core.errors import LoopstateError
from loopstate.core.paths import project_id_for
from loopstate.core.project import Project
from tests.conftest import prerequisite
from tests.runs.clikit import Cli

needs_git = prerequisite(shutil.which("git") is not None, "git is not on PATH")
URL = "postgresql://db.example.org:5432/loopstate"


def _git(cwd: Path, *args: str) -> str:
    return subprocess.run(["git", "-c", "user.name=t", "-c", "user.email=t@example.org", *args], cwd=cwd,
                          capture_output=True, text=True, check=True, timeout=60).stdout


@pytest.fixture
def origin(tmp_path: Path, data_dir: Path) -> Path:
    """A repository whose store file `loopstate init --share-id` wrote and that commits it."""
    repo = tmp_path / "origin"
    repo.mkdir()
    _git(repo, "init", "-q")
    Cli(repo, data_dir).ok("init", "--share-id")
    _git(repo, "add", ".gitignore", ".loopstate/store.json")
    _git(repo, "commit", "-q", "-m", "team project")
    return repo


@needs_git
def test_two_clones_at_different_paths_are_one_project(origin, tmp_path, data_dir):
    clones = [tmp_path / "machine-a" / "work", tmp_path / "machine-b" / "elsewhere" / "checkout"]
    for clone in clones:
        clone.parent.mkdir(parents=True)
        _git(tmp_path, "clone", "-q", str(origin), str(clone))
    committed = json.loads((origin / ".loopstate" / "store.json").read_text())
    assert committed["url"] == "jsonl:"
    assert committed["project_id"] == project_id_for(str(origin.resolve()))  # the id the project had before
    ids = {Project(str(c)).project_id for c in clones}
    assert ids == {committed["project_id"]}
    assert project_id_for(str(clones[0].resolve())) != project_id_for(str(clones[1].resolve()))  # paths differ

    # Through the front door: a task started in one clone is the other's (one store here: one data dir).
    a, b = (Cli(c, data_dir) for c in clones)
    started = a.json("intent", "start", "--label", "shared", "--claim", "outcome:one project for the team")
    assert b.json("intent", "tasks")["current_task_id"] == started["events"][0]["task_id"]
    assert {x.json("root", str(c), root=False)["project_id"] for x, c in ((a, clones[0]), (b, clones[1]))} == ids
    Cli(origin, data_dir).ok("intent", "show")  # the origin's git history is recorded for the project's id
    shown = b("intent", "show")  # a clone elsewhere is the project, not a look-alike to adopt
    assert shown.returncode == 0 and "adopt" not in shown.stderr


@needs_git
def test_the_project_file_is_committed_and_the_state_beside_it_is_not(origin):
    (origin / ".loopstate" / "STOP").write_text("")
    status = _git(origin, "status", "--porcelain", "--untracked-files=all")
    assert status == ""  # config.json and STOP ignored, store.json committed
    assert _git(origin, "ls-files", ".loopstate").split() == [".loopstate/store.json"]


def test_init_store_writes_the_url_and_rewrites_a_folder_ignore(root, data_dir):
    (root / ".gitignore").write_text("build/\n/.loopstate/\n")
    done = Cli(root, data_dir).json("init", "--store", URL)
    assert done["store_file_action"] == "wrote" and done["store"] == URL
    assert (root / ".gitignore").read_text() == "build/\n/.loopstate/*\n!.loopstate/store.json\n"
    written = json.loads((root / ".loopstate" / "store.json").read_text())
    assert written == {"schema_version": 1, "project_id": project_id_for(str(root.resolve())), "url": URL}
    again = Cli(root, data_dir).json("init", "--store", URL)
    assert again["store_file_action"] == "kept" and again["config_kept"] and not again["gitignore_added"]


def test_init_store_writes_the_file_and_says_when_the_store_does_not_answer_yet(root, data_dir, tmp_path):
    """A team may commit the store before its server runs: the file is written, and init says what failed."""
    url = f"postgresql:///loopstate?host={tmp_path / 'no-server'}"
    done = Cli(root, data_dir).json("init", "--store", url)
    assert done["store_file_action"] == "wrote" and (root / ".loopstate" / "store.json").is_file()
    assert "cannot connect" in done["store_problem"] and "no-server" in done["store_problem"]
    said = Cli(root, data_dir).ok("init", "--store", url)
    assert "note: the store does not answer yet: cannot connect" in said and "`loopstate doctor` asks again" in said
    assert Cli(root, data_dir).json("init", "--share-id", "--force")["store_problem"] is None  # each machine's own


@pytest.mark.slow
def test_init_store_on_a_server_that_answers_says_nothing_more(root, data_dir, team_url, pg_user):
    done = Cli(root, data_dir).json("init", "--store", team_url)
    assert done["store_file_action"] == "wrote" and done["store_problem"] is None
    assert "does not answer" not in Cli(root, data_dir).ok("init", "--store", team_url)


def test_a_user_name_may_be_committed(root, data_dir):
    done = Cli(root, data_dir).json("init", "--store", "postgresql://loopstate@db.example.org/loopstate")
    assert done["store"] == "postgresql://loopstate@db.example.org/loopstate"


def test_init_keeps_the_id_and_changes_the_store_only_when_forced(root, data_dir):
    cli = Cli(root, data_dir)
    first = cli.json("init", "--store", URL)
    error = cli.refused("init", "--store", "postgresql://other.example.org/loopstate")
    assert error["code"] == "CONFLICT" and "--force" in error["message"]
    moved = cli.json("init", "--store", "postgresql://other.example.org/loopstate", "--force")
    assert moved["store_file_action"] == "updated" and moved["project_id"] == first["project_id"]


@pytest.mark.parametrize("url, said", [
    ("postgresql://alice:secret@db.example.org/loopstate", "carries a password"),
    ("postgresql://db.example.org/loopstate?password=secret", "carries a password"),
    ("postgresql://db.example.org/loopstate?sslpassword=secret", "carries a password"),
    ("mysql://db.example.org/loopstate", "not a PostgreSQL URL"),
    ("postgresql://db.example.org/", "names no database"),
    ("postgresql://db.example.org:port/loopstate", "cannot be parsed"),
])
def test_init_refuses_a_store_url_that_cannot_be_committed(root, data_dir, url, said):
    error = Cli(root, data_dir).refused("init", "--store", url)
    assert error["code"] == "INVALID_PARAMS" and said in error["message"]
    assert "secret" not in json.dumps(error)
    assert not (root / ".loopstate").exists()  # refused before anything was written


ID = b'"project_id": "' + b"a" * 64 + b'"'
BAD_FILES = [
    (b"{not json", "is not valid JSON"),
    (b'{"schema_version": 1, ' + ID + b"}", "is not a loopstate store file"),  # no url
    (b'{"url": "jsonl:", "project_id": "abc"}', "not 64 lowercase hex digits"),
    (b'{"url": "jsonl:", ' + ID + b', "colour": "blue"}', "is not a loopstate store file"),
    (b'{"schema_version": 0, "url": "jsonl:", ' + ID + b"}", "which no loopstate wrote"),
    (b'{"url": "postgresql://u:pw@h/db", ' + ID + b"}", "carries a password"),
    (b'{"url": "sqlite:///x.db"}', "not a PostgreSQL URL"),
]


@pytest.mark.parametrize("content, said", BAD_FILES)
def test_a_bad_project_file_is_refused_with_what_is_wrong(root, data_dir, content, said):
    (root / ".loopstate").mkdir()
    (root / ".loopstate" / "store.json").write_bytes(content)
    with pytest.raises(LoopstateError) as caught:
        Project(str(root))
    assert said in caught.value.message and "store.json" in caught.value.message
    assert "pw@" not in caught.value.message
    error = Cli(root, data_dir).refused("intent", "show")  # every front door refuses it the same way
    assert said in error["message"]


def test_a_project_file_from_a_newer_loopstate_says_upgrade(root, data_dir):
    (root / ".loopstate").mkdir()
    (root / ".loopstate" / "store.json").write_text(json.dumps({"schema_version": 2, "url": "jsonl:"}))
    error = Cli(root, data_dir).refused("intent", "show")
    assert error["code"] == "FUTURE_SCHEMA" and "upgrade loopstate" in error["message"]


def test_a_linked_project_file_is_refused(root, tmp_path):
    elsewhere = tmp_path / "elsewhere.json"
    elsewhere.write_text(json.dumps({"url": "jsonl:", "project_id": "a" * 64}))
    (root / ".loopstate").mkdir()
    (root / ".loopstate" / "store.json").symlink_to(elsewhere)
    with pytest.raises(LoopstateError, match="is a symlink"):
        Project(str(root))


def test_without_a_project_file_the_id_is_the_paths_as_before(root, data_dir):
    assert Project(str(root)).project_id == project_id_for(str(root.resolve()))
    (root / ".loopstate").mkdir()  # a state folder with no project file changes nothing
    assert Project(str(root)).store_file is None
    (root / ".loopstate" / "store.json").write_text('{"url": "jsonl:"}')  # a store and no id: the path's id
    assert Project(str(root)).project_id == project_id_for(str(root.resolve()))


@needs_git
def test_adoption_is_refused_where_the_store_file_sets_the_id(origin, tmp_path, data_dir):
    clone = tmp_path / "moved"
    _git(tmp_path, "clone", "-q", str(origin), str(clone))
    error = Cli(clone, data_dir).refused("project", "adopt", str(origin), "--share")
    assert error["code"] == "CONFLICT" and "store import" in error["message"]


def test_a_folder_below_a_team_project_finds_it_by_its_store_file_on_a_new_machine(tmp_path, data_dir):
    """No git, and a data dir that never saw the project (a new machine): the committed store file
    is what makes the folder a project, so `src/sub` reaches the team's project and its kill switch."""
    team = tmp_path / "team-checkout"
    team.mkdir()
    Cli(team, data_dir).ok("init", "--share-id")
    sub = team / "src" / "sub"
    sub.mkdir(parents=True)
    new_machine = tmp_path / "new-machine-data"
    found = Cli(sub, new_machine).json("root", str(sub), root=False)
    assert (found["root"], found["how"]) == (str(team.resolve()), "project")
    committed = json.loads((team / ".loopstate" / "store.json").read_text())
    assert found["project_id"] == committed["project_id"]
    # Without the file the same folder is only the directory itself.
    (team / ".loopstate" / "store.json").unlink()
    assert Cli(sub, new_machine).json("root", str(sub), root=False)["root"] == str(sub.resolve())
