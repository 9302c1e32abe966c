"""The user's words and the gates in real `codex exec` sessions: `/intent remember`, then a new session that
sees it; a Stop blocked by an open gate (and the control: the same session without enforcement ends).

What `codex exec` 0.171 shows of a hook: only its stderr lines ``hook: EVENT Completed|Blocked|Failed``; no
block reason, systemMessage or hook stderr reaches its stdout or stderr (docs/hooks.md, "Codex").
"""

from __future__ import annotations

import json

import pytest

from codex_kit import codex_kit
from conftest import needs_codex
from dialect_openai import input_texts
from modelserver import Text

pytestmark = needs_codex

CONSTRAINT = "Keep the public API unchanged"


def sent(kit, index: int = -1) -> list[str]:
    return input_texts(kit.server.model_requests()[index].body)


@pytest.mark.slow
def test_intent_remember_in_exec_is_recorded_and_a_new_session_sees_it(tmp_path):
    with codex_kit(tmp_path, [[Text("first answer")]]) as kit:
        kit.setup("--trust-hooks")
        before = kit.exec("start working")
        assert before.ran("SessionStart") and not any(CONSTRAINT in t for t in sent(kit))  # the control

        remember = kit.exec(f"/intent remember hard_constraint:{CONSTRAINT}")
        assert ("UserPromptSubmit", "Blocked") in remember.hooks
        assert len(kit.server.model_requests()) == 1  # the command never reached the model
        assert remember.stdout.strip() == ""  # and exec shows the user nothing of the receipt
        claims = json.loads(kit.loopstate("intent", "audit", "--json").stdout)["claims"]
        assert [(c["statement"], c["role"], c["epistemic_status"]) for c in claims] == [
            (CONSTRAINT, "user", "explicit")]

        kit.server.then([[Text("second answer")]])
        after = kit.exec("go on")
        assert after.returncode == 0
        assert any(CONSTRAINT in t for t in sent(kit))  # a new session is told the user's own words


def gate_enforced(kit, on: bool) -> None:
    kit.loopstate("goals", "gate", "ship", "Owner signs off the API diff", "--kind", "owner", "--new-goal")
    (kit.project / ".loopstate").mkdir(exist_ok=True)
    (kit.project / ".loopstate" / "hooks.json").write_text(json.dumps({"enforce_gates": on, "goal": "ship"}))


@pytest.mark.slow
def test_an_open_gate_blocks_the_stop_and_codex_goes_on_with_the_reason(tmp_path):
    with codex_kit(tmp_path, [[Text("all done")], [Text("waiting for the sign-off")]]) as kit:
        kit.setup("--trust-hooks")
        gate_enforced(kit, True)
        session = kit.exec("finish the release")
        assert ("Stop", "Blocked") in session.hooks
        requests = kit.server.model_requests()
        assert len(requests) == 2  # Codex sent the block reason back to the model, which then stopped
        assert any("not done yet: gate G001 of goal ship" in t for t in sent(kit, 1))
        assert ("Stop", "Completed") in session.hooks  # stop_hook_active: the second Stop passes


@pytest.mark.slow
def test_without_enforcement_the_same_stop_ends_the_turn(tmp_path):
    with codex_kit(tmp_path, [[Text("all done")], [Text("waiting for the sign-off")]]) as kit:
        kit.setup("--trust-hooks")
        gate_enforced(kit, False)
        session = kit.exec("finish the release")
        assert ("Stop", "Completed") in session.hooks and ("Stop", "Blocked") not in session.hooks
        assert len(kit.server.model_requests()) == 1
