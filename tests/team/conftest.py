"""Fixtures of the team tests: a real PostgreSQL database (tests/pg/pg_cluster.py's server) and a
team's store URL for it, as a committed store file holds it (no user name: PGUSER gives it)."""

from __future__ import annotations

from urllib.parse import urlsplit

import pytest

from tests.pg.pg_cluster import shared_cluster, skip_reason


@pytest.fixture
def pg_url(request: pytest.FixtureRequest) -> str:
    """A `postgresql://user@/db?host=SOCKET_DIR` URL to a new, empty database of the run's real server."""
    reason = skip_reason()
    if reason:
        pytest.skip(reason)
    return shared_cluster(request.config).new_database("team")


@pytest.fixture
def team_url(pg_url: str) -> str:
    """``pg_url`` without its user name: what `loopstate init --store` accepts and a team commits."""
    parts = urlsplit(pg_url)
    return f"{parts.scheme}://{parts.netloc.rpartition('@')[2]}{parts.path}?{parts.query}"


@pytest.fixture
def pg_user(pg_url: str, monkeypatch: pytest.MonkeyPatch) -> str:
    """The user the machine gives libpq (PGUSER), set for this test and its child processes."""
    user = urlsplit(pg_url).username or ""
    monkeypatch.setenv("PGUSER", user)
    return user
