"""How every CLI command reports: human text by default, JSON with --json, clear errors.

A LoopstateError becomes one line on stderr (or a JSON error object on stdout
with --json) and exit code 1; an unexpected fault becomes exit code 70 with the
exception named, never a bare traceback.
"""

from __future__ import annotations

import argparse
import sys
from typing import Any

import msgspec

from loopstate.core.errors import LoopstateError

EXIT_ERROR = 1
EXIT_INTERNAL = 70


def add_common(parser: argparse.ArgumentParser, *, root: bool = True) -> None:
    """--root and --json, the options every store command takes."""
    if root:
        parser.add_argument("--root", default=None, help="project root (default: the current directory)")
    parser.add_argument("--json", action="store_true", help="print machine-readable JSON")


def project_root(args: argparse.Namespace) -> str:
    import os

    # Joined, not normalized: a '..' in the user's path must reach root validation.
    if not args.root:
        return os.getcwd()
    return args.root if os.path.isabs(args.root) else os.path.join(os.getcwd(), args.root)


def emit_json(value: Any) -> None:
    sys.stdout.write(msgspec.json.encode(value).decode() + "\n")


def progress_printer(label: str):
    """A progress callback that draws on a terminal's stderr, silent otherwise."""
    if not sys.stderr.isatty():
        return None
    state = {"last": -1}

    def show(done: int, total: int) -> None:
        percent = int(done * 100 / total) if total else 100
        if percent != state["last"]:
            state["last"] = percent
            sys.stderr.write(f"\r{label}: {percent:3d}% ({done}/{total} bytes)")
            if done >= total:
                sys.stderr.write("\n")
            sys.stderr.flush()

    return show


def run_guarded(args: argparse.Namespace) -> int:
    try:
        return int(args.func(args) or 0)
    except LoopstateError as exc:
        if getattr(args, "json", False):
            emit_json({"error": exc.to_dict()})
        else:
            sys.stderr.write(f"loopstate: {exc.code.value}: {exc.message}\n")
        return EXIT_ERROR
    except KeyboardInterrupt:
        return 130
    except Exception as exc:  # a bug: say so plainly, keep the exit code distinct
        sys.stderr.write(f"loopstate: internal error: {type(exc).__name__}: {exc}\n")
        return EXIT_INTERNAL
