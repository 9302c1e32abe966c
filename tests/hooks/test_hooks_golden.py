"""Golden answers per host and event: the exact JSON each host gets, for inputs in each host's own shape.

Codex inputs validate against Codex's input schemas and every Codex output
against its output schema (hookkit.hook checks both); Claude outputs against
HOSTS.md's shapes. The store is real and so is every process.
"""

from __future__ import annotations

from pathlib import Path

import pytest
from hookkit import context_of, denial_of, grep_data, hook, host_input, loopstate, receipt_of

from tests.conftest import needs_conformance

HOSTS = [pytest.param("claude", id="claude"), pytest.param("codex", id="codex", marks=needs_conformance)]
HEADER = "User-stated intent (verbatim claims from the user's own messages):"


@pytest.fixture
def project(tmp_path: Path) -> Path:
    path = tmp_path / "proj"
    (path / ".git").mkdir(parents=True)
    return path


@pytest.mark.slow
@pytest.mark.parametrize("host", HOSTS)
def test_each_event_answers_exactly_what_the_host_accepts(host: str, project: Path, data_dir: Path) -> None:
    def call(event: str, **fields):
        return hook(host, event, host_input(host, event, project, "sess-1", **fields), data_dir=data_dir, cwd=project)

    assert call("SessionStart") == {"continue": True}  # nothing recorded yet: nothing to inject
    remembered = call("UserPromptSubmit", prompt="/intent remember hard_constraint:Keep the public API")
    assert set(remembered) == ({"continue", "hookSpecificOutput"} if host == "claude" else
                               {"continue", "decision", "reason"})
    assert receipt_of(host, remembered).startswith("loopstate: remembered [hard_constraint] Keep the public API (claim ")
    injected = call("UserPromptSubmit", prompt="now refactor the checkout")
    assert injected == {"continue": True, "hookSpecificOutput": {
        "hookEventName": "UserPromptSubmit", "additionalContext": f"{HEADER}\n- [hard_constraint] Keep the public API"}}
    assert call("UserPromptSubmit", prompt="and the tests") == {"continue": True}  # unchanged: not injected again
    assert call("PreToolUse") == {"continue": True}  # no decision: the tool runs
    assert call("PostToolUse") == {"continue": True}
    assert call("PreCompact") == {"continue": True}
    assert call("PostCompact") == {"continue": True}
    again = call("UserPromptSubmit", prompt="go on")  # after a compaction: injected again
    assert context_of(again) == f"{HEADER}\n- [hard_constraint] Keep the public API"
    assert call("Stop") == {"continue": True}  # gate enforcement is off by default
    assert call("SessionEnd") == {"continue": True}
    for source in ("resume", "clear", "compact", "startup"):  # every SessionStart injects the current task's claims
        start = call("SessionStart", source=source)
        assert start == {"continue": True, "hookSpecificOutput": {
            "hookEventName": "SessionStart", "additionalContext": f"{HEADER}\n- [hard_constraint] Keep the public API"}}
    started = call("UserPromptSubmit", prompt="/intent start next feature")  # only the user starts a new task
    assert receipt_of(host, started).startswith("loopstate: started task ")
    assert call("SessionStart", source="clear") == {"continue": True}  # the new task has nothing to inject yet

    (project / ".loopstate").mkdir()
    (project / ".loopstate" / "STOP").write_text("stop")
    denied = call("PreToolUse")
    assert set(denied) == {"continue", "hookSpecificOutput"}
    assert denial_of(denied).startswith("loopstate: the kill switch .loopstate/STOP stands")
    assert "Remove .loopstate/STOP" in denial_of(denied)
    start = call("SessionStart", source="startup")
    assert context_of(start) == "Kill switch: .loopstate/STOP stands; tools that change things are denied."


