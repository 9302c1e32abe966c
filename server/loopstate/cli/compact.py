"""`loopstate compact [STREAM ...]`: write each stream's projection snapshot now.

Writers already leave a snapshot beside every checkpoint (about each MiB of
appends); this writes one at the current head, so the next cold read (a hook,
a CLI command, a sidecar's first query) folds nothing before it. The streams
themselves are never rewritten: a snapshot is a derived cache, bound to the
bytes it was folded from (docs/storage.md, "Projection snapshots").
"""

from __future__ import annotations

import argparse

from loopstate.cli.output import add_common, emit_json, project_root


def register(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("compact", help="write each stream's folded state at its head, so later commands start there",
                       description="Catch every stream (or the STREAMs named) up under its exclusive lock and write "
                                   "its checkpoint and projection snapshot at the head, so a cold read folds only "
                                   "what is appended after it. The streams are not rewritten.")
    p.add_argument("streams", nargs="*", metavar="STREAM", help="stream names, e.g. intent or goals.payments "
                                                                "(default: every stream of the project)")
    add_common(p)
    p.set_defaults(func=cmd_compact)


def cmd_compact(args: argparse.Namespace) -> int:
    from loopstate.service.engine import Service

    done = Service().compact(project_root(args), args.streams or None)
    if args.json:
        emit_json({"streams": [{"stream": head.stream, "sequence": head.sequence, "hash": head.hash,
                                "snapshot": written} for head, written in done]})
    else:
        for head, written in done:
            what = "snapshot written" if written else "no snapshot (this stream keeps none, or has no hashed head)"
            print(f"{head.stream}: sequence {head.sequence}: {what}")
    return 0
