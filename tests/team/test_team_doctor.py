"""Issue 26: `loopstate doctor` names the store in use, where the choice came from, and whether it answers."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from tests.conftest import REPO


def doctor(root: Path, data_dir: Path, home: Path, **env: str) -> tuple[int, dict]:
    base = {k: v for k, v in os.environ.items() if k not in ("LOOPSTATE_STORE", "CODEX_HOME", "CLAUDE_CONFIG_DIR")}
    base.update(LOOPSTATE_DATA_DIR=str(data_dir), HOME=str(home), PATH=os.path.dirname(sys.executable), **env)
    done = subprocess.run([sys.executable, "-m", "loopstate.cli.main", "doctor", "--json", "--root", str(root)],
                          capture_output=True, text=True, env=base, cwd=REPO, timeout=120)
    return done.returncode, json.loads(done.stdout)


@pytest.fixture
def home(tmp_path: Path) -> Path:
    path = tmp_path / "home"  # no host installed: doctor checks the store alone
    path.mkdir()
    return path


def test_the_local_store_is_the_default(root, data_dir, home):
    _, report = doctor(root, data_dir, home)
    assert report["store"]["url"] == f"jsonl: {data_dir}" and report["store"]["answers"] is True
    assert report["store"]["source"].startswith("the default")


@pytest.mark.slow
def test_a_postgresql_store_that_answers(root, data_dir, home, pg_url):
    _, report = doctor(root, data_dir, home, LOOPSTATE_STORE=pg_url)
    store = report["store"]
    assert store["source"] == "LOOPSTATE_STORE" and store["answers"] is True and store["streams"] == 0
    assert store["problem"] is None


@pytest.mark.slow
def test_the_committed_store_file_names_the_store(root, data_dir, home, team_url, pg_user, tmp_path):
    (root / ".loopstate").mkdir()
    (root / ".loopstate" / "store.json").write_text(json.dumps({"url": team_url}))
    _, report = doctor(root, data_dir, home, PGUSER=pg_user)
    assert report["store"]["source"] == ".loopstate/store.json" and report["store"]["answers"] is True


def test_a_store_that_is_down_is_a_problem_naming_its_url_without_the_password(root, data_dir, home, tmp_path):
    url = f"postgresql://team:s3cret@/loopstate?host={tmp_path / 'no-server'}&connect_timeout=2"
    code, report = doctor(root, data_dir, home, LOOPSTATE_STORE=url)
    assert code == 1 and report["store"]["answers"] is False
    problem = report["store"]["problem"]
    assert "does not answer" in problem and "/loopstate" in problem and "s3cret" not in json.dumps(report)
    assert problem in report["problems"]


def test_a_password_given_as_a_parameter_is_not_shown_either(root, data_dir, home, tmp_path):
    url = f"postgresql:///loopstate?host={tmp_path / 'no-server'}&password=s3cret&connect_timeout=2"
    _, report = doctor(root, data_dir, home, LOOPSTATE_STORE=url)
    assert report["store"]["answers"] is False and "s3cret" not in json.dumps(report)
