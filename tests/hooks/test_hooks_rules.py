"""The pure rules of a hook (domains/harness.py, domains/intent/prompt_commands.py), as tables of plain values."""

from __future__ import annotations

import pytest

from loopstate.domains import harness as h
from loopstate.domains.intent.prompt_commands import PromptCommand, parse

pytestmark = pytest.mark.both_stores  # docs/storage.md, *Which tests run on PostgreSQL*

RUN = "11111111-1111-4111-8111-111111111111"


def run(**fields) -> h.RunFacts:
    return h.RunFacts(**{"run_id": RUN, "status": "active", "lease_expired": False, "usage": "1/100 mutations",
                         **fields})


@pytest.mark.parametrize(("tool", "facts", "denied_because"), [
    ("Bash", h.Facts(), None),
    ("Bash", h.Facts(run=run()), None),
    ("Bash", h.Facts(kill_switch=".loopstate/STOP"), "the kill switch .loopstate/STOP stands"),
    ("Read", h.Facts(kill_switch=".loopstate/STOP"), None),
    ("Grep", h.Facts(run=run(status="halted_kill_switch")), None),
    ("Edit", h.Facts(run=run(status="halted_kill_switch")), "is halted_kill_switch, not active"),
    ("apply_patch", h.Facts(run=run(lease_expired=True)), "the lease of run"),
    ("Bash", h.Facts(run=run(exhausted=("max_mutations",))), "exhausted its budget (max_mutations)"),
    ("Bash", h.Facts(run=run(found=False, status=None)), "which this project does not have"),
    ("Bash", h.Facts(kill_switch="STOP", run=run(status="ready")), "the kill switch STOP stands"),
])
def test_tool_denials(tool: str, facts: h.Facts, denied_because: str | None) -> None:
    reason = h.tool_denial(tool, facts)
    if denied_because is None:
        assert reason is None
    else:
        assert denied_because in reason and ("Remove" in reason or "loopstate run" in reason)


GATE = h.Gate(goal_id="ship", gate_id="G001", title="Owner sign-off")


@pytest.mark.parametrize(("facts", "enforce", "active", "blocked_by"), [
    (h.Facts(gates=(GATE,)), False, False, None),
    (h.Facts(gates=(GATE,)), True, True, None),
    (h.Facts(gates=(GATE,)), True, False, "gate G001 of goal ship (Owner sign-off)"),
    (h.Facts(run=run(open_blocking_issues=2)), True, False, f"2 open blocking issue(s) on run {RUN}"),
    (h.Facts(run=run()), True, False, None),
])
def test_stop_blocks(facts: h.Facts, enforce: bool, active: bool, blocked_by: str | None) -> None:
    reason = h.stop_block(facts, enforce_gates=enforce, stop_hook_active=active)
    assert (reason is None) if blocked_by is None else (blocked_by in reason)


def test_status_lines_come_in_a_fixed_order_and_compose_within_the_cap() -> None:
    facts = h.Facts(kill_switch="STOP", run=run(open_blocking_issues=1, exhausted=("max_mutations",)),
                    gates=(GATE,), faults=("goal x (CORRUPT_LEDGER)",))
    lines = h.status_lines(facts)
    assert [line.split(" ", 1)[0] for line in lines] == ["Kill", "Run", "Open", "Unresolved", "loopstate"]
    assert lines[1] == f"Run {RUN}: active, lease live; used 1/100 mutations; budget exhausted: max_mutations."
    text = "User-stated intent (verbatim claims from the user's own messages):\n- [outcome] Ship it"
    assert h.compose(text, lines, 1800) == "\n".join([*lines, text])
    assert h.compose(text, lines, 1800) == h.compose(text, list(lines), 1800)  # deterministic
    small = h.compose(text, lines, 120)
    assert len(small) <= 120 and small.startswith("Kill switch")
    assert h.intent_budget(lines, 1800) == 1800 - sum(len(line) + 1 for line in lines)
    assert h.omitted_line({"inferred": 2, "evidence": 0, "disputed": 1}, 1) == \
        "Also recorded, not shown: disputed 1, inferred 2, open disputes 1."
    assert h.omitted_line({}, 0) is None


@pytest.mark.parametrize(("prompt", "parsed"), [
    ("fix the bug", None),
    ("/intentional change", None),
    ("please /intent remember x", None),
    ("/intent remember Keep the API", PromptCommand("remember", "Keep the API")),
    ("  /intent  remember   hard_constraint:Keep it \n", PromptCommand("remember", "hard_constraint:Keep it")),
    ("/intent remember --project Keep the API", PromptCommand("remember", "Keep the API", project=True)),
    ("/intent remember --projects x", PromptCommand("remember", "--projects x")),
    ("/intent start", PromptCommand("start")),
    ("/intent start checkout refactor", PromptCommand("start", "checkout refactor")),
    ("/intent show", PromptCommand("show")),
    ("/intent forget 1234abcd", PromptCommand("forget", "1234abcd")),
    ("/intent off", PromptCommand("off")),
    ("/intent on", PromptCommand("on")),
    ("/intent private", PromptCommand("private")),
])
def test_intent_commands_parse(prompt: str, parsed: PromptCommand | None) -> None:
    assert parse(prompt) == parsed


@pytest.mark.parametrize(("prompt", "problem"), [
    ("/intent", "/intent needs a verb"),
    ("/intent remeber x", "not a verb (did you mean 'remember'?)"),
    ("/intent remember", "needs the text to remember"),
    ("/intent remember --project", "needs the text to remember"),
    ("/intent forget", "needs a claim id"),
    ("/intent show everything", "/intent show takes nothing after it"),
])
def test_malformed_intent_commands_say_what_is_wrong(prompt: str, problem: str) -> None:
    assert problem in parse(prompt).problem


def test_the_terminal_run_statuses_are_the_runs_machines() -> None:
    from loopstate.domains.runs.machine import TERMINAL

    assert h.TERMINAL == TERMINAL
