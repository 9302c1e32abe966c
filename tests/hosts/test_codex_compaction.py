"""A compaction in a real `codex exec` session, and the user's words re-injected after it.

codex exec compacts when a turn's usage passes ``model_auto_compact_token_limit`` (the model server reports a
large usage): Codex runs PreCompact, asks the model for a handoff summary, runs PostCompact, then SessionStart
again, whose context loopstate answers; the request after the compaction carries the user's claims again.
The control: the same session with the hooks untrusted (Codex runs none) carries them nowhere after it.
"""

from __future__ import annotations

import re

import pytest
from codex_kit import codex_kit, shell
from conftest import needs_codex
from dialect_openai import Usage, input_texts
from modelserver import Text

pytestmark = needs_codex

CLAIM = "Keep the public API"
COMPACTING = [[shell("true", "call_true"), Usage(50_000)], [Text("SUMMARY")], [Text("after the compaction")]]


@pytest.mark.slow
@pytest.mark.parametrize("trusted", [True, False], ids=["hooks", "control-untrusted"])
def test_after_a_compaction_the_next_request_carries_the_user_s_claims_again(tmp_path, trusted):
    with codex_kit(tmp_path) as kit:
        kit.config.write_text("model_auto_compact_token_limit = 1000\n" + kit.config.read_text())
        kit.setup("--trust-hooks")
        kit.exec(f"/intent remember {CLAIM}")
        if not trusted:
            kit.config.write_text(re.sub(r'\[hooks\.state\."[^"]*"\]\ntrusted_hash = "[^"]*"\n+', "",
                                         kit.config.read_text()))
        kit.server.then(COMPACTING)
        session = kit.exec("work on it")
        assert session.returncode == 0 and "after the compaction" in session.stdout
        *_, summarize, after = kit.server.model_requests()
        assert any("CONTEXT CHECKPOINT COMPACTION" in t for t in input_texts(summarize.body))
        carried = any(CLAIM in t for t in input_texts(after.body))
        if trusted:
            assert ("PreCompact", "Completed") in session.hooks and ("PostCompact", "Completed") in session.hooks
            assert carried
            [ledger] = kit.data_dir.rglob("intent.jsonl")
            assert b'"compaction_observed"' in ledger.read_bytes()
        else:
            assert session.hooks == [] and not carried
