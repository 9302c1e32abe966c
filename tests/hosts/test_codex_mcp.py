"""loopstate's MCP tools in a real `codex exec` session: there on the first turn, on the hooks' store.

Codex 0.171 starts MCP servers in the background and leaves a server still starting out of the turn; setup's
entry is ``required`` so Codex waits for it. Codex gives a server only HOME and PATH; setup's entry passes the
store's variables on by name, so `loopstate mcp` opens the store the hooks and the CLI open, whatever
CODEX_HOME or LOOPSTATE_DATA_DIR say. The control: the entry an older setup wrote (no ``env_vars``) puts the
same write in another store.
"""

from __future__ import annotations

import json

import pytest
from codex_kit import codex_kit
from conftest import needs_codex
from dialect_openai import NamespacedCall, ToolSearch, input_texts, tool_outputs
from modelserver import Text

pytestmark = needs_codex

NS = "mcp__loopstate"
STATEMENT = "ship the parser before the release"
FIRST_TURN = [
    [ToolSearch("loopstate intent", "call_search")],
    [NamespacedCall(NS, "intent_task", {"action": "start", "label": "mcp first turn"}, "call_task")],
    [NamespacedCall(NS, "intent_claim", {"action": "add", "by": "agent", "status": "inferred", "confidence": 0.5,
                                         "facets": ["outcome"], "statement": STATEMENT,
                                         "source": {"kind": "agent_turn", "text": "the agent's reading"}},
                    "call_claim")],
    [NamespacedCall(NS, "intent_show", {}, "call_show")],
    [Text("done")],
]


def statements(kit) -> list[str]:
    """Every claim statement the CLI's audit lists for the project (any task, any status)."""
    return [c["statement"] for c in json.loads(kit.loopstate("intent", "audit", "--json").stdout)["claims"]]


@pytest.mark.slow
@pytest.mark.parametrize("data_dir", [False, True], ids=["codex-home", "loopstate-data-dir"])
def test_a_first_turn_writes_and_reads_the_hooks_store_through_mcp(tmp_path, data_dir):
    with codex_kit(tmp_path, FIRST_TURN) as kit:
        if data_dir:
            kit.extra_env["LOOPSTATE_DATA_DIR"] = str(tmp_path / "data")
        kit.setup("--trust-hooks")
        session = kit.exec("record what I want")
        assert session.returncode == 0, session.stderr
        first = kit.server.model_requests()[0].body
        assert any("- mcp__loopstate:" in text for text in input_texts(first))  # offered in the very first request
        outputs = tool_outputs(kit.server.model_requests()[-1].body)
        assert '"error"' not in outputs["call_claim"] and STATEMENT in outputs["call_show"]
        assert statements(kit) == [STATEMENT]  # the CLI reads what the MCP server wrote: one store
        assert (kit.data_dir / "projects").is_dir()


@pytest.mark.slow
def test_without_the_entry_s_env_vars_the_server_writes_another_store(tmp_path):
    with codex_kit(tmp_path, FIRST_TURN) as kit:
        kit.setup("--trust-hooks")
        kit.config.write_text(kit.config.read_text().replace(
            'env_vars = ["LOOPSTATE_DATA_DIR", "CODEX_HOME", "PLUGIN_DATA", "XDG_STATE_HOME"]\n', ""))
        session = kit.exec("record what I want")
        assert session.returncode == 0, session.stderr
        assert STATEMENT in tool_outputs(kit.server.model_requests()[-1].body)["call_show"]
        assert statements(kit) == []
        assert "would use the store in" in kit.loopstate("doctor", "--host", "codex", expect=1).stdout
