"""`loopstate project adopt OLD_PATH`: a repository that moved or was re-cloned keeps its state.

The project id is a digest of the root path, so after `mv` or a fresh `git
clone` elsewhere the new folder would start empty. Every command run in a
folder without state says so when the folder looks like a known project (the
same `.loopstate/config.json`, or the same git history), and names this verb;
`adopt` makes the new folder carry the old project's state (service/adopt.py).
"""

from __future__ import annotations

import argparse

from loopstate.cli.output import add_common, emit_json, project_root


def register(sub: argparse._SubParsersAction) -> None:
    project = sub.add_parser("project", help="a project that moved or was cloned afresh: carry its state over",
                             description=__doc__.split("\n\n", 1)[1], formatter_class=argparse.RawDescriptionHelpFormatter)
    verbs = project.add_subparsers(dest="project_command", metavar="VERB")
    adopt = verbs.add_parser(
        "adopt", help="make this folder carry the state of the project at OLD_PATH",
        description="Make this project folder carry the loopstate state (intent, runs, goals) of the project that "
                    "was at OLD_PATH: after `mv old new` or a fresh `git clone` at another path. Refused when this "
                    "folder has state of its own (it would be hidden), when nothing was ever kept for OLD_PATH, and, "
                    "unless --share, when OLD_PATH still exists (both folders would share one state). "
                    "With --list: the known projects this folder looks like, and why.",
        epilog="example:\n  mv ~/src/app ~/work/app && cd ~/work/app && loopstate project adopt ~/src/app",
        formatter_class=argparse.RawDescriptionHelpFormatter)
    adopt.add_argument("old", nargs="?", metavar="OLD_PATH",
                       help="where the repository was before (or the old project's id, from `loopstate root --json`)")
    adopt.add_argument("--share", action="store_true",
                       help="adopt even though OLD_PATH still exists: both folders then use one state")
    adopt.add_argument("--list", action="store_true", help="list the known projects this folder looks like; adopt none")
    add_common(adopt)
    adopt.set_defaults(func=cmd_adopt, no_adoption_notice=True)


def cmd_adopt(args: argparse.Namespace) -> int:
    from loopstate_protocol.errors import ErrorCode

    from loopstate.core.errors import LoopstateError
    from loopstate.service import adopt

    root = project_root(args)
    if args.list or args.old is None:
        if args.old is None and not args.list:
            raise LoopstateError(ErrorCode.INVALID_PARAMS, "name OLD_PATH, the folder the repository was at before "
                                 "(`loopstate project adopt --list` lists the projects this folder looks like)")
        alike = adopt.listing(root)
        if args.json:
            emit_json({"root": root, "look_alike": alike})
        elif not alike:
            print(f"no known project looks like {root}")
        for item in [] if args.json else alike:
            print(f"{item['root']}  ({item['why']})")
        return 0
    done = adopt.adopt(root, args.old, share=args.share)
    if args.json:
        emit_json(done)
    elif done["already"]:
        print(f"{root} already carries the project that was at {done['from']}; nothing changed")
    else:
        shared = f" ({done['from']} still exists: both folders now use this one state)" if done["shared"] else ""
        print(f"{root} now carries the project that was at {done['from']} (project id {done['project_id'][:12]}...)"
              f"{shared}; `loopstate verify` checks it")
    return 0
