"""Fixtures of the core tests: a Project with short lock waits and fresh Ledgers on it."""

from __future__ import annotations

from pathlib import Path

import pytest

from corekit import TEST_LAYOUT
from loopstate.core.ledger import Ledger
from loopstate.core.project import Project


@pytest.fixture
def core_project(data_dir: Path, root: Path) -> Project:
    """A Project for ``root`` in the per-test data dir, with short lock waits."""
    return Project(str(root), data_dir=data_dir, lock_timeout=5)


@pytest.fixture
def new_ledger(core_project: Project):
    """A factory: each call opens a fresh Ledger on the project, as a new process would."""

    def make(name: str = "core", **kwargs) -> Ledger:
        return Ledger(core_project, name, TEST_LAYOUT, **kwargs)

    return make
