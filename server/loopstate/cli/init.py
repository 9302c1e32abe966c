"""`loopstate init`: the project's runs config with loopstate's defaults, and `.loopstate/` ignored by git."""

from __future__ import annotations

import argparse

from loopstate.cli.output import add_common, emit_json, project_root


def register(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("init", help="write .loopstate/config.json with the defaults and ignore .loopstate/ in git",
                       description="Write .loopstate/config.json with loopstate's defaults (edit it; check it with "
                                   "`loopstate validate config .loopstate/config.json`) and add .loopstate/ to the "
                                   "project's .gitignore (once). An existing config is kept unless --force.")
    add_common(p)
    p.add_argument("--force", action="store_true", help="replace an existing config with the defaults")
    p.set_defaults(func=cmd_init)


def cmd_init(args: argparse.Namespace) -> int:
    from loopstate.service.project_init import init_project

    done = init_project(project_root(args), force=args.force)
    if args.json:
        emit_json(done)
        return 0
    print(f"{'replaced' if done['config_replaced'] else 'wrote'} {done['config']} (the defaults; check an edit with "
          f"`loopstate validate config {done['config']}`)")
    print(f"added .loopstate/ to {done['gitignore']}" if done["gitignore_added"]
          else f"{done['gitignore']} already ignores .loopstate/")
    return 0
