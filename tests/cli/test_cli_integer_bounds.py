"""Every integer a command carries lies within +-(2^53-1), what a JSON client (the VS Code extension) holds exactly.

A budget of 10^26 used to be accepted, stored, and then shown rounded by a
client reading numbers as doubles. Now the command is refused naming the field,
nothing is written, and the JSON Schema states the bound on every integer.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from clirun import cli
from loopstate_protocol.base import MAX_SAFE_INTEGER

CREATE = ("run", "create", "--objective", "x", "--done-gate", "tests pass", "--asset", "app")


@pytest.mark.parametrize("argv, field", [
    ((*CREATE, "--budgets", '{"max_mutations": 100000000000000000000000000}'), "budgets.max_mutations"),
    ((*CREATE, "--budgets", json.dumps({"max_duration_seconds": MAX_SAFE_INTEGER + 1})), "budgets.max_duration_seconds"),
    (("goals", "add", "g", "t", "--order", str(-MAX_SAFE_INTEGER - 1)), "planner_order"),
], ids=["1e26", "2^53", "negative"])
def test_an_integer_past_the_bound_is_refused_naming_the_field_and_writes_nothing(
        tmp_path: Path, argv: tuple[str, ...], field: str) -> None:
    root, data_dir = tmp_path / "proj", tmp_path / "data"
    root.mkdir()
    done = cli(*argv, cwd=root, data_dir=data_dir)
    assert done.returncode == 1, done
    assert "VALIDATION_FAILED" in done.stderr and f"{field} is out of range" in done.stderr, done.stderr
    assert "Traceback" not in done.stderr
    assert not data_dir.exists() or not list(data_dir.rglob("*.jsonl"))


def test_the_largest_safe_integer_itself_is_accepted(tmp_path: Path) -> None:
    root, data_dir = tmp_path / "proj", tmp_path / "data"
    root.mkdir()
    done = cli(*CREATE, "--budgets", json.dumps({"max_mutations": MAX_SAFE_INTEGER}), "--json", cwd=root,
               data_dir=data_dir)
    assert done.returncode == 0, done.stderr
    run = json.loads(done.stdout)["events"][0]["projection"]["run"]
    assert run["budgets"]["max_mutations"] == MAX_SAFE_INTEGER


def test_a_long_digit_run_inside_a_string_is_not_mistaken_for_an_integer(tmp_path: Path) -> None:
    root, data_dir = tmp_path / "proj", tmp_path / "data"
    root.mkdir()
    done = cli("goals", "add", "g", "ticket 123456789012345678901234", cwd=root, data_dir=data_dir)
    assert done.returncode == 0, done.stderr


def test_the_schema_bounds_every_integer(tmp_path: Path) -> None:
    done = cli("schema", cwd=tmp_path, data_dir=tmp_path / "data")
    document = json.loads(done.stdout)
    seen = 0

    def walk(node):
        nonlocal seen
        if isinstance(node, dict):
            kinds = node.get("type")
            if kinds == "integer" or (isinstance(kinds, list) and "integer" in kinds):
                seen += 1
                assert node.get("maximum", node.get("exclusiveMaximum")) <= MAX_SAFE_INTEGER, node
                assert node.get("minimum", node.get("exclusiveMinimum")) >= -MAX_SAFE_INTEGER, node
            for value in node.values():
                walk(value)
        elif isinstance(node, list):
            for value in node:
                walk(value)

    walk(document)
    assert seen > 20
    budgets = document["$defs"]["Create"]["properties"]["budgets"]
    assert "9007199254740991" in json.dumps(budgets)
