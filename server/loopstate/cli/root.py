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
    """The service's ``project.root`` answer: for DIR, or for ``--root`` taken as given (relative to DIR)."""
    from loopstate_protocol.project import ProjectRoot

    from loopstate.service.engine import Service
    from loopstate.service.front import resolve_root

    start = os.path.abspath(args.dir) if args.dir is not None else os.getcwd()
    explicit = getattr(args, "root", None)
    service = Service(domains=[])
    info = service.query(start, ProjectRoot(path=start))  # DIR must be a folder, --root or not
    if explicit is not None:
        info = service.query(resolve_root(explicit, cwd=start).root, ProjectRoot())
    if args.json:
        emit_json(info)
    else:
        print(info.root)
    return 0
