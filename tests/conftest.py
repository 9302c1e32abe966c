"""Shared fixtures: a private data dir and project root per test, pinned clock and ids."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

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


def env_for_child(data_dir: Path) -> dict[str, str]:
    env = dict(os.environ)
    env["LOOPSTATE_DATA_DIR"] = str(data_dir)
    return env
