"""`loopstate hook HOST EVENT`: the command a Claude Code or Codex hook registration runs.

It reads the host's JSON on stdin and writes the host's JSON on stdout
(loopstate.hooks); it always exits 0, so a fault never blocks the user.
"""

from __future__ import annotations

import argparse


def cmd_hook(args: argparse.Namespace) -> int:
    import os
    import sys

    from loopstate.hooks.run import run

    try:
        data = sys.stdin.buffer.read()
    except (OSError, ValueError):
        data = b""
    sys.stdout.write(run(args.host, args.event, data, os.environ))
    return 0


def register(sub) -> None:
    hook = sub.add_parser("hook", help="answer one Claude Code or Codex hook event (host JSON on stdin and stdout)",
                          description=__doc__)
    hook.add_argument("host", nargs="?", metavar="HOST", help="claude or codex")
    hook.add_argument("event", nargs="?", metavar="EVENT",
                      help="SessionStart, UserPromptSubmit, PreToolUse, PostToolUse, Stop, PreCompact, PostCompact or SessionEnd")
    hook.set_defaults(func=cmd_hook)
