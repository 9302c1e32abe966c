"""A corrupt store in a real `codex exec` session: the hooks fail open, the session goes on, and the fault
reaches the person once per session through the one channel exec has (the agent: exec shows no hook's
systemMessage or stderr), while a STOP still denies.
"""

from __future__ import annotations

import pytest

from codex_kit import codex_kit, shell
from conftest import needs_codex
from dialect_openai import input_texts, tool_outputs
from modelserver import Text

pytestmark = needs_codex


def fault_texts(kit) -> list[str]:
    """The fault texts of the last request (which carries the whole session's input so far)."""
    return [t for t in input_texts(kit.server.model_requests()[-1].body) if "CORRUPT_LEDGER" in t]


@pytest.mark.slow
def test_a_corrupt_ledger_fails_open_and_is_told_once(tmp_path):
    with codex_kit(tmp_path, [[Text("fine")]]) as kit:
        kit.setup("--trust-hooks")
        kit.exec("/intent remember Keep the API")
        control = kit.exec("hello")
        assert control.returncode == 0 and fault_texts(kit) == []  # the control: a sound store says nothing

        [ledger] = kit.data_dir.rglob("intent.jsonl")
        ledger.write_bytes(ledger.read_bytes().replace(b"Keep the API", b"Keep the APX"))
        kit.server.then([[shell("touch side-effect", "call_touch")], [Text("the store is damaged")]])
        session = kit.exec("hello again")
        assert session.returncode == 0 and "the store is damaged" in session.stdout  # the session went on
        assert ("SessionStart", "Completed") in session.hooks and ("UserPromptSubmit", "Completed") in session.hooks
        [told] = fault_texts(kit)  # once, though SessionStart and UserPromptSubmit both met it
        assert "loopstate verify" in told and "Tell the user" in told
        assert (kit.project / "side-effect").exists()  # failing open: no switch, so the tool ran

        (kit.project / "side-effect").unlink()
        (kit.project / ".loopstate").mkdir(exist_ok=True)
        (kit.project / ".loopstate" / "STOP").touch()
        kit.server.then([[shell("touch side-effect", "call_touch")], [Text("stopped")]])
        kit.exec("once more")
        assert not (kit.project / "side-effect").exists()  # a STOP holds through the fault
        assert "kill switch" in tool_outputs(kit.server.model_requests()[-1].body)["call_touch"]
