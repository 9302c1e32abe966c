"""What the user said on the command line reaches a brand-new agent session, in both real hosts.

`loopstate intent start --claim ...` in a terminal, then a `claude -p` and a
`codex exec` session the user starts afterwards: the host's first model request
carries the claim (the session binds to the project's current task). The
control in each: a session before the start, in the same home, does not.
"""

from __future__ import annotations

import pytest

from claude_kit import ClaudeHome
from codex_kit import codex_kit
from dialect_openai import input_texts
from modelserver import Text

from tests.hosts.conftest import needs_claude, needs_codex

CLAIM = "Keep the wire format of the export unchanged"


@pytest.mark.slow
@needs_claude
def test_a_claim_from_intent_start_is_in_a_new_claude_sessions_first_request(tmp_path) -> None:
    claude = ClaudeHome(tmp_path)
    claude.loopstate("setup", "apply", "--host", "claude")
    before = claude.session("hello", [[Text("hi")]])
    assert CLAIM not in before.sent(0)  # the control
    claude.loopstate("intent", "start", "--label", "export", "--claim", f"hard_constraint:{CLAIM}")
    after = claude.session("go on with the export", [[Text("ok")]])
    assert after.session_id != before.session_id
    assert CLAIM in after.sent(0)


@pytest.mark.slow
@needs_codex
def test_a_claim_from_intent_start_is_in_a_new_codex_sessions_first_request(tmp_path) -> None:
    with codex_kit(tmp_path, [[Text("hi")]]) as kit:
        kit.setup("--trust-hooks")
        kit.exec("hello")
        assert not any(CLAIM in t for t in input_texts(kit.server.model_requests()[0].body))  # the control
        kit.loopstate("intent", "start", "--label", "export", "--claim", f"hard_constraint:{CLAIM}")
        kit.server.then([[Text("ok")]])
        first = len(kit.server.model_requests())
        assert kit.exec("go on with the export").returncode == 0
        assert any(CLAIM in t for t in input_texts(kit.server.model_requests()[first].body))
