"""The merge rules on their own: our entries spliced into any layout, others' bytes left where they were."""

from __future__ import annotations

import json

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from loopstate.install import jsonedit
from loopstate.install.hosts import CLAUDE, CODEX, mcp_entry, registration
from loopstate.install.registration import (ConfigShapeError, merge_json, merge_toml, strip_ours, unmerge_json,
                                            unmerge_toml)

GROUPS = registration("/opt/loopstate/bin/loopstate", CLAUDE)
SERVER = mcp_entry("/opt/loopstate/bin/loopstate", CLAUDE)

names = st.text(st.characters(codec="utf-8", exclude_categories=("Cs",)), max_size=8)
scalars = st.none() | st.booleans() | st.integers(-10**6, 10**6) | names
values = st.recursive(scalars, lambda inner: st.lists(inner, max_size=3) | st.dictionaries(names, inner, max_size=3),
                      max_leaves=8)
foreign_group = st.fixed_dictionaries({"hooks": st.lists(st.fixed_dictionaries(
    {"type": st.just("command"), "command": st.sampled_from(["guard.sh", "notify-send hi", "./checks.sh"])}),
    min_size=1, max_size=2)}, optional={"matcher": st.sampled_from(["Bash", "Edit|Write", ""])})
hooks = st.dictionaries(st.sampled_from(["PreToolUse", "Stop", "Notification", "SessionStart"]),
                        st.lists(foreign_group, min_size=1, max_size=2), min_size=1, max_size=3)
servers = st.dictionaries(st.sampled_from(["docs", "github", "loopstate-old"]),
                          st.fixed_dictionaries({"command": st.sampled_from(["docs-server", "npx"])}), min_size=1)
settings_docs = st.tuples(
    st.dictionaries(names.filter(lambda k: k not in ("hooks", "mcpServers")), values, max_size=4),
    st.none() | hooks, st.none() | servers,
).map(lambda t: {**t[0], **({"hooks": t[1]} if t[1] else {}), **({"mcpServers": t[2]} if t[2] else {})})
layouts = st.sampled_from([None, 2, 4, "\t"])


def render(doc: dict, indent, crlf: bool, final_newline: bool) -> str:
    text = json.dumps(doc, indent=indent, ensure_ascii=False)
    if crlf:
        text = text.replace("\n", "\r\n")
    return text + ("\r\n" if crlf else "\n") * final_newline


@pytest.mark.slow
@settings(max_examples=150, deadline=None)
@given(doc=settings_docs, indent=layouts, crlf=st.booleans(), final_newline=st.booleans(), with_server=st.booleans())
def test_merge_then_unmerge_gives_back_the_same_bytes(doc, indent, crlf, final_newline, with_server):
    text = render(doc, indent, crlf, final_newline)
    server = SERVER if with_server else None
    merged = merge_json(text, CLAUDE, GROUPS, server)
    value = json.loads(merged)
    assert strip_ours(value, CLAUDE) == strip_ours(doc, CLAUDE)
    for event, group in GROUPS.items():
        assert value["hooks"][event][-1] == group
    assert (value.get("mcpServers", {}).get("loopstate") == SERVER) is with_server
    assert merge_json(merged, CLAUDE, GROUPS, server) == merged  # a re-apply changes no byte
    if doc:  # an empty document is replaced whole (nothing of anyone's to keep in place)
        assert unmerge_json(merged, CLAUDE) == text


def test_an_older_registration_of_ours_is_replaced_not_doubled():
    old = merge_json('{"a": 1}\n', CLAUDE, registration("/old/loopstate", CLAUDE), mcp_entry("/old/loopstate", CLAUDE))
    new = merge_json(old, CLAUDE, GROUPS, SERVER)
    assert "/old/" not in new and new.count(" hook claude ") == len(CLAUDE.events)
    assert json.loads(new)["a"] == 1 and json.loads(new)["mcpServers"] == {"loopstate": SERVER}


@pytest.mark.parametrize("merge,text", [
    (merge_json, '{"mcpServers": {"loopstate": {"command": "npx", "args": ["other-loopstate"]}}}'),
    (merge_toml, '[mcp_servers.loopstate]\ncommand = "npx"\n'),
])
def test_someone_elses_server_named_loopstate_is_refused(merge, text):
    with pytest.raises(ConfigShapeError, match="not `loopstate mcp`"):
        merge(text, CLAUDE if merge is merge_json else CODEX, None, SERVER)


def test_a_group_that_mixes_ours_with_another_handler_is_not_ours():
    mixed = {"hooks": {"Stop": [{"hooks": [{"type": "command", "command": "/x/loopstate hook claude Stop"},
                                           {"type": "command", "command": "./checks.sh"}]}]}}
    text = json.dumps(mixed, indent=2)
    assert json.loads(unmerge_json(text, CLAUDE)) == mixed


@pytest.mark.parametrize("text,words", [
    ('{"a": 1,}', "expected a quoted key"), ('{"a": 1} x', "unexpected text"), ('{"a": NaN}', "NaN"),
    ('{"a": [1 2]}', "expected ','"), ('{"a": 1, "a": 1}', "appears twice"),
])
def test_the_walker_refuses_what_is_not_json(text, words):
    with pytest.raises(jsonedit.JsonEditError, match=words):
        jsonedit.parse(text)


def test_toml_keeps_comments_and_refuses_inline_hook_tables():
    text = '# top\nmodel = "gpt-5"  # why\n\n[mcp_servers.docs]\ncommand = "d"  # keep\n'
    merged = merge_toml(text, CODEX, registration("/x/loopstate", CODEX), mcp_entry("/x/loopstate", CODEX))
    assert merged.startswith(text) and '[mcp_servers.loopstate]\ncommand = "/x/loopstate"\nargs = ["mcp"]' in merged
    undone = unmerge_toml(merged, CODEX)  # taken out by tomlkit: at most a blank line is left behind
    assert undone.startswith(text) and undone[len(text):].strip() == ""
    with pytest.raises(ConfigShapeError, match="is not a table of"):
        merge_toml('hooks = { Stop = [] }\n', CODEX, registration("/x/loopstate", CODEX), None)
