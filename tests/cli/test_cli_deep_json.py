"""JSON a user hands the CLI (a file, an argument, stdin) that nests too deeply is refused, never a crash.

A recursive decoder raises RecursionError on JSON nested about a thousand
levels deep, and code that handles a shallower value can recurse past the limit
too: each front door that decodes text without a type (`intent import`,
`validate`, `goals append`) refuses data deeper than core.nesting.MAX_DEPTH with
VALIDATION_FAILED naming the input, and writes nothing; `intent start
--claims-json` decodes by type; a hook's stdin fails open saying what is wrong.
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from clirun import cli
from loopstate.core.nesting import MAX_DEPTH


def nested(levels: int) -> str:
    return '{"a":' * levels + "1" + "}" * levels


def arrays(levels: int) -> str:
    return "[" * levels + "]" * levels


@pytest.mark.parametrize("text", [nested(5000), arrays(5000), nested(MAX_DEPTH + 1)], ids=["objects", "arrays", "limit"])
def test_every_json_input_nesting_too_deeply_is_refused_and_writes_nothing(tmp_path: Path, text: str) -> None:
    root, data_dir = tmp_path / "proj", tmp_path / "data"
    root.mkdir()
    deep = tmp_path / "deep.json"
    deep.write_text(text)
    runs = {
        "graph": cli("intent", "import", str(deep), cwd=root, data_dir=data_dir),
        str(deep): cli("validate", "run", str(deep), cwd=root, data_dir=data_dir),
        "payload": cli("goals", "append", "g", "todo_added", text, cwd=root, data_dir=data_dir),
    }
    for what, done in runs.items():
        assert done.returncode == 1, (what, done.stderr)
        assert "Traceback" not in done.stderr and "internal error" not in done.stderr, done.stderr
        assert f"{what} nests deeper than {MAX_DEPTH} levels" in done.stderr, (what, done.stderr)
    # A list of claims is decoded by its type, which refuses the wrong shape before any depth is reached.
    typed = cli("intent", "start", "--claims-json", "-", cwd=root, data_dir=data_dir, stdin=f"[{text}]")
    assert typed.returncode == 1 and "claims-json" in typed.stderr and "internal error" not in typed.stderr, typed.stderr
    assert not data_dir.exists() or not list(data_dir.rglob("*.jsonl"))


def test_json_at_the_limit_is_read(tmp_path: Path) -> None:
    """MAX_DEPTH levels is allowed: the refusal above is about depth, not about JSON objects."""
    root, data_dir = tmp_path / "proj", tmp_path / "data"
    root.mkdir()
    done = cli("goals", "append", "g", "todo_added", nested(MAX_DEPTH), cwd=root, data_dir=data_dir)
    assert "nests deeper" not in done.stderr, done.stderr


def test_a_hook_given_stdin_too_deep_to_read_fails_open_saying_so(tmp_path: Path) -> None:
    root = tmp_path / "proj"
    (root / ".git").mkdir(parents=True)
    payload = '{"session_id": "s", "cwd": ' + json.dumps(str(root)) + ', "x": ' + arrays(5000) + "}"
    done = subprocess.run([sys.executable, "-m", "loopstate.cli.main", "hook", "claude", "UserPromptSubmit"],
                          input=payload, cwd=root, capture_output=True, text=True, timeout=60,
                          env={"LOOPSTATE_DATA_DIR": str(tmp_path / "data"), "PATH": "/usr/bin:/bin"})
    assert done.returncode == 0 and done.stderr == ""
    out = json.loads(done.stdout)
    assert out["continue"] is True and "nests too deeply" in out["systemMessage"], out
    assert "internal error" not in out["systemMessage"]
