"""The intent domain's wording table stays true to the CLI and the protocol it names."""

from __future__ import annotations

import argparse
import ast
from pathlib import Path

import pytest
from loopstate_protocol import intent as p

import loopstate.domains.intent as intent_pkg
import loopstate.service.intent_effects as intent_effects
from loopstate.cli.main import build_parser
from loopstate.domains.intent.wording import CLI_VERBS, article, nearest, op


def _subparsers(parser: argparse.ArgumentParser) -> dict[str, argparse.ArgumentParser]:
    return next(a.choices for a in parser._actions if isinstance(a, argparse._SubParsersAction))


def test_every_named_verb_is_a_cli_verb_and_every_method_a_protocol_method() -> None:
    intent_verbs = _subparsers(_subparsers(build_parser())["intent"])
    methods = {cls.__struct_config__.tag for cls in (*p.COMMANDS, *p.QUERIES)}
    for method, verb in CLI_VERBS.items():
        assert method in methods, method
        program, domain, name = verb.split()
        assert (program, domain) == ("loopstate", "intent") and name in intent_verbs, verb


def test_the_verb_builds_the_command_the_method_names() -> None:
    """`loopstate intent start` builds intent.task_start, and so on: checked through each verb's source."""
    import loopstate.cli.intent as cli_intent

    intent_verbs = _subparsers(_subparsers(build_parser())["intent"])
    source = ast.parse(Path(cli_intent.__file__).read_text(encoding="utf-8"))
    functions = {node.name: node for node in ast.walk(source) if isinstance(node, ast.FunctionDef)}
    by_class = {cls.__name__: cls.__struct_config__.tag for cls in (*p.COMMANDS, *p.QUERIES)}
    for method, verb in CLI_VERBS.items():
        func = intent_verbs[verb.split()[2]].get_default("func")
        built = {node.id for node in ast.walk(functions[func.__name__]) if isinstance(node, ast.Name)}
        assert method in {by_class[name] for name in built if name in by_class}, (verb, method)


def test_no_message_names_a_bare_wire_method() -> None:
    """Every intent method a message names goes through op(), so it carries its CLI verb too
    (docstrings may name methods: they are not shown to users)."""
    files = [*Path(intent_pkg.__file__).parent.glob("*.py"), Path(intent_effects.__file__)]
    methods = [cls.__struct_config__.tag for cls in (*p.COMMANDS, *p.QUERIES)]
    bare = []
    for path in files:
        if path.name == "wording.py":
            continue
        tree = ast.parse(path.read_text(encoding="utf-8"))
        docstrings = {id(node.body[0].value) for node in ast.walk(tree)
                      if isinstance(node, (ast.Module, ast.ClassDef, ast.FunctionDef)) and node.body
                      and isinstance(node.body[0], ast.Expr) and isinstance(node.body[0].value, ast.Constant)}
        for node in ast.walk(tree):
            if isinstance(node, ast.Constant) and isinstance(node.value, str) and id(node) not in docstrings:
                bare += [f"{path.name}: {node.value!r}" for method in methods if method in node.value
                         and node.value.strip() != method]
    assert bare == []


def test_op_names_both() -> None:
    assert op("intent.task_start") == "`loopstate intent start` (intent.task_start)"


@pytest.mark.parametrize(("word", "expected"), [
    ("user", "a 'user'"), ("agent", "an 'agent'"), ("evidence", "an 'evidence'"), ("system", "a 'system'"),
    ("user_event", "a 'user_event'"), ("agent_turn", "an 'agent_turn'"), ("tool_result", "a 'tool_result'"),
    ("external_evidence", "an 'external_evidence'"), ("explicit_import", "an 'explicit_import'"),
    ("unknown", "an 'unknown'"), ("inferred", "an 'inferred'"), ("disputed", "a 'disputed'"),
])
def test_article(word: str, expected: str) -> None:
    assert article(word) == expected


def test_nearest_ignores_case_and_dashes_and_makes_no_wild_guess() -> None:
    assert nearest("Outcome", p.FACETS) == " (did you mean 'outcome'?)"
    assert nearest("hard-constraint", p.FACETS) == " (did you mean 'hard_constraint'?)"
    assert nearest("Note", p.FACETS) == ""
