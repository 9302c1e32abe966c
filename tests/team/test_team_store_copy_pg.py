"""Issue 26: `loopstate store export|import` between a JSONL data dir and a real PostgreSQL (real CLI)."""

from __future__ import annotations

import hashlib
from pathlib import Path

import pytest

from tests.runs.clikit import Cli


def _streams(data: Path) -> dict[str, str]:
    return {p.name: hashlib.sha256(p.read_bytes()).hexdigest() for p in sorted(data.rglob("streams/*.jsonl"))}


@pytest.fixture
def local(root: Path, tmp_path: Path) -> Cli:
    cli = Cli(root, tmp_path / "local")
    cli.json("intent", "start", "--label", "to the team store", "--claim", "outcome:one history for the team")
    cli.create()
    return cli


@pytest.mark.slow
def test_jsonl_to_postgresql_and_back_keeps_every_byte(local, root, tmp_path, team_url, pg_user):
    exported = local.json("store", "export", "--to", team_url)
    assert exported["copied"] > 0 and exported["target"].startswith("postgresql:")

    # The store file makes PostgreSQL this project's store, on this machine and on another one (its own data dir).
    assert local.json("init", "--store", team_url)["local_streams"] == len(exported["streams"])
    said = local.ok("init", "--store", team_url)
    assert f"store import --from {tmp_path / 'local'}" in said  # the local history is named, with its copy
    on_pg = Cli(root, tmp_path / "elsewhere")
    again = local.json("store", "import", "--from", str(tmp_path / "local"))  # PG is this project's store now
    assert again["copied"] == 0 and {c["action"] for c in again["streams"]} == {"up_to_date"}

    # Back from PostgreSQL into a fresh data dir: byte for byte the files the project started with.
    back = on_pg.json("store", "export", "--to", str(tmp_path / "copy"))
    assert back["copied"] == exported["copied"]
    assert _streams(tmp_path / "copy") == _streams(tmp_path / "local")
    assert on_pg.json("store", "import", "--from", str(tmp_path / "copy"))["copied"] == 0
    assert not list((tmp_path / "elsewhere").rglob("*.jsonl"))  # nothing of it went to that machine's data dir


@pytest.mark.slow
def test_a_postgresql_store_with_another_history_is_refused(local, root, tmp_path, pg_url):
    other = Cli(root, tmp_path / "other")
    other.json("intent", "start", "--label", "another history", "--claim", "outcome:not the same")
    other.json("store", "export", "--to", pg_url)
    error = local.refused("store", "export", "--to", pg_url)
    assert error["code"] == "CONFLICT" and "nothing was copied" in error["message"]


@pytest.mark.slow
def test_a_store_that_is_down_is_named_without_its_password(local, tmp_path):
    url = f"postgresql://team:s3cret@/nodb?host={tmp_path / 'no-server'}&connect_timeout=2"
    error = local.refused("store", "export", "--to", url)
    assert "s3cret" not in error["message"] and "/nodb" in error["message"]
