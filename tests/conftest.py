"""Shared fixtures: a private data dir and project root per test, pinned clock and ids.

Also the rule for tests that need something outside the repository (the upstream
conformance records in ../shared, a system tool such as strace): they skip with a
reason starting "prerequisite missing:", so a fresh clone tests green, and with
LOOPSTATE_REQUIRE_PREREQUISITES=1 (what .ci/run sets) any such skip fails the run,
so CI cannot pass without having run them.
"""

from __future__ import annotations

import os
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
