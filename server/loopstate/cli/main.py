"""`loopstate`: the entry point. Each module in SUBCOMMANDS registers its own verbs."""

from __future__ import annotations

import argparse
import importlib
import sys

from loopstate import __version__

# Each module defines register(subparsers) and sets a `func(args) -> int` default.
SUBCOMMANDS = (
    "loopstate.cli.store",
    "loopstate.cli.init",
    "loopstate.cli.serve",
    "loopstate.cli.intent",
    "loopstate.cli.runs",
    "loopstate.cli.goals",
    "loopstate.cli.demo",
)


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="loopstate",
        description="A local, append-only, hash-chained state store for AI coding-agent loops.",
    )
    parser.add_argument("--version", action="version", version=f"loopstate {__version__}")
    sub = parser.add_subparsers(dest="command", metavar="COMMAND")
    for name in SUBCOMMANDS:
        importlib.import_module(name).register(sub)
    return parser


def main(argv: list[str] | None = None) -> int:
    parser = build_parser()
    args = parser.parse_args(argv)
    if not getattr(args, "func", None):
        parser.print_help()
        return 2
    from loopstate.cli.output import run_guarded

    return run_guarded(args)


if __name__ == "__main__":
    sys.exit(main())
