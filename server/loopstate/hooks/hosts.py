"""What each host accepts on stdout, per event (Claude Code: HOSTS.md; Codex: its published output schemas).

Both hosts take ``continue`` and ``systemMessage`` on every event, context as
``hookSpecificOutput.additionalContext`` (SessionStart, UserPromptSubmit),
a tool denial as ``hookSpecificOutput.permissionDecision: deny`` and a block as
top-level ``decision: block`` with a ``reason``. Codex refuses any field it does
not know, so nothing is ever sent as null or empty.

An ``/intent`` receipt is a block by default: the command goes no further. In
Claude Code a block shows as "UserPromptSubmit operation blocked by hook" (and
``continue: false`` as "Operation stopped by hook", both seen in 2.1.332's
print mode), which reads as a failure; there the command arrives through
loopstate's command file (``install/claude_commands``), whose body asks the
model to relay the receipt, so the receipt goes in as context.
"""

from __future__ import annotations

from typing import Any

CONTEXT_EVENTS = ("SessionStart", "UserPromptSubmit")
BLOCK_EVENTS = ("UserPromptSubmit", "Stop")


class Host:
    name: str
    prompt_id_field: str | None

    def output(self, event: str, answer: Any) -> dict[str, Any]:
        out: dict[str, Any] = {"continue": True}
        if answer.notice:
            out["systemMessage"] = answer.notice
        if answer.receipt and event == "UserPromptSubmit":
            self.receipt(out, answer.receipt)
        elif answer.block and event in BLOCK_EVENTS:
            out["decision"] = "block"
            out["reason"] = answer.block
        elif answer.context and event in CONTEXT_EVENTS:
            out["hookSpecificOutput"] = {"hookEventName": event, "additionalContext": answer.context}
        if answer.deny and event == "PreToolUse":
            out["hookSpecificOutput"] = {
                "hookEventName": "PreToolUse", "permissionDecision": "deny", "permissionDecisionReason": answer.deny,
            }
        return out

    def receipt(self, out: dict[str, Any], text: str) -> None:
        out["decision"] = "block"
        out["reason"] = text


class Claude(Host):
    name = "claude"
    prompt_id_field = None  # Claude Code gives a prompt no id: the redacted text's hash is its identity

    def receipt(self, out: dict[str, Any], text: str) -> None:
        out["hookSpecificOutput"] = {"hookEventName": "UserPromptSubmit", "additionalContext": text}


class Codex(Host):
    name = "codex"
    prompt_id_field = "turn_id"


HOSTS = {"claude": Claude(), "codex": Codex()}
