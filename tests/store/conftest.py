"""The ``backend`` fixture: one store of each kind, for the suite every store passes
(tests/store/backend_contract.py, collected through test_backend_contract.py).

A kind is a fixture that gives a store URL (``core/stores.py`` makes the store from
it). The local JSONL store is always here; the PostgreSQL kind comes from
tests/store/postgres_cluster.py (its ``postgresql_store_url`` fixture starts a real
cluster, or skips with ``prerequisite missing:``) once that module exists.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from loopstate.core.backend import Store
from loopstate.core.project import Project
from loopstate.core.stores import open_store

# kind -> the name of the fixture that gives its store URL
STORE_KINDS: dict[str, str] = {"jsonl": "jsonl_store_url"}

try:
    from tests.store.postgres_cluster import postgresql_store_url  # noqa: F401  (a fixture, used by name)
except ModuleNotFoundError as exc:
    if exc.name != "tests.store.postgres_cluster":
        raise
else:
    STORE_KINDS["postgresql"] = "postgresql_store_url"


@pytest.fixture
def jsonl_store_url() -> str:
    return "jsonl:"


@pytest.fixture(params=sorted(STORE_KINDS))
def store_kind(request: pytest.FixtureRequest) -> str:
    return str(request.param)


@pytest.fixture
def store_url(request: pytest.FixtureRequest, store_kind: str) -> str:
    return str(request.getfixturevalue(STORE_KINDS[store_kind]))


@pytest.fixture
def store_project(data_dir: Path, root: Path) -> Project:
    return Project(str(root), data_dir=data_dir, lock_timeout=5)


@pytest.fixture
def backend(store_url: str, store_project: Project) -> Iterator[Store]:
    """The store under test, for a project in this test's own data dir and root."""
    store = open_store(store_project, store_url)
    yield store
    store.close()


@pytest.fixture
def second_backend(store_url: str, data_dir: Path, root: Path) -> Iterator[Store]:
    """Another instance of the same store and project, as a second process would open it."""
    store = open_store(Project(str(root), data_dir=data_dir, lock_timeout=5), store_url)
    yield store
    store.close()
