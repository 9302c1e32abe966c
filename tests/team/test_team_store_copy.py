"""Issue 26: `loopstate store export|import` between two JSONL data dirs (the real CLI in subprocesses)."""

from __future__ import annotations

import hashlib
from pathlib import Path

import pytest

from tests.runs.clikit import Cli, files_under


def _streams(data: Path) -> dict[str, str]:
    """Each stream file below ``data`` and the SHA-256 of its bytes."""
    return {p.name: hashlib.sha256(p.read_bytes()).hexdigest() for p in sorted(data.rglob("streams/*.jsonl"))}


def _add(cli: Cli, statement: str) -> None:
    cli.json("intent", "add", cli.json("intent", "tasks")["current_task_id"], statement)


@pytest.fixture
def a(root: Path, tmp_path: Path) -> Cli:
    """A project with intent, a run and a goal in data dir ``a``."""
    cli = Cli(root, tmp_path / "a")
    cli.json("intent", "start", "--label", "copy me", "--claim", "outcome:the history moves whole",
             "--claim", "hard_constraint:no event is changed")
    cli.create()
    return cli


def test_export_copies_every_stream_byte_for_byte_and_a_second_export_adds_nothing(a, root, tmp_path):
    target = tmp_path / "b"
    done = a.json("store", "export", "--to", str(target))
    assert done["copied"] > 0 and {c["action"] for c in done["streams"]} == {"copied"}
    assert _streams(target) == _streams(tmp_path / "a") and len(_streams(target)) >= 2
    b = Cli(root, target)
    verified = b.json("verify")
    assert verified["ok"] and len(verified["streams"]) == len(done["streams"])
    assert b.json("intent", "show") == a.json("intent", "show")

    again = a.json("store", "export", "--to", str(target))
    assert again["copied"] == 0 and {c["action"] for c in again["streams"]} == {"up_to_date"}
    assert _streams(target) == _streams(tmp_path / "a")


def test_import_goes_on_from_the_targets_head(a, root, tmp_path):
    c = Cli(root, tmp_path / "c")
    first = c.json("store", "import", "--from", str(tmp_path / "a"))
    _add(a, "later claims follow")
    second = c.json("store", "import", "--from", str(tmp_path / "a"))
    intent = next(s for s in second["streams"] if s["stream"] == "intent")
    before = next(s for s in first["streams"] if s["stream"] == "intent")
    assert intent["action"] == "copied" and intent["target_head_before"] == before["target_head"]
    assert intent["copied"] == intent["target_head"] - before["target_head"] > 0
    assert _streams(tmp_path / "c") == _streams(tmp_path / "a")


def test_a_target_with_another_history_is_refused_and_left_as_it_was(a, root, tmp_path):
    b = Cli(root, tmp_path / "b")
    b.json("intent", "start", "--label", "a history of its own", "--claim", "outcome:something else")
    before = _streams(tmp_path / "b")
    error = a.refused("store", "export", "--to", str(tmp_path / "b"))
    assert error["code"] == "CONFLICT" and "intent" in error["message"] and "nothing was copied" in error["message"]
    assert _streams(tmp_path / "b") == before  # not even the streams that did not diverge


def test_a_target_ahead_on_the_same_history_is_left_as_it_is(a, root, tmp_path):
    a.json("store", "export", "--to", str(tmp_path / "b"))
    b = Cli(root, tmp_path / "b")
    _add(b, "written on the target")
    ahead = a.json("store", "export", "--to", str(tmp_path / "b"))
    assert {c["stream"]: c["action"] for c in ahead["streams"]}["intent"] == "target_ahead"
    assert ahead["copied"] == 0


def test_a_damaged_source_is_refused_before_anything_is_written(a, root, tmp_path):
    stream = next((tmp_path / "a").rglob("streams/intent.jsonl"))
    lines = stream.read_bytes().split(b"\n")
    lines[0] = lines[0].replace(b"the history moves whole", b"the history moves WHOLE")
    stream.write_bytes(b"\n".join(lines))
    error = a.refused("store", "export", "--to", str(tmp_path / "b"))
    assert error["code"] == "CORRUPT_LEDGER"
    assert not list((tmp_path / "b").rglob("*.jsonl"))


@pytest.mark.parametrize("where, code", [("mysql://db.example.org/x", "INVALID_PARAMS")])
def test_a_target_that_is_no_store_is_refused(a, where, code):
    assert a.refused("store", "export", "--to", where)["code"] == code


@pytest.mark.parametrize("where", ["", "   "])
def test_an_empty_target_or_source_is_refused_and_nothing_is_written(a, root, where):
    """An empty path is not the current folder: exporting there would put a data dir in the work tree."""
    for verb, option in (("export", "--to"), ("import", "--from")):
        error = a.refused("store", verb, option, where)
        assert error["code"] == "INVALID_PARAMS" and f"{option} is empty" in error["message"]
    assert not (root / "projects").exists()


def test_a_source_data_dir_that_is_not_there_is_refused_not_taken_for_an_empty_store(a, tmp_path):
    missing = a.refused("store", "import", "--from", str(tmp_path / "no-such-dir"))
    assert missing["code"] == "NOT_FOUND" and "does not exist" in missing["message"]
    (tmp_path / "a-file").write_text("")
    not_a_folder = a.refused("store", "import", "--from", str(tmp_path / "a-file"))
    assert not_a_folder["code"] == "NOT_FOUND" and "is not a folder" in not_a_folder["message"]
    empty = tmp_path / "empty-data-dir"
    empty.mkdir()
    assert a.json("store", "import", "--from", str(empty))["copied"] == 0  # a data dir without the project


def test_the_projects_own_data_dir_is_no_target(a, tmp_path):
    error = a.refused("store", "export", "--to", str(tmp_path / "a"))
    assert error["code"] == "INVALID_PARAMS" and "own data dir" in error["message"]


def test_an_empty_project_exports_nothing_and_makes_nothing(root, tmp_path):
    done = Cli(root, tmp_path / "a").json("store", "export", "--to", str(tmp_path / "b"))
    assert done["streams"] == [] and done["copied"] == 0
    assert files_under(tmp_path / "b") == []
