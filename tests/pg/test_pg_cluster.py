"""The test cluster itself: a real server on a private socket, one clean database per test."""

from __future__ import annotations

import psycopg


def test_the_cluster_serves_a_real_postgresql_over_its_own_socket_only(pg_cluster, pg_url):
    with psycopg.connect(pg_url) as conn:
        version = conn.execute("SHOW server_version_num").fetchone()[0]
        listen = conn.execute("SHOW listen_addresses").fetchone()[0]
        sockets = conn.execute("SHOW unix_socket_directories").fetchone()[0]
    assert int(version) >= 130000
    assert listen == ""
    assert sockets == str(pg_cluster.socket_dir)


def test_each_test_gets_its_own_empty_database(pg_cluster, pg_url):
    other = pg_cluster.new_database()
    assert other != pg_url
    with psycopg.connect(pg_url, autocommit=True) as conn:
        conn.execute("CREATE TABLE only_here (x int)")
    with psycopg.connect(other) as conn:
        found = conn.execute("SELECT count(*) FROM pg_tables WHERE tablename = 'only_here'").fetchone()[0]
    assert found == 0
