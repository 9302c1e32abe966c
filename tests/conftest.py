"""Shared fixtures: a private data dir and project root per test, pinned clock and ids.

Also the rule for tests that need something outside the repository (the upstream
conformance records in ../shared, a system tool such as strace): they skip with a
reason starting "prerequisite missing:", so a fresh clone tests green, and with
LOOPSTATE_REQUIRE_PREREQUISITES=1 (what .ci/run sets) any such skip fails the run,
so CI cannot pass without having run them.

And the rule for which store a test runs on (docs/storage.md, *Which tests run on
PostgreSQL*): every test runs on the local JSONL store; a test (or module) marked
``both_stores`` runs a second time on a real PostgreSQL server, its id ending in
``[postgresql]``, with ``LOOPSTATE_STORE`` naming one database of the session's cluster
(each test's root, and so its project id, is its own, so tests share the database and
never see each other's rows). ``pytest --store=postgresql`` runs every test of the
given folders on PostgreSQL instead, for finding what a folder's other tests would meet;
a test marked ``jsonl_only(reason)`` is about the JSONL file itself and skips there.
"""

from __future__ import annotations

import os
from collections.abc import Iterator
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[1]
SHARED = REPO.parent / "shared"
CONFORMANCE = SHARED / "conformance"
HAVE_CONFORMANCE = CONFORMANCE.is_dir()

PREREQUISITE_MISSING = "prerequisite missing:"
REQUIRE_PREREQUISITES = os.environ.get("LOOPSTATE_REQUIRE_PREREQUISITES") == "1"


def prerequisite(available: bool, what: str) -> pytest.MarkDecorator:
    """Skip when `what` is not here; under LOOPSTATE_REQUIRE_PREREQUISITES=1 that skip fails the run."""
    return pytest.mark.skipif(not available, reason=f"{PREREQUISITE_MISSING} {what}")


needs_conformance = prerequisite(
    HAVE_CONFORMANCE, f"the upstream conformance records ({CONFORMANCE}) are not beside this clone",
)



def require_conformance() -> None:
    """The same skip, from inside a helper that reads a conformance record."""
    if not HAVE_CONFORMANCE:
        pytest.skip(needs_conformance.kwargs["reason"])


_missing: list[str] = []


def pytest_runtest_logreport(report: pytest.TestReport) -> None:
    if report.skipped and isinstance(report.longrepr, tuple) and PREREQUISITE_MISSING in str(report.longrepr[2]):
        _missing.append(f"{report.nodeid}: {report.longrepr[2]}")


def pytest_sessionfinish(session: pytest.Session, exitstatus: int) -> None:
    if REQUIRE_PREREQUISITES and _missing:
        session.exitstatus = pytest.ExitCode.TESTS_FAILED


def pytest_terminal_summary(terminalreporter) -> None:
    if REQUIRE_PREREQUISITES and _missing:
        terminalreporter.section("prerequisites missing (LOOPSTATE_REQUIRE_PREREQUISITES=1)", red=True)
        terminalreporter.write_line(f"{len(_missing)} test(s) skipped for a missing prerequisite; this run fails:")
        for line in _missing[:20]:
            terminalreporter.write_line(f"  {line}")


STORES = ("jsonl", "postgresql")


def pytest_addoption(parser: pytest.Parser) -> None:
    parser.addoption(
        "--store", choices=(*STORES, "both"), default=None,
        help="run every test on this store (both: each test twice); default: JSONL, and "
             "tests marked both_stores on PostgreSQL too",
    )


def pytest_configure(config: pytest.Config) -> None:
    config.addinivalue_line(
        "markers", "both_stores: run on the local JSONL store and again on a real PostgreSQL server "
        "(the test touches storage only through the store contract)")
    config.addinivalue_line(
        "markers", "jsonl_only(reason): the test is about the JSONL file itself (torn tails, fsync, "
        "modes, checkpoint files); it never runs on PostgreSQL")


