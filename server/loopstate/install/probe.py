"""Doctor's pure rules: the synthetic input each hook is probed with, and the verdicts drawn from what was seen.

Each input carries exactly the fields the host sends for that event (Codex's
input schemas refuse any other field; tests/setup validates these against
them): a made-up session in the probe's own scratch project, a prompt that is
no /intent command, a read-only Bash call, a Stop with no hook active.
"""

from __future__ import annotations

import os
import shlex
from dataclasses import dataclass, field
from typing import Any

from loopstate.install.hosts import Host, our_event
from loopstate.install.registration import Handler

PROBE_SESSION = "loopstate-doctor-probe"
PROBE_PROMPT = "loopstate doctor: probing this hook (not a request)"
INTENT_PROBE = "/intent show"  # reads only: the probe records nothing, even in its scratch store


def claude_receipt_problem(stdout: bytes) -> str | None:
    """Why a Claude Code UserPromptSubmit answer to ``/intent show`` is not a receipt the host passes on (as
    context: hooks/hosts.py), or None."""
    import json

    try:
        context = json.loads(stdout)["hookSpecificOutput"]["additionalContext"]
    except (ValueError, KeyError, TypeError):
        return "its answer carries no receipt as additionalContext"
    return None if isinstance(context, str) and context.startswith("loopstate:") else "its receipt is not loopstate's"


def synthetic_input(host: Host, event: str, cwd: str) -> dict[str, Any]:
    common: dict[str, Any] = {"session_id": PROBE_SESSION, "cwd": cwd, "hook_event_name": event,
                              "transcript_path": None}
    if host.name == "claude":
        common.update(transcript_path=os.path.join(cwd, "transcript.jsonl"), permission_mode="default")
        per_event: dict[str, dict[str, Any]] = {
            "SessionStart": {"source": "startup"},
            "UserPromptSubmit": {"prompt": PROBE_PROMPT},
            "PreToolUse": {"tool_name": "Read", "tool_input": {"file_path": os.path.join(cwd, "README.md")},
                           "tool_use_id": "toolu_loopstate_probe"},
            "Stop": {"stop_hook_active": False, "last_assistant_message": "Done."},
            "PreCompact": {"trigger": "manual", "custom_instructions": ""},
            "SessionEnd": {"reason": "other"},
        }
        return {**common, **per_event[event]}
    common["model"] = "gpt-5"
    turn = {"turn_id": "loopstate-probe-turn"}
    per_event = {
        "SessionStart": {"permission_mode": "default", "source": "startup"},
        "UserPromptSubmit": {**turn, "permission_mode": "default", "prompt": PROBE_PROMPT},
        "PreToolUse": {"permission_mode": "default", "tool_name": "Bash", "tool_input": {"command": "true"},
                       "tool_use_id": "call_loopstate_probe"},
        "PreCompact": {**turn, "trigger": "manual"},
        "PostCompact": {**turn, "trigger": "manual"},
        "Stop": {**turn, "permission_mode": "default", "stop_hook_active": False, "last_assistant_message": None},
        "SessionEnd": {},
    }
    return {**common, **per_event[event]}


def program_problem(program: str, *, exists, which) -> str | None:
    """Why ``program`` cannot run here, or None. ``exists`` and ``which`` are passed in (os.access and
    shutil.which in doctor) so the rule stays free of the filesystem."""
    if os.path.isabs(program):
        return None if exists(program) else f"its program {program} does not exist or is not executable"
    return None if which(program) else f"its program {program!r} is not on PATH"


def command_problem(command: str, *, exists, which) -> str | None:
    """The same for a hook's command line (a shell line: its first word is the program)."""
    try:
        words = shlex.split(command)
    except ValueError:
        return "its command line cannot be read (an unclosed quote)"
    return program_problem(words[0], exists=exists, which=which) if words else "its command is empty"


@dataclass
class Found:
    """Our handlers and everyone else's, per file, for one host."""

    ours: list[tuple[str, Handler]] = field(default_factory=list)  # (file, handler)
    foreign: list[tuple[str, Handler]] = field(default_factory=list)


def sort_handlers(host: Host, per_file: list[tuple[str, list[Handler]]]) -> Found:
    found = Found()
    for path, handlers in per_file:
        for handler in handlers:
            event = our_event(handler.command, host)
            (found.ours if event is not None and event == handler.event else found.foreign).append((path, handler))
    return found


def collisions(host: Host, found: Found) -> list[dict[str, Any]]:
    """Other hooks on an event where we are registered and another hook can deny or block. Only the program's
    name is kept: a command line can carry a token."""
    ours = {handler.event for _, handler in found.ours}
    out = []
    for path, handler in found.foreign:
        if handler.event in ours and handler.event in host.blocking_events and isinstance(handler.command, str):
            try:
                program = os.path.basename(shlex.split(handler.command)[0])
            except (ValueError, IndexError):
                program = "(unreadable command)"
            out.append({"name": handler.event, "sources": [path], "program": program,
                        "matcher": handler.matcher if isinstance(handler.matcher, str) else None,
                        "winning_precedence": "none: the host runs matching hooks in parallel and any deny or "
                                              "block stands, whichever hook gives it"})
    return out


def missing_events(host: Host, found: Found) -> list[str]:
    registered = {handler.event for _, handler in found.ours}
    return [event for event in host.events if event not in registered]
