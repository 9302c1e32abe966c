"""The PostgreSQL kind of the shared store suite: a URL to a fresh database of a real server.

tests/store/conftest.py imports ``postgresql_store_url`` from here and adds the kind
``postgresql``, so every test of tests/store/backend_contract.py runs against it too. The
server is tests/pg/pg_cluster.py's: one cluster per pytest process (``initdb`` + ``pg_ctl``
in a temp dir, Unix socket only), and each test gets its own database, so no test sees
another's rows. Without PostgreSQL or psycopg these tests skip with ``prerequisite missing:``.
"""

from __future__ import annotations

import pytest

from tests.pg.pg_cluster import shared_cluster, skip_reason


@pytest.fixture
def postgresql_store_url(request: pytest.FixtureRequest) -> str:
    reason = skip_reason()
    if reason:
        pytest.skip(reason)
    return shared_cluster(request.config).new_database("store")
