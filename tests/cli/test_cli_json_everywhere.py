"""The README's promise, checked over the whole parser tree: every verb that reports a result takes --json."""

from __future__ import annotations

import argparse

from loopstate.cli.main import build_parser

# What the README names as the exceptions, and why: a server's stdout is its protocol; `schema` prints JSON
# already; `completion` prints a shell script and `demo` a walk-through; `hook` answers its host in JSON always.
WITHOUT_JSON = {"serve", "mcp", "schema", "completion", "demo", "hook"}


def leaves(parser: argparse.ArgumentParser, path: tuple[str, ...] = ()):
    groups = [a for a in parser._actions if isinstance(a, argparse._SubParsersAction)]
    if not groups:
        yield path, parser
        return
    for group in groups:
        for name, child in group.choices.items():
            if name not in {alias for c in group._choices_actions for alias in getattr(c, "aliases", ())}:
                yield from leaves(child, (*path, name))


def test_every_verb_but_the_named_exceptions_takes_json() -> None:
    found = list(leaves(build_parser()))
    assert len(found) > 60
    missing = [" ".join(path) for path, parser in found
               if path[0] not in WITHOUT_JSON and "--json" not in parser._option_string_actions]
    assert missing == []
    for name in WITHOUT_JSON - {"hook"}:
        assert any(path[0] == name for path, _ in found), name
