"""Issue 11: exact retries replay, and refusals write nothing (through the real CLI in subprocesses)."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from loopstate.core.project import Project
from tests.conftest import stored_streams
from tests.runs.clikit import Cli, files_under

pytestmark = pytest.mark.both_stores  # docs/storage.md, *Which tests run on PostgreSQL*

GRANT = ("run", "authority", "grant", "--level", "bounded", "--by", "me", "--asset", "app", "--action", "local_write",
         "--destination", "repository", "--risk", "files change", "--confirm", "CONFIRM", "--expires",
         "2099-01-01T00:00:00Z")


@pytest.fixture
def cli(root: Path, data_dir: Path) -> Cli:
    return Cli(root, data_dir)


def streams(data_dir: Path) -> list[str]:
    """The streams the store holds: the files below ``data_dir``, or, on PostgreSQL, the stored
    streams of the project at the conftest's ``workspace`` root beside it."""
    if os.environ.get("LOOPSTATE_STORE"):
        return stored_streams(Project(str(data_dir.parent / "workspace"), data_dir=data_dir))
    return sorted(p.name[:-len(".jsonl")] for p in data_dir.glob("projects/*/streams/*.jsonl"))


def test_run_create_with_a_request_id_twice_is_one_run_and_one_grant(cli, data_dir):
    first = cli.json("run", "create", "--objective", "o", "--done-gate", "g", "--asset", "app", "--request-id", "R-1")
    again = cli.json("run", "create", "--objective", "o", "--done-gate", "g", "--asset", "app", "--request-id", "R-1")
    assert again["run_id"] == first["run_id"] and again["authority_grant_id"] == first["authority_grant_id"]
    assert first["replayed"] is False and again["replayed"] is True
    assert again["events"] == first["events"]
    assert streams(data_dir) == sorted([f"runs.{first['run_id']}", f"grants.{first['authority_grant_id']}"])
    assert len(cli.json("run", "list")["runs"]) == 1


def test_a_changed_run_create_with_the_same_request_id_is_refused(cli, data_dir):
    cli.json("run", "create", "--objective", "o", "--done-gate", "g", "--asset", "app", "--request-id", "R-2")
    before = streams(data_dir)
    error = cli.refused("run", "create", "--objective", "other", "--done-gate", "g", "--asset", "app",
                        "--request-id", "R-2")
    assert error["code"] == "REQUEST_ID_REUSED"
    assert streams(data_dir) == before


def test_authority_grant_with_a_request_id_twice_is_one_grant(cli, data_dir):
    first = cli.json(*GRANT, "--request-id", "G-1")
    again = cli.json(*GRANT, "--request-id", "G-1")
    assert again["grant_id"] == first["grant_id"] and again["replayed"] is True
    assert streams(data_dir) == [f"grants.{first['grant_id']}"]
    changed = list(GRANT)
    changed[changed.index("bounded")] = "scoped"
    assert cli.refused(*changed, "--request-id", "G-1")["code"] == "REQUEST_ID_REUSED"


def test_a_create_refused_for_its_budget_leaves_no_file_at_all(cli, data_dir):
    error = cli.refused("run", "create", "--objective", "o", "--done-gate", "g", "--asset", "app",
                        "--budgets", '{"max_mutations": -1}')
    assert error["code"] == "VALIDATION_FAILED" and error["details"]["field"] == "$.max_mutations"
    assert files_under(data_dir) == []  # no project.json (it would hold the root), no lock, no grant


def test_a_create_refused_by_a_standing_kill_switch_leaves_no_grant_and_no_stream(cli, root, data_dir):
    (root / ".loopstate").mkdir()
    (root / ".loopstate" / "STOP").write_text("")
    error = cli.refused("run", "create", "--objective", "o", "--done-gate", "g", "--asset", "app")
    assert error["code"] == "KILL_SWITCH"
    assert streams(data_dir) == []
    assert not [p for p in files_under(data_dir) if "grants" in p]
    (root / ".loopstate" / "STOP").unlink()
    created = cli.json("run", "create", "--objective", "o", "--done-gate", "g", "--asset", "app")
    assert created["authority_grant_id"] is not None
    assert len(streams(data_dir)) == 2


def test_a_create_refused_for_its_grant_scope_leaves_no_default_grant(cli, data_dir):
    """A grant that does not cover the asset: refused after the lock, yet only the named grant's stream exists."""
    grant = cli.json(*GRANT)["grant_id"]
    error = cli.refused("run", "create", "--objective", "o", "--done-gate", "g", "--asset", "elsewhere",
                        "--grant", grant)
    assert error["code"] == "AUTHORITY_DENIED"
    assert streams(data_dir) == [f"grants.{grant}"]


@pytest.mark.parametrize("argv", [
    ["intent", "start", *[a for n in range(13) for a in ("--claim", f"outcome:claim {n}")]],
    ["intent", "start", "--mode", "off", "--label", "x"],
], ids=["13-initial-claims", "off-mode-with-a-label"])
def test_an_intent_start_refused_by_validation_leaves_no_file_at_all(cli, data_dir, argv):
    done = cli(*argv)
    assert done.returncode == 1, done.stderr
    assert files_under(data_dir) == []
