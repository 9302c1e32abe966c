"""What each host accepts on a hook's stdout, per event, as msgspec Structs: doctor checks a probe's output here.

Codex's shapes follow its generated schemas (../shared/conformance/codex-hooks/
*.output.schema.json; tests/setup check these Structs accept and refuse what
the schemas do): every object refuses unknown fields, and some fields that
default to null may not be given as null. Claude Code publishes no schema; its
shapes are the documented fields (../shared/HOSTS.md), strings capped at 10,000
characters. Codex has no published SessionEnd shape: the common fields are
taken, as for its compaction events. Doctor needs no JSON Schema library.
"""

from __future__ import annotations

from typing import Annotated, Any, Literal

import msgspec
from msgspec import UNSET, Meta, UnsetType

Claude = Annotated[str, Meta(max_length=10_000)]
Decision = Literal["allow", "deny", "ask"]


class _Strict(msgspec.Struct, forbid_unknown_fields=True, kw_only=True, omit_defaults=True):
    pass


# Codex ------------------------------------------------------------------------------------


class CodexCommon(_Strict):
    """pre-compact / post-compact (and, by assumption, session-end)."""

    # `continue` is a Python keyword: the field is renamed on the wire.
    continue_: bool | UnsetType = msgspec.field(default=UNSET, name="continue")
    stopReason: str | None = None
    suppressOutput: bool | UnsetType = UNSET
    systemMessage: str | None = None


class CodexSessionStartSpecific(_Strict):
    hookEventName: Literal["SessionStart"]
    additionalContext: str | UnsetType = UNSET
    env: dict[str, str] | UnsetType = UNSET


class CodexCommonNotNull(_Strict):
    """session-start / pre-tool-use: the same fields, but stopReason and systemMessage may not be null."""

    continue_: bool | UnsetType = msgspec.field(default=UNSET, name="continue")
    stopReason: str | UnsetType = UNSET
    suppressOutput: bool | UnsetType = UNSET
    systemMessage: str | UnsetType = UNSET


class CodexSessionStart(CodexCommonNotNull):
    hookSpecificOutput: CodexSessionStartSpecific | UnsetType = UNSET


class CodexPreToolUseSpecific(_Strict):
    hookEventName: Literal["PreToolUse", "SessionStart", "UserPromptSubmit", "Stop"]
    additionalContext: str | UnsetType = UNSET
    permissionDecision: Decision | UnsetType = UNSET
    permissionDecisionReason: str | UnsetType = UNSET
    updatedInput: Any = UNSET


class CodexPreToolUse(CodexCommonNotNull):
    hookSpecificOutput: CodexPreToolUseSpecific | UnsetType = UNSET


class CodexUserPromptSubmitSpecific(_Strict):
    hookEventName: Literal["UserPromptSubmit"]
    additionalContext: str | None = None


class CodexUserPromptSubmit(CodexCommon):
    decision: Literal["block"] | None = None
    reason: str | None = None
    hookSpecificOutput: CodexUserPromptSubmitSpecific | None = None


class CodexStop(CodexCommon):
    decision: Literal["block"] | None = None
    reason: str | None = None


CODEX = {"SessionStart": CodexSessionStart, "UserPromptSubmit": CodexUserPromptSubmit, "PreToolUse": CodexPreToolUse,
         "PreCompact": CodexCommon, "PostCompact": CodexCommon, "Stop": CodexStop, "SessionEnd": CodexCommon}


# Claude Code ------------------------------------------------------------------------------


class ClaudeCommon(_Strict):
    continue_: bool | UnsetType = msgspec.field(default=UNSET, name="continue")
    stopReason: Claude | UnsetType = UNSET
    systemMessage: Claude | UnsetType = UNSET
    suppressOutput: bool | UnsetType = UNSET


class ClaudeContext(_Strict):
    hookEventName: str
    additionalContext: Claude | UnsetType = UNSET


class ClaudeToolDecision(ClaudeContext):
    permissionDecision: Decision | UnsetType = UNSET
    permissionDecisionReason: Claude | UnsetType = UNSET


class ClaudeSessionStart(ClaudeCommon):
    hookSpecificOutput: ClaudeContext | UnsetType = UNSET


class ClaudeUserPromptSubmit(ClaudeCommon):
    decision: Literal["block"] | UnsetType = UNSET
    reason: Claude | UnsetType = UNSET
    hookSpecificOutput: ClaudeContext | UnsetType = UNSET


class ClaudePreToolUse(ClaudeCommon):
    hookSpecificOutput: ClaudeToolDecision | UnsetType = UNSET


class ClaudeBlocking(ClaudeCommon):
    """Stop and PreCompact: they may block, with a reason; they inject nothing."""

    decision: Literal["block"] | UnsetType = UNSET
    reason: Claude | UnsetType = UNSET


CLAUDE = {"SessionStart": ClaudeSessionStart, "UserPromptSubmit": ClaudeUserPromptSubmit,
          "PreToolUse": ClaudePreToolUse, "Stop": ClaudeBlocking, "PreCompact": ClaudeBlocking,
          "SessionEnd": ClaudeCommon}

SHAPES = {"claude": CLAUDE, "codex": CODEX}


def output_problem(host: str, event: str, stdout: bytes) -> str | None:
    """Why ``stdout`` is not what ``host`` accepts from an ``event`` hook, or None when it is.

    Empty output is accepted (both hosts take exit 0 with nothing as "no decision"). Beyond the shape: a
    block must carry a non-blank reason, and a hookEventName must name the event it answers."""
    if not stdout.strip():
        return None
    shape = SHAPES[host].get(event)
    if shape is None:
        return f"{host} has no {event} event"
    try:
        out = msgspec.json.decode(stdout, type=shape)
    except msgspec.DecodeError as exc:
        return f"not what {host} accepts from {event}: {exc}"
    if getattr(out, "decision", None) == "block" and not (getattr(out, "reason", None) or "").strip():
        return "decision is block but the reason is missing or blank"
    specific = getattr(out, "hookSpecificOutput", None)
    if specific not in (None, UNSET) and specific.hookEventName != event:
        return f"hookSpecificOutput.hookEventName is {specific.hookEventName!r}, not {event!r}"
    return None
