"""`intent hook-context TASK` is a hook's read: like `loopstate hook`, it fails open (exit 0, nothing injected).

A script that runs it before each prompt must never block the user's turn on
a damaged store; the fault and its fix go to stderr (and to ``fault`` with
--json), and the store is left exactly as it was.
"""

from __future__ import annotations

import json
from pathlib import Path

from clirun import cli


def _project(tmp_path: Path) -> tuple[Path, Path, str]:
    root, data = tmp_path / "proj", tmp_path / "data"
    root.mkdir()
    assert cli("intent", "start", "--claim", "outcome:Ship the parser", cwd=root, data_dir=data).returncode == 0
    task = json.loads(cli("intent", "tasks", "--json", cwd=root, data_dir=data).stdout)["tasks"][0]["task_id"]
    return root, data, task


def test_a_healthy_store_injects_the_users_claims(tmp_path: Path) -> None:
    root, data, task = _project(tmp_path)
    done = cli("intent", "hook-context", task[:8], cwd=root, data_dir=data)
    assert done.returncode == 0 and "Ship the parser" in done.stdout and done.stderr == ""


def test_a_corrupt_store_fails_open_and_is_left_as_it_was(tmp_path: Path) -> None:
    root, data, task = _project(tmp_path)
    (stream,) = data.rglob("intent.jsonl")
    damaged = stream.read_bytes().replace(b"Ship the parser", b"Ship the PARSER")
    stream.write_bytes(damaged)
    done = cli("intent", "hook-context", task, cwd=root, data_dir=data)
    assert done.returncode == 0, done
    assert "Ship the" not in done.stdout
    assert "CORRUPT_LEDGER" in done.stderr and "loopstate verify" in done.stderr and "fails open" in done.stderr
    as_json = cli("intent", "hook-context", task, "--json", cwd=root, data_dir=data)
    assert as_json.returncode == 0
    answer = json.loads(as_json.stdout)
    assert answer["text"] == "" and answer["claim_ids"] == [] and answer["fault"]["code"] == "CORRUPT_LEDGER"
    assert stream.read_bytes() == damaged
    # Every other read still refuses the corrupt store (exit 1): only the hook's read fails open.
    assert cli("intent", "show", cwd=root, data_dir=data).returncode == 1
    assert cli("verify", cwd=root, data_dir=data).returncode == 1


def test_a_task_that_is_gone_fails_open_too(tmp_path: Path) -> None:
    root, data, _ = _project(tmp_path)
    done = cli("intent", "hook-context", "ffffffff", cwd=root, data_dir=data)
    assert done.returncode == 0 and done.stdout == "" and "NOT_FOUND" in done.stderr
    assert cli("verify", cwd=root, data_dir=data).returncode == 0
