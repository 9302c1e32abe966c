"""docs/goals.md keeps up with the code: every event type, command, query and CLI verb."""

from __future__ import annotations

import argparse
from pathlib import Path

from loopstate_protocol import goals as g

from loopstate.cli import goals as cli
from loopstate.domains.goals.events import EVENT_TYPES

DOC = (Path(__file__).resolve().parents[2] / "docs" / "goals.md").read_text()


def test_the_doc_describes_every_event_type_command_and_query() -> None:
    for event_type in EVENT_TYPES:
        assert f"`{event_type}`" in DOC, event_type
    for message in (*g.COMMANDS, *g.QUERIES):
        assert f"`{message.__struct_config__.tag}`" in DOC, message


def test_the_doc_shows_every_cli_verb() -> None:
    parser = argparse.ArgumentParser()
    cli.register(parser.add_subparsers())
    goals = parser._subparsers._group_actions[0].choices["goals"]
    verbs = goals._subparsers._group_actions[0].choices
    for verb in verbs:
        assert f"loopstate goals {verb}" in DOC, verb
