"""`loopstate completion SHELL`: a static completion script, generated from the parser by shtab.

The script is printed once and installed by the user, so completing a word
never starts loopstate, and shtab is imported only by this verb: no command
pays for it at startup.
"""

from __future__ import annotations

import argparse
import sys

SHELLS = ("bash", "zsh", "fish")
# Arguments that name directories or files, by dest: completed as paths.
DIRECTORIES = ("root", "export")
FILES = ("file", "claims_json", "output", "out")

INSTALL = """\
install it once, then start a new shell:
  bash:  loopstate completion bash > ~/.local/share/bash-completion/completions/loopstate
  zsh:   loopstate completion zsh > ~/.zfunc/_loopstate   (with fpath+=(~/.zfunc) before compinit in ~/.zshrc)
  fish:  loopstate completion fish > ~/.config/fish/completions/loopstate.fish
"""


def register(sub: argparse._SubParsersAction) -> None:
    completion = sub.add_parser(
        "completion", help="print a shell completion script (bash, zsh or fish)",
        description="Print a completion script for SHELL, generated from loopstate's own parser.",
        epilog=INSTALL, formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    # Not argparse choices: an unknown shell is refused like any bad input, with the shells listed.
    completion.add_argument("shell", metavar="SHELL", help="one of: " + ", ".join(SHELLS))
    completion.set_defaults(func=cmd_completion)


def _mark_paths(parser: argparse.ArgumentParser, shtab) -> None:
    """Tell shtab which arguments complete as directories or files, in every verb."""
    # shtab reads a ``complete`` attribute set on an argparse action (its documented way), which
    # argparse's types do not declare.
    for action in parser._actions:
        if action.dest in DIRECTORIES:
            action.complete = shtab.DIRECTORY  # type: ignore[attr-defined]
        elif action.dest in FILES:
            action.complete = shtab.FILE  # type: ignore[attr-defined]
        if isinstance(action, argparse._SubParsersAction):
            for child in action.choices.values():
                _mark_paths(child, shtab)


def cmd_completion(args: argparse.Namespace) -> int:
    if args.shell not in SHELLS:
        from loopstate_protocol.errors import ErrorCode

        from loopstate.core.errors import LoopstateError

        raise LoopstateError(ErrorCode.INVALID_PARAMS,
                             f"no completion for shell {args.shell!r}; use one of: {', '.join(SHELLS)}")
    import shtab

    from loopstate.cli.main import build_parser

    parser = build_parser()
    _mark_paths(parser, shtab)
    sys.stdout.write(shtab.complete(parser, shell=args.shell))
    return 0
