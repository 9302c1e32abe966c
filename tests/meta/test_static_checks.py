"""ruff and mypy, configured in pyproject.toml, run as tests: the tree is clean, and each
checker is shown to report a planted violation under that same configuration."""

from __future__ import annotations

import os
import re
import subprocess
import sys
import textwrap
import tomllib
from pathlib import Path
from typing import Any

import pytest
import tomlkit

from tests.conftest import REPO, prerequisite

CONFIG = tomllib.loads((REPO / "pyproject.toml").read_text(encoding="utf-8"))
MYPY_TIMEOUT = 900  # a cold run on a loaded 2-core machine; a warm one takes seconds


def have(module: str) -> bool:
    from importlib.util import find_spec

    return find_spec(module) is not None


needs_ruff = prerequisite(have("ruff"), "ruff (pip install -e '.[test]')")
needs_mypy = prerequisite(have("mypy"), "mypy (pip install -e '.[test]')")


def run(argv: list[str], cwd: Path, timeout: float = 300) -> subprocess.CompletedProcess[str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("MYPY")}
    return subprocess.run(argv, cwd=cwd, env=env, capture_output=True, text=True, timeout=timeout)


# ruff -------------------------------------------------------------------------------------------


@needs_ruff
def test_ruff_finds_nothing_in_the_tree() -> None:
    result = run([sys.executable, "-m", "ruff", "check", "--no-cache", "server", "protocol", "tests"], REPO)
    assert result.returncode == 0, result.stdout + result.stderr


@needs_ruff
def test_ruff_reports_a_planted_violation_of_each_rule_family(tmp_path: Path) -> None:
    planted = tmp_path / "server" / "loopstate" / "planted.py"
    planted.parent.mkdir(parents=True)
    planted.write_text(textwrap.dedent("""\
        import os
        import sys


        def keep(items=[]):
            return items


        def compare(x):
            return x == None
        """))
    result = run([sys.executable, "-m", "ruff", "check", "--no-cache", "--config", str(REPO / "pyproject.toml"),
                  "--output-format", "concise", str(planted)], tmp_path)
    assert result.returncode == 1, result.stdout + result.stderr
    found = set(re.findall(r"\b([A-Z]+\d{3,4})\b", result.stdout))
    assert {"F401", "B006", "E711"} <= found, result.stdout  # pyflakes, bugbear, pycodestyle


# mypy -------------------------------------------------------------------------------------------


def mypy_settings() -> tuple[dict[str, Any], list[dict[str, Any]]]:
    """The [tool.mypy] settings and its per-module levels."""
    settings = dict(CONFIG["tool"]["mypy"])
    levels = settings.pop("overrides")
    return settings, levels


def write_config(folder: Path, settings: dict[str, Any], levels: list[dict[str, Any]]) -> Path:
    document = tomlkit.document()
    mypy = tomlkit.table()
    for key, value in settings.items():
        mypy[key] = value
    tables = tomlkit.aot()
    for level in levels:
        tables.append(tomlkit.item(level))
    mypy["overrides"] = tables
    tool = tomlkit.table()
    tool["mypy"] = mypy
    document["tool"] = tool
    path = folder / "pyproject.toml"
    path.write_text(tomlkit.dumps(document))
    return path


def errors_by_module(output: str) -> dict[str, list[str]]:
    found: dict[str, list[str]] = {}
    for line in output.splitlines():
        match = re.match(r"(?:server|protocol)/(.+?)\.py:\d+: error: ", line)
        if match:
            module = match.group(1).replace("/", ".").removesuffix(".__init__")
            found.setdefault(module, []).append(line)
    return found


@needs_mypy
def test_mypy_is_clean_everywhere() -> None:
    """Every module at its level, none waived: the project's own configuration finds no error."""
    result = run([sys.executable, "-m", "mypy", "--no-error-summary"], REPO, MYPY_TIMEOUT)
    assert "error: " not in result.stderr, result.stderr
    assert errors_by_module(result.stdout) == {}, result.stdout
    assert result.returncode == 0, result.stdout + result.stderr


@needs_mypy
def test_mypy_reports_planted_violations_at_each_level(tmp_path: Path) -> None:
    """strict on core, the protocol and the service (an unannotated function is refused);
    the normal level elsewhere (an unannotated function is let be, a wrong type is not)."""
    files = {
        "server/loopstate/__init__.py": "",
        "server/loopstate/core/__init__.py": "",
        "server/loopstate/core/planted.py": "def echo(value):\n    return value\n",
        "server/loopstate/service/__init__.py": "",
        "server/loopstate/service/planted.py": "def count() -> int:\n    return len([1]) + 0.5\n",
        "server/loopstate/cli/__init__.py": "",
        "server/loopstate/cli/planted.py": "def echo(value):\n    return value\n\n\nlabel: int = 'one'\n",
        "protocol/loopstate_protocol/__init__.py": "from typing import Any\n\n\ndef wire() -> dict:\n"
                                                   "    return {}\n",
    }
    for name, text in files.items():
        (tmp_path / name).parent.mkdir(parents=True, exist_ok=True)
        (tmp_path / name).write_text(text)
    settings, levels = mypy_settings()
    config = write_config(tmp_path, settings, levels)
    result = run([sys.executable, "-m", "mypy", "--config-file", str(config), "--no-error-summary"], tmp_path,
                 MYPY_TIMEOUT)
    found = errors_by_module(result.stdout)
    assert result.returncode == 1, result.stdout + result.stderr
    assert any("no-untyped-def" in line for line in found.get("loopstate.core.planted", [])), result.stdout
    assert any("return-value" in line for line in found.get("loopstate.service.planted", [])), result.stdout
    assert any("type-arg" in line for line in found.get("loopstate_protocol", [])), result.stdout
    cli = found.get("loopstate.cli.planted", [])
    assert len(cli) == 1 and "assignment" in cli[0], result.stdout


@pytest.mark.parametrize("tool", ["ruff", "mypy"])
def test_the_checkers_are_in_the_test_extra(tool: str) -> None:
    assert any(requirement.startswith(tool) for requirement in CONFIG["project"]["optional-dependencies"]["test"])
