"""Claude Code's ``/intent`` command file: what setup writes so that ``/intent ...`` reaches the hooks at all.

Claude Code owns every prompt that starts with ``/``: an unknown ``/name`` is
answered "Unknown command" by the host, and UserPromptSubmit never fires. A
prompt command exists only as a command file (``.claude/commands/intent.md`` in
a project, ``commands/intent.md`` in the user's Claude folder). With it the
host fires UserPromptSubmit with the prompt as typed (``/intent remember ...``),
which the hook records and answers with a receipt as context; the file's body is
then the prompt the model gets: relay the receipt, or, when there is none
because the hooks did not run, say so and name the command that finds out why.
``disable-model-invocation`` keeps the model from running the command itself: an
``/intent`` is the user's word, never the agent's.

The whole file is ours, so merging is: absent or ours (this version or an older
one, known by its marker line) becomes this version; anything else is another
tool's ``/intent`` and is refused. Taking ours out removes the file.
"""

from __future__ import annotations

from loopstate.install.registration import ConfigShapeError

MARKER = "<!-- loopstate: Claude Code's /intent command. `loopstate setup uninstall --host claude` removes it. -->"

BODY = f"""---
description: "loopstate intent: remember, show, forget, off, on, private"
argument-hint: "remember [FACET:]TEXT | show | forget ID | off | on | private"
disable-model-invocation: true
---
{MARKER}
The user typed a loopstate /intent command. loopstate's UserPromptSubmit hook has already done what it says and
put its receipt (a line starting "loopstate:") in the context of this prompt. Reply with that receipt as it is, in
one line, and do nothing else: no tool, no other work. If the context holds no loopstate receipt, the hooks did not
run: reply that the /intent command was not recorded, and that `loopstate doctor --host claude` says why.
"""


def merge(text: str | None) -> str:
    """The command file's text after setup: ours, whatever version of ours was there."""
    if text is None or text == BODY or MARKER in text:
        return BODY
    raise ConfigShapeError("it is an /intent command that is not loopstate's; rename or remove it (Claude Code "
                           "runs one command per name)")


def unmerge(text: str) -> None:
    """Nothing is left of a command file once ours is taken out (None: the file is removed)."""
    if MARKER not in text:
        raise ConfigShapeError("it is no longer loopstate's /intent command (its marker line is gone); remove it "
                               "by hand if you no longer want it")
    return None
