"""Typos and half-given options through the real CLI: refused with a suggestion, nothing written,
nothing the user gave silently dropped; and messages that name the CLI's own verbs."""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
from pathlib import Path

import pytest
from intentkit import ledger_events
from tests.conftest import store_env

LOOPSTATE = Path(sys.executable).parent / "loopstate"


def cli(root: Path, data_dir: Path, *args: str, expect: int = 0) -> subprocess.CompletedProcess:
    env = {"LOOPSTATE_DATA_DIR": str(data_dir), "PATH": "/usr/bin:/bin", **store_env()}
    done = subprocess.run([str(LOOPSTATE), "intent", *args, "--root", str(root)], capture_output=True, text=True,
                          env=env, timeout=60)
    assert done.returncode == expect, (done.returncode, done.stdout, done.stderr)
    return done


def _start(root: Path, data_dir: Path, *claims: str) -> dict:
    args = [arg for text in claims for arg in ("--claim", text)]
    return json.loads(cli(root, data_dir, "start", *args, "--json").stdout)


@pytest.mark.parametrize(("text", "suggested"), [
    ("hard_contraint:Keep API", "hard_constraint"),
    ("Outcome:Ship", "outcome"),
    ("hard-constraint:Keep API", "hard_constraint"),
    ("HARD_CONSTRAINT:Keep API", "hard_constraint"),
    ("sucess_signal:tests pass", "success_signal"),
])
def test_a_facet_prefix_that_is_not_a_facet_is_refused_with_the_nearest_and_writes_nothing(
        root, data_dir, text, suggested) -> None:
    refused = cli(root, data_dir, "start", "--claim", "outcome:fine", "--claim", text, expect=1)
    assert "VALIDATION_FAILED" in refused.stderr and f"did you mean {suggested!r}?" in refused.stderr
    assert f"--claim 'outcome:{text}'" in refused.stderr, "the message says how to keep the text as an outcome"
    assert not data_dir.exists(), "refused by validation alone: not even the store was created"
    error = json.loads(cli(root, data_dir, "start", "--claim", text, "--json", expect=1).stdout)["error"]
    assert error["code"] == "VALIDATION_FAILED" and error["details"]["field"] == "facets"


def test_a_prefix_far_from_every_facet_is_refused_without_a_guess(root, data_dir) -> None:
    refused = cli(root, data_dir, "start", "--claim", "Note:keep it short", expect=1)
    assert "'Note' is not a facet; use outcome" in refused.stderr and "did you mean" not in refused.stderr


@pytest.mark.parametrize(("text", "facet", "statement"), [
    ("Fix bug: the parser", "outcome", "Fix bug: the parser"),  # a phrase before the colon, not a word
    ("Ship it", "outcome", "Ship it"),
    ("see https ://example", "outcome", "see https ://example"),
    ("hard_constraint:Keep the API", "hard_constraint", "Keep the API"),
    ("hard_constraint: Keep the API", "hard_constraint", "Keep the API"),
    ("outcome:Note: keep it short", "outcome", "Note: keep it short"),
    ("unknown:Which database?", "unknown", "Which database?"),
])
def test_claims_without_a_facet_word_are_outcomes_and_a_facet_word_names_the_facet(
        root, data_dir, text, facet, statement) -> None:
    claim = _start(root, data_dir, text)["events"][0]["payload"]["initial_claims"][0]
    assert (claim["facets"], claim["statement"]) == ([facet], statement)


VERBS_WITH_SOURCES = [
    ("add", "{task}", "Keep it fast"),
    ("replace", "{task}", "Keep it faster", "--supersedes", "{claim}"),
    ("candidate", "{task}", "Prefers tabs", "--actor", "user"),
    ("signal", "{task}", "success", "--note", "it works", "--actor", "user"),
]


@pytest.mark.parametrize("verb", VERBS_WITH_SOURCES, ids=[v[0] for v in VERBS_WITH_SOURCES])
@pytest.mark.parametrize("given", [("--source-id", "H1"), ("--excerpt", "the user said so"),
                                   ("--source-id", "H1", "--excerpt", "the user said so"),
                                   ("--source-kind", "user_event")])
