"""`loopstate init`: the project's runs config with loopstate's defaults, `.loopstate/` ignored by git, and for a
team the committed store file that gives every clone one project id and store."""

from __future__ import annotations

import argparse

from loopstate.cli.output import add_common, emit_json, project_root


def register(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("init", help="write .loopstate/config.json with the defaults and ignore .loopstate/ in git",
                       description="Write .loopstate/config.json with loopstate's defaults (edit it; check it with "
                                   "`loopstate validate config .loopstate/config.json`) and add .loopstate/ to the "
                                   "project's .gitignore (once). An existing config is kept unless --force. "
                                   "With --store URL (a team's shared PostgreSQL store) or --share-id, also write "
                                   ".loopstate/store.json, the file the team commits so every clone on every "
                                   "machine is one project: the store URL and the project id, never a password "
                                   "(each machine gives PGUSER and ~/.pgpass or PGPASSFILE).")
    add_common(p)
    p.add_argument("--force", action="store_true",
                   help="replace an existing config with the defaults (and the store an existing store file names)")
    p.add_argument("--store", metavar="URL",
                   help="the team's shared store, postgresql://[USER@]HOST[:PORT]/DATABASE (never a password)")
    p.add_argument("--share-id", action="store_true",
                   help="write the store file with the project id and the store jsonl: (every clone one project, "
                        "each machine its own local store; move state with `loopstate store export` / `import`)")
    p.set_defaults(func=cmd_init)


def cmd_init(args: argparse.Namespace) -> int:
    from loopstate.service.project_init import init_project

    done = init_project(project_root(args), force=args.force, store=args.store, share_id=args.share_id)
    if args.json:
        emit_json(done)
        return 0
    if done["config_kept"]:
        print(f"kept {done['config']} (pass --force to replace it with the defaults)")
    else:
        print(f"{'replaced' if done['config_replaced'] else 'wrote'} {done['config']} (the defaults; check an edit "
              f"with `loopstate validate config {done['config']}`)")
    if "store_file" in done:
        where = ("the store jsonl: (each machine its own data dir)" if done["store"] == "jsonl:"
                 else f"the store {done['store']}")
        print(f"{done['store_file_action']} {done['store_file']}: project {done['project_id']}, {where}; "
              "commit it, so every clone is this project")
        print(f"{done['gitignore']} now ignores .loopstate/ but the store file" if done["gitignore_added"]
              else f"{done['gitignore']} already ignores .loopstate/ but the store file")
        if done["store_problem"]:
            print(f"note: the store does not answer yet: {done['store_problem']} (`loopstate doctor` asks again)")
        if done["store"] != "jsonl:" and done["local_streams"]:
            print(f"this machine's data dir holds {done['local_streams']} stream(s) of the project: copy them into "
                  f"the shared store with `loopstate store import --from {done['data_dir']}`")
        return 0
    print(f"added .loopstate/ to {done['gitignore']}" if done["gitignore_added"]
          else f"{done['gitignore']} already ignores .loopstate/")
    return 0