def pytest_generate_tests(metafunc: pytest.Metafunc) -> None:
    if "on_store" not in metafunc.fixturenames:
        return
    chosen = metafunc.config.getoption("store")
    if chosen == "both" or (chosen is None and metafunc.definition.get_closest_marker("both_stores")):
        metafunc.parametrize("on_store", STORES, indirect=True)
    elif chosen is not None:
        metafunc.parametrize("on_store", [chosen], indirect=True)


_suite_database: list[str] = []


@pytest.fixture(autouse=True)
def on_store(request: pytest.FixtureRequest, monkeypatch: pytest.MonkeyPatch) -> Iterator[str]:
    """The kind of store this test runs on; on PostgreSQL, ``LOOPSTATE_STORE`` names it for
    this process and every child the test starts (they inherit the environment)."""
    kind = getattr(request, "param", "jsonl")
    if kind == "jsonl":
        monkeypatch.delenv("LOOPSTATE_STORE", raising=False)
        yield kind
        return
    reason = request.node.get_closest_marker("jsonl_only")
    if reason is not None:
        pytest.skip(f"JSONL only: {reason.args[0] if reason.args else reason.kwargs.get('reason')}")
    from tests.pg.pg_cluster import shared_cluster, skip_reason

    missing = skip_reason()
    if missing:
        pytest.skip(missing)
    if not _suite_database:
        _suite_database.append(shared_cluster(request.config).new_database("suites"))
    monkeypatch.setenv("LOOPSTATE_STORE", _suite_database[0])
    yield kind
    from loopstate.core.stores import close_opened

    close_opened()  # the test's stores' connections end with it: the server's clients are few


def stored_lines(project, name: str) -> list[bytes]:  # noqa: ANN001 (a Project)
    """Stream ``name``'s canonical lines as the project's store holds them, whichever store that is."""
    from loopstate.core.stores import open_store
    from loopstate.service.front import stream_layout

    return [stored.line for stored in open_store(project).read(name, stream_layout(name))]


def snapshot_file(project, name: str):  # noqa: ANN001 (a Project)
    """Where this machine keeps stream ``name``'s projection snapshot, and the type of that file's
    envelope, whichever store the test runs on (core/snapshot.py, core/postgres/snapshots.py)."""
    if os.environ.get("LOOPSTATE_STORE"):
        from loopstate.core.postgres import snapshots

        return snapshots.path_for(project, name), snapshots.SnapshotFile
    from loopstate.core.snapshot import SnapshotFile

    return project.dir / "snapshots" / f"{name}.msgpack", SnapshotFile


def stored_streams(project) -> list[str]:  # noqa: ANN001 (a Project)
    """The project's stream names, from its store."""
    from loopstate.core.stores import open_store

    return open_store(project).stream_names()


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


def store_env() -> dict[str, str]:
    """``LOOPSTATE_STORE`` as this test runs with it (nothing on the JSONL store), for a child
    process whose environment a test builds from nothing."""
    url = os.environ.get("LOOPSTATE_STORE")
    return {"LOOPSTATE_STORE": url} if url else {}


def rows_at_rest(project) -> list[tuple[str, bytes]]:  # noqa: ANN001 (a Project)
    """On PostgreSQL, what the database keeps of ``project``: every column of its rows in every
    ``loopstate`` table that has a ``project`` column, one entry per table (nothing on JSONL, whose
    files a test reads itself). For the tests that check a secret is nowhere at rest."""
    url = os.environ.get("LOOPSTATE_STORE")
    if not url:
        return []
    import psycopg

    found = []
    with psycopg.connect(url) as conn:
        tables = [row[0] for row in conn.execute(
            "SELECT table_name FROM information_schema.columns WHERE table_schema = 'loopstate' "
            "AND column_name = 'project' ORDER BY table_name")]
        for table in tables:
            rows = conn.execute(f'SELECT * FROM loopstate."{table}" WHERE project = %s', (project.project_id,)).fetchall()
            found.append((f"postgresql:loopstate.{table}", "\n".join(map(repr, rows)).encode()))
    return found