@pytest.mark.parametrize("host", HOSTS)
def test_stop_blocks_on_an_open_gate_only_with_enforcement_on(host: str, project: Path, data_dir: Path) -> None:
    loopstate("goals", "gate", "ship", "Approve the migration", "--kind", "owner", "--new-goal", cwd=project,
              data_dir=data_dir)
    (project / ".loopstate").mkdir(exist_ok=True)

    def stop(**fields):
        return hook(host, "Stop", host_input(host, "Stop", project, "sess-2", **fields), data_dir=data_dir,
                    cwd=project, env={"LOOPSTATE_GOAL": "ship"})

    assert stop() == {"continue": True}
    (project / ".loopstate" / "hooks.json").write_text('{"enforce_gates": true}')
    blocked = stop()
    assert blocked["decision"] == "block" and "gate G001 of goal ship (Approve the migration)" in blocked["reason"]
    assert stop(stop_hook_active=True) == {"continue": True}  # never twice in one turn


@pytest.mark.slow
@pytest.mark.parametrize("host", HOSTS)
def test_intent_commands_answer_with_a_receipt_and_keep_the_prompt_from_the_model(host: str, project: Path,
                                                                                  data_dir: Path) -> None:
    def prompt(text: str, **fields):
        out = hook(host, "UserPromptSubmit", host_input(host, "UserPromptSubmit", project, "sess-3", prompt=text,
                                                        **fields), data_dir=data_dir, cwd=project)
        return receipt_of(host, out)

    assert prompt("/intent remember Fix bug: the parser").startswith("loopstate: remembered [outcome] Fix bug: the parser")
    assert "not a facet" in prompt("/intent remember hard_contraint:Keep it", turn_id="turn-2")
    shown = prompt("/intent show", turn_id="turn-3")
    assert "- [outcome] Fix bug: the parser (" in shown
    claim = shown.rsplit("(", 1)[1][:8]
    assert prompt(f"/intent forget {claim}", turn_id="turn-4").startswith(f"loopstate: forgot claim {claim}")
    assert "no claims of yours" in prompt("/intent show", turn_id="turn-5")
    assert "not a verb (did you mean 'remember'?)" in prompt("/intent remeber x", turn_id="turn-6")
    assert prompt("/intent off", turn_id="turn-7").startswith("loopstate: intent is off")
    assert "not recorded" in prompt("/intent remember Keep it", turn_id="turn-8")
    assert prompt("/intent on", turn_id="turn-9").startswith("loopstate: intent is on")
    assert prompt("/intent private", turn_id="turn-10").startswith("loopstate: this session is private")
    assert "nothing was recorded" in prompt("/intent remember Secret plan", turn_id="turn-11")
    assert hook(host, "SessionStart", host_input(host, "SessionStart", project, "sess-3", source="resume"),
                data_dir=data_dir, cwd=project) == {"continue": True}  # a private task injects nothing
    assert prompt("/intent on", turn_id="turn-12").startswith("loopstate: intent is on")
    assert grep_data(data_dir, b"Secret plan") == []


def test_the_context_keeps_to_its_cap_by_dropping_whole_claims(project: Path, data_dir: Path) -> None:
    (project / ".loopstate").mkdir()
    (project / ".loopstate" / "hooks.json").write_text('{"context_max_chars": 200}')

    def prompt(text: str):
        return hook("claude", "UserPromptSubmit", host_input("claude", "UserPromptSubmit", project, "s-cap",
                                                             prompt=text), data_dir=data_dir, cwd=project)

    for n in range(4):
        prompt(f"/intent remember Rule number {n} of the project, said once and kept")
    text = context_of(prompt("go"))
    assert len(text) <= 200
    assert text.splitlines()[0] == "Also recorded, not shown: over_budget 3."
    assert text.splitlines()[-1] == "- [outcome] Rule number 0 of the project, said once and kept"


def test_an_invalid_hooks_config_keeps_the_defaults_and_says_so(project: Path, data_dir: Path) -> None:
    (project / ".loopstate").mkdir()
    (project / ".loopstate" / "hooks.json").write_text('{"enforce_gate": true}')
    out = hook("claude", "Stop", host_input("claude", "Stop", project, "s-bad"), data_dir=data_dir, cwd=project)
    assert set(out) == {"continue", "systemMessage"}
    assert "hooks.json: give an object with only enforce_gates, context_max_chars, goal" in out["systemMessage"]
