"""Doctor's output shapes and synthetic inputs agree with Codex's published hook schemas."""

from __future__ import annotations

import json

import pytest

from loopstate.install.hosts import CLAUDE, CODEX
from loopstate.install.probe import synthetic_input
from loopstate.install.shapes import CLAUDE as CLAUDE_SHAPES
from loopstate.install.shapes import output_problem
from tests.conftest import CONFORMANCE, needs_conformance

SCHEMAS = CONFORMANCE / "codex-hooks"
FILE_OF = {"SessionStart": "session-start", "UserPromptSubmit": "user-prompt-submit", "PreToolUse": "pre-tool-use",
           "PreCompact": "pre-compact", "PostCompact": "post-compact", "Stop": "stop"}


def candidates(event: str) -> list[dict]:
    """Outputs a hook might write: right, wrong in one field, or carrying a field the event does not take."""
    return [
        {}, {"continue": True}, {"continue": "yes"}, {"continue": True, "suppressOutput": False},
        {"systemMessage": "fix it"}, {"systemMessage": None}, {"stopReason": None}, {"stopReason": "done"},
        {"bogus": 1}, {"continue": None},
        {"decision": "block", "reason": "open gate"}, {"decision": "block"}, {"decision": "block", "reason": "  "},
        {"decision": None}, {"decision": "approve", "reason": "x"}, {"reason": "x"},
        {"hookSpecificOutput": None},
        {"hookSpecificOutput": {"hookEventName": event}},
        {"hookSpecificOutput": {"hookEventName": event, "additionalContext": "intent: 2 claims"}},
        {"hookSpecificOutput": {"hookEventName": event, "additionalContext": None}},
        {"hookSpecificOutput": {"hookEventName": event, "extra": 1}},
        {"hookSpecificOutput": {"additionalContext": "no event name"}},
        {"hookSpecificOutput": {"hookEventName": event, "permissionDecision": "deny",
                                "permissionDecisionReason": "STOP file: remove it"}},
        {"hookSpecificOutput": {"hookEventName": event, "permissionDecision": "never"}},
        {"hookSpecificOutput": {"hookEventName": event, "env": {"A": "b"}}},
        {"hookSpecificOutput": {"hookEventName": event, "env": {"A": 1}}},
    ]


@needs_conformance
@pytest.mark.parametrize("event", sorted(FILE_OF))
def test_codex_shapes_accept_exactly_what_the_output_schema_accepts(event):
    import jsonschema

    schema = json.loads((SCHEMAS / f"{FILE_OF[event]}.command.output.schema.json").read_text())
    validator = jsonschema.Draft7Validator(schema)
    for output in candidates(event):
        by_schema = validator.is_valid(output)
        by_us = output_problem("codex", event, json.dumps(output).encode()) is None
        assert by_us == by_schema, (output, by_schema, output_problem("codex", event, json.dumps(output).encode()))


@needs_conformance
@pytest.mark.parametrize("event", sorted(set(FILE_OF) - {"SessionStart"}))
def test_each_codex_probe_input_validates_against_its_input_schema(event, tmp_path):
    import jsonschema

    schema = json.loads((SCHEMAS / f"{FILE_OF[event]}.command.input.schema.json").read_text())
    jsonschema.validate(synthetic_input(CODEX, event, str(tmp_path)), schema)


def test_a_probe_input_exists_for_every_event_we_register(tmp_path):
    for host in (CLAUDE, CODEX):
        for event in host.events:
            data = synthetic_input(host, event, str(tmp_path))
            assert data["hook_event_name"] == event and data["cwd"] == str(tmp_path)
    assert set(CLAUDE_SHAPES) == set(CLAUDE.events)


@pytest.mark.parametrize("host,event,output,words", [
    ("claude", "PreToolUse", {"hookSpecificOutput": {"hookEventName": "Stop"}}, "not 'PreToolUse'"),
    ("claude", "Stop", {"decision": "block", "reason": ""}, "reason is missing or blank"),
    ("claude", "SessionStart", {"systemMessage": "x" * 10_001}, "Expected `str` of length <= 10000"),
    ("codex", "PreToolUse", {"hookSpecificOutput": {"hookEventName": "Stop"}}, "not 'PreToolUse'"),
    ("claude", "SessionEnd", {"continue": True, "hookSpecificOutput": {"hookEventName": "SessionEnd"}},
     "unknown field"),
])
def test_output_problems_name_what_is_wrong(host, event, output, words):
    assert words in output_problem(host, event, json.dumps(output).encode())


def test_empty_output_is_no_decision_and_accepted():
    assert output_problem("claude", "Stop", b"") is None and output_problem("codex", "Stop", b"\n") is None