def test_half_a_source_is_refused_not_dropped(root, data_dir, verb, given) -> None:
    started = _start(root, data_dir, "Keep it fast")
    task = started["events"][0]["task_id"]
    claim = started["events"][0]["payload"]["initial_claims"][0]["claim_id"]
    args = [a.format(task=task, claim=claim) for a in verb]
    refused = cli(root, data_dir, *args, *given, expect=1)
    assert "INVALID_PARAMS" in refused.stderr and "needs --source" in refused.stderr
    assert "user_event, agent_turn, tool_result, external_evidence" in refused.stderr
    assert "may cite user_event" in refused.stderr
    assert len(ledger_events(data_dir)) == 1, "nothing was written"
    completed = [*given]
    if "--source-kind" not in given:
        completed += ["--source-kind", "user_event"]
    if "--source-id" not in given:
        completed += ["--source-id", "H1"]
    kept = json.loads(cli(root, data_dir, *args, *completed, "--json").stdout)["events"][0]
    stored = json.dumps(kept)
    assert '"event_id": "H1"' in stored and '"kind": "user_event"' in stored, "the provenance the user gave is kept"
    if "--excerpt" in given:
        assert "the user said so" in stored


def test_refusals_name_the_cli_verb_and_the_wire_method(root, data_dir) -> None:
    missing = cli(root, data_dir, "add", "6c9a7c2e-4f7e-4c1e-9d7e-2b1f0c3a4d5e", "x", expect=1)
    assert "start it with `loopstate intent start` (intent.task_start)" in missing.stderr
    task = _start(root, data_dir, "Keep it fast")["events"][0]["task_id"]
    unknown_claim = cli(root, data_dir, "confirm", task, "6c9a7c2e-4f7e-4c1e-9d7e-2b1f0c3a4d5e", expect=1)
    assert "`loopstate intent show` (intent.snapshot) or `loopstate intent audit` (intent.audit)" in unknown_claim.stderr


@pytest.mark.parametrize(("actor", "kind", "expected"), [
    ("user", "tool_result", "a 'user' actor cannot cite a 'tool_result' source"),
    ("agent", "user_event", "an 'agent' actor cannot cite a 'user_event' source"),
    ("evidence", "agent_turn", "an 'evidence' actor cannot cite an 'agent_turn' source"),
])
def test_refusals_use_the_right_article(root, data_dir, actor, kind, expected) -> None:
    task = _start(root, data_dir, "Keep it fast")["events"][0]["task_id"]
    status = {"user": "explicit", "agent": "inferred", "evidence": "evidence"}[actor]
    confidence = ["--confidence", "0.5"] if status == "inferred" else []
    refused = cli(root, data_dir, "add", task, "claimed", "--actor", actor, "--status", status, *confidence,
                  "--source-kind", kind, "--source-id", "H1", expect=1)
    assert expected in refused.stderr


def _help_texts() -> dict[str, str]:
    """The --help of every intent and goals verb, and the top-level lines that describe them."""
    from loopstate.cli.main import build_parser

    texts = {}

    def walk(parser, name: str) -> None:
        texts[name] = parser.format_help()
        for action in parser._actions:
            if isinstance(action, argparse._SubParsersAction):
                for verb, child in action.choices.items():
                    walk(child, f"{name} {verb}")

    walk(build_parser(), "loopstate")
    top = texts.pop("loopstate")
    texts = {name: text for name, text in texts.items() if name.split()[1] in ("intent", "goals")}
    texts["loopstate (intent, goals lines)"] = "\n".join(
        line for line in top.splitlines() if line.strip().startswith(("intent ", "goals ")))
    return texts


def test_intent_and_goals_help_speaks_the_cli_not_the_seeds_or_rst() -> None:
    texts = _help_texts()
    assert "loopstate intent start" in texts and "loopstate goals add" in texts
    for name, text in texts.items():
        flat = " ".join(text.split())
        assert "seed" not in flat.lower(), (name, flat)
        assert "``" not in flat, (name, flat)
        assert " an 'u" not in flat and " an \"u" not in flat, (name, flat)
    assert "outcome:Note:" in " ".join(texts["loopstate intent start"].split())
    assert "--new-goal" in texts["loopstate goals add"]


def test_the_help_a_user_sees_documents_the_claim_syntax() -> None:
    shown = subprocess.run([str(LOOPSTATE), "intent", "start", "--help"], capture_output=True, text=True, timeout=60)
    flat = " ".join(shown.stdout.split())
    assert shown.returncode == 0 and "names its facet and must be one" in flat and "'Fix bug: the parser' is one" in flat
