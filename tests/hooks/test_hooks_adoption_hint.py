"""Issue 29: in a moved repository the hooks say so, with the command, instead of injecting an empty project.

Real `loopstate hook` processes, as the hosts run them: SessionStart's context
and systemMessage carry the notice and `loopstate project adopt OLD_PATH`; a
later prompt of the same session does not repeat it, a prompt of a session that
had no SessionStart carries it once; after the adoption the context is the
project's own again. The hook's session binding in the new folder is not state:
the CLI still offers the adoption afterwards.
"""

from __future__ import annotations

import json
import subprocess
import uuid
from pathlib import Path

import pytest

from tests.hooks.hookkit import context_of, hook, host_input, loopstate


def moved_project(tmp_path: Path) -> tuple[Path, Path, Path]:
    data, old, new = tmp_path / "data", tmp_path / "app", tmp_path / "moved" / "app"
    old.mkdir()
    loopstate("init", cwd=old, data_dir=data)  # its .loopstate/config.json names the project it was written for
    loopstate("intent", "start", "--claim", "outcome:Keep the public API", cwd=old, data_dir=data)
    new.parent.mkdir()
    subprocess.run(["mv", str(old), str(new)], check=True)
    return data, old, new


@pytest.mark.parametrize("host", ["claude", "codex"])
def test_session_start_in_a_moved_folder_names_the_adoption(tmp_path, host):
    data, old, new = moved_project(tmp_path)
    session = f"s-{uuid.uuid4()}"
    out = hook(host, "SessionStart", host_input(host, "SessionStart", new, session), data_dir=data, cwd=new)
    context = context_of(out)
    assert context is not None and f"loopstate project adopt {old}" in context, out
    assert "Tell the user" in context and "Keep the public API" not in context
    assert f"loopstate project adopt {old}" in out["systemMessage"]
    # The same session's next prompt is not told again.
    again = hook(host, "UserPromptSubmit", host_input(host, "UserPromptSubmit", new, session), data_dir=data, cwd=new)
    assert "project adopt" not in json.dumps(again), again
    # The hook left a session binding in the new folder; that is no state: the CLI still offers the adoption.
    shown = loopstate("intent", "show", cwd=new, data_dir=data)
    assert f"loopstate project adopt {old}" in shown.stderr
    loopstate("project", "adopt", str(old), cwd=new, data_dir=data)
    after = hook(host, "SessionStart", host_input(host, "SessionStart", new, f"s-{uuid.uuid4()}"), data_dir=data, cwd=new)
    assert "Keep the public API" in (context_of(after) or ""), after
    assert "project adopt" not in json.dumps(after)
    assert json.loads(loopstate("verify", "--json", cwd=new, data_dir=data).stdout)["ok"] is True


@pytest.mark.jsonl_only("counts the stream files below the data dir")
def test_a_prompt_without_session_start_is_told_once(tmp_path):
    data, old, new = moved_project(tmp_path)
    session = f"s-{uuid.uuid4()}"
    first = hook("claude", "UserPromptSubmit", host_input("claude", "UserPromptSubmit", new, session), data_dir=data, cwd=new)
    assert f"loopstate project adopt {old}" in (context_of(first) or ""), first
    second = hook("claude", "UserPromptSubmit", host_input("claude", "UserPromptSubmit", new, session), data_dir=data, cwd=new)
    assert "project adopt" not in json.dumps(second), second
    # Other events never carry it; the prompts wrote no state in the new folder (one project has streams: the old).
    tool = hook("claude", "PreToolUse", host_input("claude", "PreToolUse", new, session), data_dir=data, cwd=new)
    assert "project adopt" not in json.dumps(tool)
    assert len({p.parent.parent for p in (data / "projects").glob("*/streams/*.jsonl")}) == 1


def test_an_intent_command_in_a_moved_folder_gets_the_notice_with_its_receipt(tmp_path):
    data, old, new = moved_project(tmp_path)
    out = hook("codex", "UserPromptSubmit", host_input("codex", "UserPromptSubmit", new, f"s-{uuid.uuid4()}",
                                                       prompt="/intent show"), data_dir=data, cwd=new)
    assert out.get("decision") == "block" and f"loopstate project adopt {old}" in out["reason"], out


def test_a_folder_with_its_own_state_or_none_alike_gets_no_notice(tmp_path):
    data, fresh = tmp_path / "data", tmp_path / "fresh"
    fresh.mkdir()
    out = hook("claude", "SessionStart", host_input("claude", "SessionStart", fresh, f"s-{uuid.uuid4()}"), data_dir=data,
               cwd=fresh)
    assert "project adopt" not in json.dumps(out)
    loopstate("intent", "start", "--claim", "outcome:Own state", cwd=fresh, data_dir=data)
    out = hook("claude", "SessionStart", host_input("claude", "SessionStart", fresh, f"s-{uuid.uuid4()}"), data_dir=data,
               cwd=fresh)
    assert "Own state" in (context_of(out) or "") and "project adopt" not in json.dumps(out)


def test_the_hint_fails_open_on_a_data_dir_that_is_a_file(tmp_path):
    data, old, new = moved_project(tmp_path)
    broken = tmp_path / "not-a-dir"
    broken.write_text("x")
    out = hook("claude", "SessionStart", host_input("claude", "SessionStart", new, f"s-{uuid.uuid4()}"), data_dir=broken,
               cwd=new)
    assert out["continue"] is True and "LOOPSTATE_DATA_DIR" in out.get("systemMessage", ""), out
