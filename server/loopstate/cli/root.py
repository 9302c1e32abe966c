"""`loopstate root [DIR]`: which project a directory belongs to, as every other verb would find it.

Editors need the CLI's answer (the nearest loopstate project, else the git
top, else the directory) to start one sidecar per project and to name the
project in every request; computing it themselves would mean copying the
discovery rules and the project id into each editor. The answer also carries
the project's store folder, so an editor can watch it for new streams (a run
or a goal created by another process) instead of polling.
"""

from __future__ import annotations

import argparse
import os

from loopstate.cli.output import emit_json


def register(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("root", help="print the project root a directory belongs to (and, with --json, its store)",
                       description="Print the project root that loopstate uses for DIR (default: the current "
                                   "directory): the nearest ancestor that is already a loopstate project, else the "
                                   "top of the git work tree, else DIR itself. Nothing is written.")
    p.add_argument("dir", nargs="?", default=None, metavar="DIR", help="where to start (default: the current directory)")
    p.add_argument("--json", action="store_true",
                   help="print {root, how, reason, project_id, exists, store} as JSON")
    p.set_defaults(func=cmd_root)


def cmd_root(args: argparse.Namespace) -> int:
    from loopstate_protocol.errors import ErrorCode

    from loopstate.core.errors import LoopstateError
    from loopstate.core.project import Project
    from loopstate.service.front import resolve_root

    start = os.path.abspath(args.dir) if args.dir is not None else os.getcwd()
    if not os.path.isdir(start):
        what = "does not exist" if not os.path.lexists(start) else "is not a directory"
        raise LoopstateError(ErrorCode.INVALID_ROOT, f"{start} {what}; give a directory (or none for the current one)",
                             root=start)
    choice = resolve_root(getattr(args, "root", None), cwd=start)
    project = Project(choice.root)  # the checks every command makes: absolute, no '..', not holding the data dir
    if args.json:
        emit_json({"root": project.root, "how": choice.how, "reason": choice.reason, "project_id": project.project_id,
                   "exists": project.exists(), "store": str(project.dir)})
    else:
        print(project.root)
    return 0
