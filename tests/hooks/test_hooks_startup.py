"""What a tool-call hook imports: nothing of the domains, the engine or a ledger when nothing can deny.

PreToolUse runs before every tool call, so its common path (no run bound, no
kill switch) must stay a probe of a few files. The registration that
`loopstate setup` writes runs exactly `loopstate hook HOST EVENT`.
"""

from __future__ import annotations

import pytest

import json
import subprocess
import sys
from pathlib import Path

from hookkit import hook, host_input, receipt_of
from tests.conftest import store_env

PROBE = ("import json, sys\n"
         "from loopstate.cli.main import main  # as the console script does\n"
         "try:\n    main()\n"
         "except SystemExit:\n    pass\n"
         "sys.stderr.write('\\nMODULES ' + json.dumps(sorted(sys.modules)))\n")


# Loaded by none of the paths below: the domains, the engine and a ledger (nothing is folded), argparse
# (`hook HOST EVENT` needs no parser), and what only a writer or a parallel verify needs.
HEAVY_PREFIXES = ("loopstate.domains.intent", "loopstate.domains.runs", "loopstate.domains.goals",
                  "loopstate_protocol.intent", "loopstate_protocol.runs", "loopstate_protocol.goals")
NEVER = {"loopstate.service.engine", "loopstate.core.ledger", "loopstate.core.stream", "loopstate.service.intent_effects",
         "loopstate.service.runs_effects", "argparse", "loopstate.cli.parser", "subprocess", "secrets"}


def loaded_by_hook(event: str, payload: dict, *, cwd: Path, data_dir: Path) -> tuple[dict, set[str]]:
    """A real `loopstate hook claude EVENT` process: its answer and the modules it had loaded at exit."""
    done = subprocess.run([sys.executable, "-c", PROBE, "hook", "claude", event], input=json.dumps(payload), cwd=cwd,
                          capture_output=True, text=True, timeout=60, env={"LOOPSTATE_DATA_DIR": str(data_dir),
                                                                            "PATH": "/usr/bin:/bin", **store_env()})
    return json.loads(done.stdout), set(json.loads(done.stderr.rsplit("MODULES ", 1)[1]))


@pytest.mark.jsonl_only("the local store's fast path reads file identities; a shared store's is a query through its driver")
def test_the_common_tool_call_path_loads_no_domain_and_no_ledger(tmp_path: Path, data_dir: Path) -> None:
    project = tmp_path / "proj"
    (project / ".git").mkdir(parents=True)
    hook("claude", "SessionStart", host_input("claude", "SessionStart", project, "s"), data_dir=data_dir, cwd=project)
    out, modules = loaded_by_hook("PreToolUse", host_input("claude", "PreToolUse", project, "s"), cwd=project,
                                  data_dir=data_dir)
    assert out == {"continue": True}
    assert {m for m in modules if m.startswith(HEAVY_PREFIXES)} == set()
    assert not modules & NEVER


@pytest.mark.jsonl_only("the local store's fast path reads file identities; a shared store's is a query through its driver")
def test_an_ordinary_prompt_with_an_unchanged_context_loads_no_domain(tmp_path: Path, data_dir: Path) -> None:
    """The prompt is not an /intent command, and the store did not change since SessionStart injected:
    the answer comes from the session file and file identities, so no domain, engine or ledger is loaded."""
    project = tmp_path / "proj"
    (project / ".git").mkdir(parents=True)
    started = hook("claude", "SessionStart", host_input("claude", "SessionStart", project, "s"), data_dir=data_dir,
                   cwd=project)
    assert started["continue"] is True
    out, modules = loaded_by_hook("UserPromptSubmit", host_input("claude", "UserPromptSubmit", project, "s",
                                                                 prompt="refactor the parser"),
                                  cwd=project, data_dir=data_dir)
    assert out == {"continue": True}
    assert {m for m in modules if m.startswith(HEAVY_PREFIXES)} == set()
    assert not modules & NEVER


def test_an_intent_command_still_loads_the_intent_domain_and_is_answered(tmp_path: Path, data_dir: Path) -> None:
    """The other side of the prompt check: a prompt that starts with /intent (after blanks) is parsed and recorded."""
    project = tmp_path / "proj"
    (project / ".git").mkdir(parents=True)
    hook("claude", "SessionStart", host_input("claude", "SessionStart", project, "s"), data_dir=data_dir, cwd=project)
    out, modules = loaded_by_hook("UserPromptSubmit", host_input("claude", "UserPromptSubmit", project, "s",
                                                                 prompt="  /intent remember keep the API stable"),
                                  cwd=project, data_dir=data_dir)
    assert "remembered" in receipt_of("claude", out), out
    assert "loopstate.domains.intent.prompt_commands" in modules


# Each costs a short-lived process at its start, beside what the read itself needs: a dataclass compiles
# its methods when it is defined (0.25-0.7 ms each), `json` is ~1 ms where msgspec is loaded already.
STARTUP_WEIGHT = {"dataclasses", "json", "argparse", "shutil"}
BARE_PROBE = ("import sys\n"
              "from loopstate.cli.main import main  # as the console script does\n"
              "try:\n    main()\n"
              "except SystemExit:\n    pass\n"
              "from loopstate.core import redaction\n"
              "sys.stderr.write('\\nCOMPILED %d MODULES %s' % (redaction._patterns.cache_info().currsize, ' '.join(sys.modules)))\n")


@pytest.mark.jsonl_only("the local store's fast path reads file identities; a shared store's is a query through its driver")
def test_an_injecting_hook_defines_no_dataclass_and_compiles_no_credential_pattern(tmp_path: Path, data_dir: Path) -> None:
    """SessionStart on resume reads the intent ledger and injects the user's claim: what it loads stays lean
    (the session id is only hashed, so the credential patterns are never compiled for it)."""
    project = tmp_path / "proj"
    (project / ".git").mkdir(parents=True)
    hook("claude", "SessionStart", host_input("claude", "SessionStart", project, "s"), data_dir=data_dir, cwd=project)
    hook("claude", "UserPromptSubmit", host_input("claude", "UserPromptSubmit", project, "s",
                                                  prompt="/intent remember keep the API stable"),
         data_dir=data_dir, cwd=project)
    done = subprocess.run([sys.executable, "-c", BARE_PROBE, "hook", "claude", "SessionStart"],
                          input=json.dumps(host_input("claude", "SessionStart", project, "s", source="resume")),
                          cwd=project, capture_output=True, text=True, timeout=60,
                          env={"LOOPSTATE_DATA_DIR": str(data_dir), "PATH": "/usr/bin:/bin", **store_env()})
    out = json.loads(done.stdout)
    assert "keep the API stable" in out["hookSpecificOutput"]["additionalContext"], out
    compiled, modules = done.stderr.rsplit("COMPILED ", 1)[1].split(" MODULES ")
    assert compiled == "0"
    assert "loopstate.domains.intent" in modules.split()
    assert not set(modules.split()) & STARTUP_WEIGHT
