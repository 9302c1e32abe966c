"""Every `loopstate ... --help` is kept as a snapshot, so a change to any help text is seen in review.

The snapshot is tests/meta/help_snapshot.txt: each verb's --help from the
real CLI (a subprocess per verb, at 100 columns), in parser order. When a
help text changes on purpose, regenerate it and commit the diff with the
change:

    LOOPSTATE_UPDATE_HELP_SNAPSHOT=1 .venv/bin/python -m pytest -q tests/meta/test_help_snapshot.py

It also holds the help to the rules a newcomer relies on: the upstream specs'
word "seed" appears in none of it, no group opens with an internal docstring,
and every group lists its everyday verbs first.
"""

from __future__ import annotations

import argparse
import os
import subprocess
import sys
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

from loopstate.cli.main import build_parser

SNAPSHOT = Path(__file__).with_name("help_snapshot.txt")


def verb_paths(parser: argparse.ArgumentParser, path: tuple[str, ...] = ()):
    yield path
    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction):
            seen: set[int] = set()
            for name, child in action.choices.items():
                if id(child) not in seen:  # an alias names the same parser
                    seen.add(id(child))
                    yield from verb_paths(child, (*path, name))


def help_of(path: tuple[str, ...]) -> str:
    env = {**os.environ, "COLUMNS": "100"}
    done = subprocess.run([sys.executable, "-m", "loopstate.cli.main", *path, "--help"], capture_output=True,
                          text=True, env=env, timeout=120)
    assert done.returncode == 0, (path, done.stderr)
    return done.stdout


def current() -> str:
    paths = list(verb_paths(build_parser()))
    with ThreadPoolExecutor(max_workers=2) as pool:
        helps = list(pool.map(help_of, paths))
    return "".join(f"=== loopstate {' '.join(path)}\n{text}\n" for path, text in zip(paths, helps))


def test_help_matches_the_committed_snapshot() -> None:
    text = current()
    if os.environ.get("LOOPSTATE_UPDATE_HELP_SNAPSHOT") == "1":
        SNAPSHOT.write_text(text, encoding="utf-8")
    assert SNAPSHOT.exists(), "no snapshot yet: run with LOOPSTATE_UPDATE_HELP_SNAPSHOT=1 (see this file's docstring)"
    assert text == SNAPSHOT.read_text(encoding="utf-8"), (
        "a --help text changed: if on purpose, run LOOPSTATE_UPDATE_HELP_SNAPSHOT=1 .venv/bin/python -m pytest -q "
        "tests/meta/test_help_snapshot.py and commit tests/meta/help_snapshot.txt")
    lowered = text.lower()
    assert "seed" not in lowered
    for group in ("", "intent", "run", "goals"):
        section = text.split(f"=== loopstate {group}\n", 1)[1].split("\n=== ", 1)[0]
        assert "everyday verbs:" in section, group
        others = [line for line in section.splitlines() if line.endswith(":") and not line.startswith(" ")]
        assert others[0] == "everyday verbs:", (group, others)  # the everyday verbs come first
    hook = text.split("=== loopstate hook\n", 1)[1].split("=== ")[0]
    assert "cli.main" not in hook and "answer_hook" not in hook  # no internal docstring as help
