"""Fixtures of the PostgreSQL tests: the session's real cluster and a fresh database per test."""

from __future__ import annotations

import pytest

from tests.pg.pg_cluster import Cluster, shared_cluster, skip_reason


@pytest.fixture(scope="session")
def pg_cluster(request: pytest.FixtureRequest) -> Cluster:
    """The real PostgreSQL server of this run (skips with `prerequisite missing:` without one)."""
    reason = skip_reason()
    if reason:
        pytest.skip(reason)
    return shared_cluster(request.config)


@pytest.fixture
def pg_url(pg_cluster: Cluster) -> str:
    """A `postgresql://` URL to a new, empty database of that server."""
    return pg_cluster.new_database()
