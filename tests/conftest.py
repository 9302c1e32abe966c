"""Shared fixtures: a private data dir and project root per test, pinned clock and ids."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from loopstate.core.chain import ChainLayout

REPO = Path(__file__).resolve().parents[1]
SHARED = REPO.parent / "shared"
CONFORMANCE = SHARED / "conformance"


@pytest.fixture
def data_dir(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    path = tmp_path / "data"
    monkeypatch.setenv("LOOPSTATE_DATA_DIR", str(path))
    return path


@pytest.fixture
def root(tmp_path: Path) -> Path:
    path = tmp_path / "workspace"
    path.mkdir()
    return path


def _classify(value):
    if value == 1:
        return "ok"
    if isinstance(value, int) and value > 1:
        return "future"
    return "invalid"


# A plain layout for core tests: the core does not care which domain wrote a stream.
TEST_LAYOUT = ChainLayout(
    sequence_field="sequence", prev_field="prev_hash", hash_field="event_hash",
    schema_field="schema_version", classify_schema=_classify,
)


@pytest.fixture
def layout() -> ChainLayout:
    return TEST_LAYOUT


def env_for_child(data_dir: Path) -> dict[str, str]:
    env = dict(os.environ)
    env["LOOPSTATE_DATA_DIR"] = str(data_dir)
    return env


@pytest.fixture
def core_project(data_dir: Path, root: Path):
    """A Project for ``root`` in the per-test data dir, with short lock waits."""
    from loopstate.core.project import Project

    return Project(str(root), data_dir=data_dir, lock_timeout=5)


@pytest.fixture
def new_ledger(core_project, layout):
    """A factory: each call opens a fresh Ledger on the project, as a new process would."""
    from loopstate.core.ledger import Ledger

    def make(name: str = "core", **kwargs):
        return Ledger(core_project, name, layout, **kwargs)

    return make
