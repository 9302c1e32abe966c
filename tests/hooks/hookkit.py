"""Drive `loopstate hook HOST EVENT` as a host does: a fresh real CLI process per event, JSON in, JSON out.

Every call checks what a host needs of any hook: exit 0, nothing on stdout but
one JSON object and a newline, no traceback on stderr. Codex inputs are
checked against Codex's own input schemas and every Codex output against its
output schema (../shared/conformance/codex-hooks/); Claude outputs against the
shapes of HOSTS.md.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

from tests.conftest import CONFORMANCE, require_conformance

SCHEMAS = CONFORMANCE / "codex-hooks"
SCHEMA_NAMES = {"SessionStart": "session-start", "UserPromptSubmit": "user-prompt-submit", "PreToolUse": "pre-tool-use",
                "Stop": "stop", "PreCompact": "pre-compact", "PostCompact": "post-compact"}
CLAUDE_CONTEXT = ("SessionStart", "UserPromptSubmit", "PreToolUse", "PostToolUse")
CLAUDE_BLOCK = ("UserPromptSubmit", "PostToolUse", "Stop", "SubagentStop", "PreCompact")


def schema(event: str, kind: str) -> dict[str, Any] | None:
    name = SCHEMA_NAMES.get(event)
    path = SCHEMAS / f"{name}.command.{kind}.schema.json"
    return json.loads(path.read_text()) if name and path.exists() else None


def validate(instance: Any, event: str, kind: str) -> None:
    import jsonschema

    require_conformance()  # Codex's published schemas, not a weaker check without them

    found = schema(event, kind)
    if found is not None:
        jsonschema.validate(instance, found)
    elif kind == "output":  # no published schema (PostToolUse, SessionEnd): only the universal fields
        assert set(instance) <= {"continue", "systemMessage", "stopReason", "suppressOutput"}, instance


def check_claude_output(event: str, out: dict[str, Any]) -> None:
    """HOSTS.md's Claude Code shapes: universal fields, context, block and tool decisions where the event takes them."""
    assert set(out) <= {"continue", "stopReason", "systemMessage", "suppressOutput", "decision", "reason",
                        "hookSpecificOutput"}, out
    assert out["continue"] is True
    if "decision" in out:
        assert event in CLAUDE_BLOCK and out["decision"] == "block" and out["reason"].strip()
    specific = out.get("hookSpecificOutput")
    if specific is not None:
        assert event in CLAUDE_CONTEXT and specific["hookEventName"] == event
        if event == "PreToolUse":
            assert set(specific) == {"hookEventName", "permissionDecision", "permissionDecisionReason"}
            assert specific["permissionDecision"] == "deny" and specific["permissionDecisionReason"].strip()
        else:
            assert set(specific) == {"hookEventName", "additionalContext"} and specific["additionalContext"].strip()
    for value in (out.get("reason"), out.get("systemMessage"), (specific or {}).get("additionalContext")):
        assert value is None or len(value) <= 10_000


def codex_input(event: str, root: Path, session: str, **fields: Any) -> dict[str, Any]:
    """A Codex hook input with every field its schema requires, validated against that schema."""
    base = {"session_id": session, "cwd": str(root), "hook_event_name": event, "model": "gpt-5-codex",
            "transcript_path": None}
    extra = {
        "SessionStart": {"source": "startup", "permission_mode": "default"},
        "UserPromptSubmit": {"turn_id": "turn-1", "permission_mode": "default", "prompt": "hello"},
        "PreToolUse": {"permission_mode": "default", "tool_name": "Bash", "tool_input": {"command": "ls"},
                       "tool_use_id": "call-1"},
        "Stop": {"turn_id": "turn-1", "permission_mode": "default", "stop_hook_active": False,
                 "last_assistant_message": None},
        "PreCompact": {"turn_id": "turn-1", "trigger": "auto"},
        "PostCompact": {"turn_id": "turn-1", "trigger": "auto"},
        "PostToolUse": {"permission_mode": "default", "tool_name": "Bash", "tool_input": {"command": "ls"},
                        "tool_use_id": "call-1", "tool_response": {}},
        "SessionEnd": {"reason": "exit"},
    }[event]
    payload = {**base, **extra, **fields}
    validate(payload, event, "input")
    return payload


