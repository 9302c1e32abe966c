"""Codex's hook trust through the real CLI: setup records it only with consent, says the step without it, doctor
fails while a hook would be skipped, uninstall takes it out (the real Codex's view: tests/hosts/test_codex_trust.py)."""

from __future__ import annotations

import tomllib

import pytest

from setuphome import CODEX_CONFIG, config_path, make_home

from loopstate.install import codex_trust
from loopstate.install.hosts import CODEX


def trust_state(path) -> dict:
    return tomllib.loads(path.read_text()).get("hooks", {}).get("state", {})


@pytest.mark.slow
def test_without_consent_nothing_is_trusted_and_the_last_line_is_the_step(tmp_path):
    h = make_home(tmp_path)
    out = h.cli("setup", "apply", "--host", "codex").stdout
    assert trust_state(config_path(h, "codex", "user")) == {}
    assert out.splitlines()[-1].endswith("to make Codex run them: loopstate setup apply --host codex --trust-hooks")
    doctor = h.cli("doctor", "--host", "codex", expect=1).stdout
    assert doctor.count("it is untrusted") == 7 and "--trust-hooks" in doctor


@pytest.mark.slow
def test_consent_records_each_hook_at_its_place_and_doctor_passes(tmp_path):
    h = make_home(tmp_path)
    h.cli("setup", "apply", "--host", "codex")
    out = h.cli("setup", "apply", "--host", "codex", "--trust-hooks").stdout
    assert "not trusted" not in out
    target = config_path(h, "codex", "user")
    state = trust_state(target)
    # The user's guard hook comes first in PreToolUse, so ours is group 1 there; its trust stays the user's affair.
    assert f"{target}:pre_tool_use:1:0" in state and f"{target}:pre_tool_use:0:0" not in state
    assert set(state) == set(codex_trust.our_hooks(tomllib.loads(target.read_text()), str(target), CODEX))
    assert h.cli("doctor", "--host", "codex").stdout.endswith("ok\n")
    # A hook changed since it was trusted is "modified": Codex skips it, and doctor says so.
    text = target.read_text().replace("hook codex Stop\"\ntimeout = 10", "hook codex Stop\"\ntimeout = 11")
    target.write_text(text)
    assert "it is modified" in h.cli("doctor", "--host", "codex", expect=1).stdout


@pytest.mark.slow
def test_uninstall_takes_the_trust_out_also_when_the_user_gave_it(tmp_path):
    h = make_home(tmp_path)
    before = h.snapshot()
    h.cli("setup", "apply", "--host", "codex", "--trust-hooks")
    h.cli("setup", "uninstall", "--host", "codex")
    assert h.snapshot() == before  # setup's own trust: restored byte for byte
    h.cli("setup", "apply", "--host", "codex")
    target = config_path(h, "codex", "user")
    entries = codex_trust.our_hooks(tomllib.loads(target.read_text()), str(target), CODEX)
    # As /hooks records it, after setup: the file changed since loopstate wrote it.
    target.write_text(target.read_text() + "".join(f'\n[hooks.state."{k}"]\ntrusted_hash = "{v}"\n'
                                                   for k, (_, v) in entries.items()))
    h.cli("setup", "uninstall", "--host", "codex", expect=1)
    h.cli("setup", "uninstall", "--host", "codex", "--approve")
    assert trust_state(target) == {}
    assert tomllib.loads(target.read_text()) == tomllib.loads(CODEX_CONFIG)


def test_setup_registers_session_end_within_codex_s_limit(tmp_path):
    h = make_home(tmp_path, foreign=False)
    h.cli("setup", "apply", "--host", "codex")
    hooks = tomllib.loads(config_path(h, "codex", "user").read_text())["hooks"]
    assert [g["hooks"][0]["timeout"] for g in hooks["SessionEnd"]] == [3]
    assert {g["hooks"][0]["timeout"] for e, gs in hooks.items() if e != "SessionEnd" for g in gs} == {10}


@pytest.mark.slow
def test_the_mcp_entry_passes_the_store_on_and_doctor_fails_an_entry_that_does_not(tmp_path):
    h = make_home(tmp_path, foreign=False)
    h.codex_home = tmp_path / "codex-home"
    h.codex_home.mkdir()
    h.cli("setup", "apply", "--host", "codex", "--mcp", "--trust-hooks")
    target = config_path(h, "codex", "user")
    entry = tomllib.loads(target.read_text())["mcp_servers"]["loopstate"]
    assert entry["env_vars"] == ["LOOPSTATE_DATA_DIR", "CODEX_HOME", "PLUGIN_DATA", "XDG_STATE_HOME"]
    assert entry["required"] is True
    assert h.cli("doctor", "--host", "codex").stdout.endswith("ok\n")
    # The entry an older setup wrote: with LOOPSTATE_DATA_DIR set, the server would open another store.
    target.write_text(target.read_text().replace(
        'env_vars = ["LOOPSTATE_DATA_DIR", "CODEX_HOME", "PLUGIN_DATA", "XDG_STATE_HOME"]\n', ""))
    out = h.cli("doctor", "--host", "codex", expect=1).stdout
    assert "would use the store in" in out and "LOOPSTATE_DATA_DIR" in out


def on_a_terminal(h, answer: str, *args: str) -> str:
    """Run the CLI with a pseudo-terminal as stdin and stdout, answer its question, and return all it wrote."""
    import os
    import pty
    import subprocess
    import sys

    master, slave = pty.openpty()
    proc = subprocess.Popen([sys.executable, "-m", "loopstate.cli.main", *args], cwd=h.project, env=h.env(),
                            stdin=slave, stdout=slave, stderr=slave)
    os.close(slave)
    seen = b""
    try:
        while b"[y/N] " not in seen:
            chunk = os.read(master, 4096)
            assert chunk, seen
            seen += chunk
        os.write(master, answer.encode() + b"\n")
        while True:
            try:
                chunk = os.read(master, 4096)
            except OSError:  # EIO: the other side closed
                break
            if not chunk:
                break
            seen += chunk
    finally:
        os.close(master)
        assert proc.wait(timeout=60) == 0, seen
    return seen.decode().replace("\r\n", "\n")


@pytest.mark.slow
def test_on_a_terminal_apply_asks_and_a_yes_trusts_a_no_says_the_step(tmp_path):
    h = make_home(tmp_path)
    said = on_a_terminal(h, "n", "setup", "apply", "--host", "codex")
    assert "Codex runs a hook from config.toml only after you trust it" in said
    assert trust_state(config_path(h, "codex", "user")) == {}
    assert said.strip().splitlines()[-1].endswith("loopstate setup apply --host codex --trust-hooks")
    said = on_a_terminal(h, "y", "setup", "apply", "--host", "codex")
    assert len(trust_state(config_path(h, "codex", "user"))) == 7 and "not trusted" not in said
