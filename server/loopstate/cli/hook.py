"""`loopstate hook HOST EVENT`: the command a Claude Code or Codex hook registration runs.

It reads the host's JSON on stdin and writes the host's JSON on stdout
(loopstate.hooks); it always exits 0, so a fault never blocks the user.
``cli.main`` calls ``answer_hook`` directly for the plain ``hook HOST EVENT``
form, without building a parser.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

if TYPE_CHECKING:
    import argparse


def answer_hook(host: str | None = None, event: str | None = None) -> int:
    """Answer one hook event from stdin to stdout; 0 always (141 when the host closed stdout first)."""
    import os
    import sys

    from loopstate.hooks.run import run

    try:
        data = sys.stdin.buffer.read()
    except (OSError, ValueError):
        data = b""
    try:
        sys.stdout.write(run(host, event, data, os.environ))
        sys.stdout.flush()
    except BrokenPipeError:  # the host is gone: nobody can read an answer
        from loopstate.cli.output import closed_pipe_exit

        return closed_pipe_exit()
    return 0


def cmd_hook(args: argparse.Namespace) -> int:
    return answer_hook(args.host, args.event)


def register(sub) -> None:
    hook = sub.add_parser("hook", help="answer one Claude Code or Codex hook event (host JSON on stdin and stdout)",
                          description="What a Claude Code or Codex hook registration runs (`loopstate setup` "
                          "writes it): the host's JSON event on stdin, loopstate's answer as the host's JSON on "
                          "stdout. It always exits 0, so a fault never blocks your session: the fault is said in "
                          "the answer instead. docs/hooks.md says what each event does.")
    hook.add_argument("host", nargs="?", metavar="HOST", help="claude or codex")
    hook.add_argument("event", nargs="?", metavar="EVENT",
                      help="SessionStart, UserPromptSubmit, PreToolUse, PostToolUse, Stop, PreCompact, PostCompact or SessionEnd")
    hook.set_defaults(func=cmd_hook)