def claude_input(event: str, root: Path, session: str, **fields: Any) -> dict[str, Any]:
    """A Claude Code hook input as HOSTS.md describes it."""
    base = {"session_id": session, "transcript_path": str(root / "transcript.jsonl"), "cwd": str(root),
            "permission_mode": "default", "hook_event_name": event}
    extra = {
        "SessionStart": {"source": "startup"}, "UserPromptSubmit": {"prompt": "hello"},
        "PreToolUse": {"tool_name": "Bash", "tool_input": {"command": "ls"}, "tool_use_id": "toolu_1"},
        "PostToolUse": {"tool_name": "Bash", "tool_input": {"command": "ls"}, "tool_use_id": "toolu_1",
                        "tool_response": {"stdout": ""}},
        "Stop": {"stop_hook_active": False, "last_assistant_message": "done"},
        "PreCompact": {"trigger": "auto", "custom_instructions": ""}, "PostCompact": {"trigger": "auto"},
        "SessionEnd": {"reason": "exit"},
    }[event]
    return {**base, **extra, **fields}


def host_input(host: str, event: str, root: Path, session: str, **fields: Any) -> dict[str, Any]:
    return (codex_input if host == "codex" else claude_input)(event, root, session, **fields)


_AS_SENT = "as sent"


def hook(host: str, event: str, payload: Any, *, data_dir: Path | None, cwd: Path, env: dict[str, str] | None = None,
         user: int | None = None, registered: str | None = _AS_SENT) -> dict[str, Any]:
    """Run one hook for the host's ``event``; the output, checked against the host's shapes for it.
    ``registered``: the event the registration names on the command line, when not ``event`` (None: none)."""
    base = {k: v for k, v in os.environ.items() if k not in ("LOOPSTATE_DATA_DIR", "CODEX_HOME", "PLUGIN_DATA",
                                                             "LOOPSTATE_RUN", "LOOPSTATE_GOAL", "LOOPSTATE_TASK")}
    if data_dir is not None:
        base["LOOPSTATE_DATA_DIR"] = str(data_dir)
    data = payload if isinstance(payload, bytes) else json.dumps(payload).encode()
    named = [event] if registered == _AS_SENT else [] if registered is None else [registered]
    done = subprocess.run([sys.executable, "-m", "loopstate.cli.main", "hook", host, *named], cwd=cwd,
                          env={**base, **(env or {})}, input=data, capture_output=True, timeout=120,
                          user=user)
    assert done.returncode == 0, done
    assert b"Traceback" not in done.stderr, done.stderr.decode()
    text = done.stdout.decode("utf-8")
    assert text.endswith("\n") and text.count("\n") == 1, text
    out = json.loads(text)
    assert isinstance(out, dict) and out.get("continue") is True, out
    if host == "codex":
        validate(out, event, "output")
    else:
        check_claude_output(event, out)
    return out


def receipt_of(host: str, out: dict[str, Any]) -> str:
    """An /intent command's receipt, where each host gets it: Claude Code as context (its command file's body
    asks the model to relay it; a block would read "operation blocked by hook"), Codex as the block reason."""
    if host == "claude":
        assert "decision" not in out, out
        return (out.get("hookSpecificOutput") or {})["additionalContext"]
    assert out["decision"] == "block", out
    return out["reason"]


def context_of(out: dict[str, Any]) -> str | None:
    return (out.get("hookSpecificOutput") or {}).get("additionalContext")


def denial_of(out: dict[str, Any]) -> str | None:
    specific = out.get("hookSpecificOutput") or {}
    return specific.get("permissionDecisionReason") if specific.get("permissionDecision") == "deny" else None


def grep_at_rest(data_dir: Path, root: Path, needle: bytes) -> list[str]:
    """Where ``needle`` is at rest: the names of the files under the data dir that hold it and, on
    PostgreSQL, the ``loopstate`` tables whose rows of ``root``'s project hold it."""
    from loopstate.core.project import Project
    from tests.conftest import rows_at_rest

    rows = rows_at_rest(Project(str(root), data_dir=data_dir))
    return [path.name for path in grep_data(data_dir, needle)] + [where for where, data in rows if needle in data]


def grep_data(data_dir: Path, needle: bytes) -> list[Path]:
    """Every file under the data dir that holds ``needle``."""
    return [path for path in data_dir.rglob("*") if path.is_file() and needle in path.read_bytes()]


def loopstate(*args: str, cwd: Path, data_dir: Path) -> subprocess.CompletedProcess[str]:
    """Another process's CLI command on the same store (a person at a terminal, a harness's own calls)."""
    env = {**os.environ, "LOOPSTATE_DATA_DIR": str(data_dir)}
    done = subprocess.run([sys.executable, "-m", "loopstate.cli.main", *args], cwd=cwd, env=env, capture_output=True,
                          text=True, timeout=120)
    assert done.returncode == 0, done
    return done
