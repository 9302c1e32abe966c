"""`/intent ...` typed at the start of a prompt: the one way a user speaks to the ledger through a harness.

A harness sees the user's words only at UserPromptSubmit. A prompt that
starts with the word ``/intent`` is a command the user typed; anything else is
an ordinary request and is never stored (no full prompt is kept at rest).
Parsing is pure: the service turns a parsed command into intent commands.
"""

from __future__ import annotations

import msgspec

from loopstate.domains.intent.wording import nearest

VERBS = ("remember", "start", "show", "forget", "off", "on", "private")
USAGE = ("/intent remember [--project] [FACET:]TEXT, /intent start [LABEL], /intent show, /intent forget CLAIM_ID, "
         "/intent off, /intent on or /intent private")
PREFIX = "/intent"
PROJECT_FLAG = "--project"


class PromptCommand(msgspec.Struct, frozen=True):
    """A parsed ``/intent`` command; ``problem`` says what is wrong with a malformed one (then nothing is done).
    ``project``: ``/intent remember --project``, a claim every task of the project sees."""

    verb: str
    argument: str = ""
    problem: str | None = None
    project: bool = False


def parse(prompt: str) -> PromptCommand | None:
    """The command in ``prompt``, or None when the prompt is not an ``/intent`` command."""
    text = prompt.strip()
    if text != PREFIX and not (text.startswith(PREFIX) and text[len(PREFIX)].isspace()):
        return None
    words = text[len(PREFIX):].split(None, 1)
    if not words:
        return PromptCommand("usage", problem=f"/intent needs a verb: {USAGE}")
    verb, argument = words[0], (words[1].strip() if len(words) > 1 else "")
    if verb not in VERBS:
        return PromptCommand("usage", problem=f"/intent {verb}: not a verb{nearest(verb, VERBS)}; use {USAGE}")
    project = False
    if verb == "remember" and (argument == PROJECT_FLAG or argument.startswith(PROJECT_FLAG + " ")):
        project, argument = True, argument[len(PROJECT_FLAG):].strip()
    if verb == "remember" and not argument:
        return PromptCommand(verb, problem="/intent remember needs the text to remember: "
                                           "/intent remember [--project] [FACET:]TEXT")
    if verb == "forget" and not argument:
        return PromptCommand(verb, problem="/intent forget needs a claim id (or a unique prefix of one) from /intent show")
    if verb not in ("remember", "forget", "start") and argument:
        return PromptCommand(verb, problem=f"/intent {verb} takes nothing after it")
    return PromptCommand(verb, argument, project=project)
