"""Codex's project scope in the real CLI: a shareable `.codex/config.toml` that runs `loopstate` from PATH.

Codex reads a project's `.codex/` only for a project the user trusts, and runs its hooks only once the user
trusts each one in their own config (a project's config cannot trust its own hooks). The hashes doctor
computes for the project's hooks are Codex's own (`hooks/list`); with the project trusted and the hooks
trusted for this invocation (`--dangerously-bypass-hook-trust`, standing in for the user's /hooks), Codex runs
them and a STOP denies.
"""

from __future__ import annotations

import os
import sys
import tomllib

from codex_kit import codex_kit, shell
from conftest import needs_codex
from modelserver import Text

from loopstate.install import codex_trust
from loopstate.install.hosts import CODEX

pytestmark = needs_codex


def test_a_project_s_hooks_carry_no_machine_path_and_codex_hashes_them_as_doctor_does(tmp_path):
    with codex_kit(tmp_path, [[shell("touch side-effect", "call_touch")], [Text("done")]]) as kit:
        kit.extra_env["PATH"] = os.path.dirname(sys.executable) + os.pathsep + kit.env()["PATH"]  # loopstate on PATH
        out = kit.loopstate("setup", "apply", "--host", "codex", "--scope", "project", "--mcp").stdout
        shared = kit.project / ".codex" / "config.toml"
        assert "commit these with the project" in out and str(shared) in out
        assert str(tmp_path) not in shared.read_text() and "command = \"loopstate hook codex Stop\"" in shared.read_text()
        assert out.splitlines()[-1].endswith("open /hooks in Codex in this project and trust each loopstate hook")

        assert kit.hooks_list() == []  # an untrusted project's .codex/ is not read at all
        doctor = kit.loopstate("doctor", "--host", "codex", expect=1).stdout
        assert "only for a trusted project" in doctor
        with kit.config.open("a") as config:
            config.write(f'\n[projects."{kit.project}"]\ntrust_level = "trusted"\n')
        listed = {h["key"]: h for h in kit.hooks_list()}
        ours = codex_trust.our_hooks(tomllib.loads(shared.read_text()), str(shared), CODEX)
        assert set(ours) == set(listed) and len(ours) == 7
        assert all(listed[key]["currentHash"] == current for key, (_, current) in ours.items())
        assert "only for a trusted project" not in kit.loopstate("doctor", "--host", "codex", expect=1).stdout

        (kit.project / ".loopstate").mkdir()
        (kit.project / ".loopstate" / "STOP").touch()
        session = kit.exec("make a file", "--dangerously-bypass-hook-trust")
        assert ("PreToolUse", "Blocked") in session.hooks and not (kit.project / "side-effect").exists()
