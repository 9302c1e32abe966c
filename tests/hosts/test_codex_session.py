"""Whole `codex exec` sessions in the real Codex CLI after a real `loopstate setup apply`: trust, context, STOP.

Each check asserts on what Codex sent the model, Codex's own report of its hooks (stderr's ``hook: EVENT``
lines, `codex app-server`'s ``hooks/list``), or a side-effect file, and each has a control that makes it able
to fail: the same tool call without STOP runs; without trust no hook runs.
"""

from __future__ import annotations

import os
import tomllib

from codex_kit import codex_kit, shell
from conftest import BIN, needs_codex
from dialect_openai import input_texts, tool_outputs
from modelserver import Text

from loopstate.install import codex_trust
from loopstate.install.hosts import CODEX

pytestmark = needs_codex

TOUCH = [[shell("touch side-effect", "call_touch")], [Text("done")]]


def test_setup_s_trust_is_the_hash_codex_computes_and_only_then_codex_runs_the_hooks(tmp_path):
    with codex_kit(tmp_path) as kit:
        out = kit.setup().stdout
        # No consent: nothing trusted, Codex reports every hook untrusted and runs none, the STOP stops nothing.
        assert out.splitlines()[-1].endswith("to make Codex run them: loopstate setup apply --host codex --trust-hooks")
        assert {h["trustStatus"] for h in kit.hooks_list()} == {"untrusted"}
        (kit.project / ".loopstate").mkdir()
        (kit.project / ".loopstate" / "STOP").touch()
        kit.server.then(TOUCH)
        session = kit.exec("make a file")
        assert session.returncode == 0 and session.hooks == []
        assert (kit.project / "side-effect").exists()
        assert kit.loopstate("doctor", "--host", "codex", expect=1).stdout.count("it is untrusted") == 7

        (kit.project / "side-effect").unlink()
        kit.setup("--trust-hooks")
        listed = {h["key"]: h for h in kit.hooks_list()}
        ours = codex_trust.our_hooks(tomllib.loads(kit.config.read_text()), str(kit.config), CODEX)
        assert set(ours) == set(listed) and len(ours) == 7
        for key, (_event, current) in ours.items():
            assert listed[key]["currentHash"] == current and listed[key]["trustStatus"] == "trusted", key
        kit.server.then(TOUCH)
        session = kit.exec("make a file")
        assert session.ran("SessionStart") and session.ran("PreToolUse") and ("PreToolUse", "Blocked") in session.hooks
        assert not (kit.project / "side-effect").exists()
        assert "clamping" not in session.stderr  # SessionEnd's timeout is within Codex's 3 s
        assert kit.loopstate("doctor", "--host", "codex").stdout.endswith("ok\n")


def test_a_stop_denies_the_shell_call_and_without_it_the_same_call_runs(tmp_path):
    with codex_kit(tmp_path) as kit:
        kit.setup("--trust-hooks")
        kit.server.then(TOUCH)
        control = kit.exec("make a file")
        assert ("PreToolUse", "Completed") in control.hooks and (kit.project / "side-effect").exists()
        assert not any("Kill switch" in t for r in kit.server.model_requests() for t in input_texts(r.body))
        (kit.project / "side-effect").unlink()

        (kit.project / ".loopstate").mkdir()
        (kit.project / ".loopstate" / "STOP").touch()
        kit.server.then(TOUCH)
        denied = kit.exec("make a file")
        assert ("PreToolUse", "Blocked") in denied.hooks
        assert not (kit.project / "side-effect").exists()
        sent = tool_outputs(kit.server.model_requests()[-1].body)["call_touch"]
        assert "loopstate: the kill switch .loopstate/STOP stands" in sent  # what the model is told
        # The context Codex sent with the prompt carries the switch too (SessionStart's injection).
        texts = input_texts(kit.server.model_requests()[-2].body)
        assert "Kill switch: .loopstate/STOP stands; tools that change things are denied." in texts


def tree(folder) -> dict[str, bytes]:
    return {str(p.relative_to(folder)): p.read_bytes() for p in sorted(folder.rglob("*"))
            if p.is_file() and ".git" not in p.relative_to(folder).parts}


def test_uninstall_after_real_sessions_leaves_the_user_s_files_byte_identical(tmp_path):
    with codex_kit(tmp_path, TOUCH) as kit:
        config, project = kit.config.read_bytes(), tree(kit.project)
        kit.setup("--trust-hooks")
        session = kit.exec("make a file")
        assert session.ran("SessionStart")
        (kit.project / "side-effect").unlink()
        kit.loopstate("setup", "uninstall", "--host", "codex")
        assert kit.config.read_bytes() == config and tree(kit.project) == project
        assert kit.hooks_list() == []  # Codex itself sees no hook of ours, and no trust of one
        kit.server.then([[Text("plain")]])
        assert kit.exec("hello").hooks == []


def test_doctor_asks_codex_itself_when_its_cli_is_on_path(tmp_path):
    with codex_kit(tmp_path) as kit:
        kit.extra_env["PATH"] = f"{BIN}{os.pathsep}{kit.env()['PATH']}"
        kit.setup()
        before = kit.loopstate("doctor", "--host", "codex", expect=1).stdout
        assert "Codex trusts 0 of loopstate's 7 hooks (from Codex's own hooks/list)" in before
        assert before.count("it is untrusted") == 7
        kit.setup("--trust-hooks")
        after = kit.loopstate("doctor", "--host", "codex").stdout
        assert "Codex trusts 7 of loopstate's 7 hooks (from Codex's own hooks/list)" in after and after.endswith("ok\n")
