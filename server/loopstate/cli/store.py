"""`loopstate verify`, `recover`, `log` and `store export|import`: the store-level commands every domain shares.

They work on raw streams with each domain's chain layout, so they keep working
when a domain's projection cannot be built (that is when they are needed).
``verify`` and ``log`` ask the service (``project.verify``, ``project.log``, the
answers the sidecar gives an editor); ``recover`` rewrites streams itself, under
each stream's exclusive lock, or on a shared store has the store cut them back. ``store export`` and ``store import`` copy the
project's streams between two stores (service/store_copy.py): the local data
dir and a team's shared PostgreSQL, or two data dirs.
"""

from __future__ import annotations

import argparse
import sys
from typing import TYPE_CHECKING, Any

from loopstate_protocol.errors import ErrorCode

from loopstate.cli.output import add_common, emit_json, progress_printer, project_root
from loopstate.core.errors import LoopstateError
from loopstate.core.project import Project
from loopstate.core.recovery import plan_recovery, recover_stream
from loopstate.core.stream import Stream
from loopstate.service.front import stream_layout

if TYPE_CHECKING:
    from loopstate.core.backend import Store


def register(sub: argparse._SubParsersAction) -> None:
    verify = sub.add_parser("verify", help="check every stream's hash chain from the first byte")
    add_common(verify)
    verify.add_argument("--against", metavar="CHECKPOINT_FILE",
                        help="check that the stream a kept checkpoint names still begins with what it signed")
    verify.set_defaults(func=cmd_verify)

    recover = sub.add_parser(
        "recover", help="keep each damaged stream's verified prefix and move the damaged suffix to quarantine",
        description="Keep each damaged stream's verified prefix and move the damaged suffix, byte for byte, to "
        "the quarantine folder (a partial final line is cut, its length and SHA-256 kept). A stream whose first "
        "record is damaged would keep 0 events: recover asks before cutting it (on a terminal), or refuses "
        "without --yes. --dry-run shows what would be kept and quarantined and writes nothing.",
    )
    add_common(recover)
    recover.add_argument("--export", metavar="DIR", help="also copy each verified prefix into DIR")
    recover.add_argument("--dry-run", action="store_true", help="say what would be kept and quarantined; write nothing")
    recover.add_argument("--yes", action="store_true", help="cut a stream to 0 events without asking")
    recover.set_defaults(func=cmd_recover)

    log = sub.add_parser("log", help="print the events of every stream in order")
    add_common(log)
    log.add_argument("--stream", help="only this stream (e.g. intent, runs.<id>, goals.<id>)")
    log.add_argument("--limit", type=_positive, metavar="N",
                     help="only the last N events of each stream (still printed oldest first)")
    log.set_defaults(func=cmd_log)


    store = sub.add_parser(
        "store", help="copy this project's streams to or from another store (a data dir, or PostgreSQL)",
        description="Copy this project's streams between its store (the one in use: LOOPSTATE_STORE, else the "
        "committed .loopstate/store.json, else the local data dir) and another one, named by a store URL "
        "(postgresql://HOST/DATABASE) or a data dir's path. Every byte is kept, so each event keeps its hash; "
        "both chains are verified; a second copy adds nothing; a target with a different history is refused "
        "before anything is written.")
    verbs = store.add_subparsers(dest="store_command", metavar="VERB")
    export = verbs.add_parser("export", help="copy this project's streams into another store",
                              description="Copy this project's streams from the store in use into TARGET.")
    export.add_argument("--to", required=True, metavar="TARGET", help="a store URL, or a data dir's path")
    add_common(export)
    export.set_defaults(func=cmd_store_copy, direction="export")
    imported = verbs.add_parser("import", help="copy this project's streams from another store into this one",
                                description="Copy this project's streams from SOURCE into the store in use.")
    imported.add_argument("--from", dest="source", required=True, metavar="SOURCE",
                          help="a store URL, or a data dir's path")
    add_common(imported)
    imported.set_defaults(func=cmd_store_copy, direction="import")


def _positive(text: str) -> int:
    try:
        value = int(text)
    except ValueError:
        value = 0
    if value < 1:
        raise argparse.ArgumentTypeError(f"{text!r} is not a whole number of events, 1 or more")
    return value


def _project(args: argparse.Namespace) -> Project:
    return Project(project_root(args))


def _service():
    from loopstate.service.engine import Service

    return Service()


def cmd_verify(args: argparse.Namespace) -> int:
    if args.against is not None:
        from loopstate.cli.transparency import verify_against

        return verify_against(args)
    from loopstate_protocol.project import ProjectVerify

    project = _project(args)
    verified = _service().query(project.root, ProjectVerify(), progress=progress_printer)
    reports = verified.streams
    ok = verified.ok
    if args.json:
        emit_json(verified)
    else:
        from loopstate.cli.terminal import paint

        if not reports:
            print(f"no streams yet for {project.root}")
        for r in reports:  # StreamReport Structs: a default (0 events) is left out of the JSON, not of these
            if r.ok:
                line = f"{paint('ok', 'green')}      {r.stream}: {r.events} events, head {r.sequence} {str(r.hash)[:12]}"
                if r.torn_tail is not None:
                    t = r.torn_tail
                    line += f" (partial final line of {t.length} bytes at byte {t.offset}: the next mutation quarantines it)"
                print(line)
            else:
                e = r.error
                assert e is not None
                print(
                    f"{paint('CORRUPT', 'red')} {r.stream}: byte {e.offset}, sequence {e.sequence}: {e.reason}"
                    f" ({r.events} events verified before it; `loopstate recover` keeps them)"
                )
    return 0 if ok else 1


def cmd_recover(args: argparse.Namespace) -> int:
    project = _project(args)
    from loopstate.service.transparency import shared_store

    store = shared_store(project)
    if store is not None:
        return _recover_in_store(args, project, store)
    if args.dry_run:
        return _recover_dry_run(args, project)
    results = [_recover(project, name, args.export, allow_empty=args.yes) for name in project.stream_names()]
    pending = [r for r in results if r["action"] == "needs_confirmation"]
    if pending:
        _confirm_empty(pending)
        confirmed = {r["stream"]: _recover(project, r["stream"], args.export, allow_empty=True) for r in pending}
        results = [confirmed.get(r["stream"], r) for r in results]
    return _show_results(args, project, results)


def _recover_in_store(args: argparse.Namespace, project: Project, store: "Store") -> int:
    """``recover`` on a shared store (a team's PostgreSQL): each damaged stream is cut back to its verified
    prefix by the store itself (``Recovers``: the later rows move to the store's quarantine, in one
    transaction under the stream's lock), with the same dry run and the same question before a stream
    would be left with nothing."""
    from loopstate.core.backend import Recovers

    if not isinstance(store, Recovers):
        raise LoopstateError(ErrorCode.INVALID_PARAMS, f"the store {store.url} cannot cut a stream back to its "
                             "verified prefix; `loopstate verify` says where each stream is damaged", store=store.url)
    recovers: Recovers = store
    if args.export:
        raise LoopstateError(ErrorCode.INVALID_PARAMS, "--export copies the verified prefixes of a store of files; "
                             f"on the shared store {store.url}, recover first, then `loopstate store export --to "
                             "DIR` copies the verified streams into a data dir", store=store.url)
    plans = [_store_plan(recovers.verify_stream(name, stream_layout(name))) for name in store.stream_names()]
    if args.dry_run:
        return _show_plans(args, project, plans)
    empty = [p for p in plans if p["action"] == "recover" and p["events"] == 0]
    if empty and not args.yes:
        _confirm_empty(empty)
    return _show_results(args, project, [
        p if p["action"] == "none" else recovers.recover_stream(p["stream"], stream_layout(p["stream"])) for p in plans])


def _show_results(args: argparse.Namespace, project: Project, results: list[dict[str, Any]]) -> int:
    """What recover did with each stream."""
    if args.json:
        emit_json({"project_id": project.project_id, "streams": results})
        return 0
    for r in results:
        print(_recovery_line(r, planned=False))
    return 0


def _store_plan(report: dict[str, Any]) -> dict[str, Any]:
    """What recover would do with a stream, from a store's verify report."""
    if report["ok"]:
        return {"stream": report["stream"], "action": "none", "events": report["events"]}
    error = report["error"]
    return {"stream": report["stream"], "action": "recover", "events": report["sequence"], "reason": error["reason"],
            "offset": error["offset"], "suffix": f"every event after sequence {report['sequence']}"}


def _recovery_line(r: dict[str, Any], *, planned: bool) -> str:
    """One stream's recovery, done or (with ``planned``) what a dry run found would be done."""
    name, events = r["stream"], r["events"]
    width = 13 if planned else 9  # the labels' longest: "would recover", "recovered"
    if r["action"] == "none":
        return f"{'ok':<{width}} {name}: chain holds ({events} events)" + ("; nothing to do" if planned else "")
    if "quarantined_events" in r:  # done by a shared store
        return (f"{'recovered':<{width}} {name}: kept {events} verified events; moved {r['quarantined_events']} "
                f"later event(s) to the store's quarantine ({r['reason']})")
    if "suffix" in r:  # planned on a shared store
        ask = "; recover asks first, since nothing would be left" if events == 0 else ""
        return (f"{'would recover':<{width}} {name}: keep {events} verified events; quarantine {r['suffix']} "
                f"({r['reason']}){ask}")
    if r["action"] == "cut_torn_tail":
        return (f"{'would repair' if planned else 'repaired':<{width}} {name}: cut a partial final line of "
                f"{r['suffix_bytes']} bytes at byte {r['offset']} (length and SHA-256 kept in quarantine)")
    if planned:
        ask = "; recover asks first, since nothing would be left" if events == 0 else ""
        return (f"{'would recover':<{width}} {name}: keep {events} verified events; quarantine {r['suffix_bytes']} "
                f"bytes from byte {r['offset']} ({r['reason']}){ask}")
    return (f"{'recovered':<{width}} {name}: kept {events} verified events; moved {r['suffix_bytes']} bytes from byte "
            f"{r['offset']} to {r['quarantined_to']}"
            + (f"; exported prefix to {r['exported_to']}" if r.get("exported_to") else ""))


def _recover(project: Project, name: str, export: str | None, *, allow_empty: bool) -> dict[str, Any]:
    stream = Stream(project.dir, name, stream_layout(name))
    with project.lock(name).exclusive():
        return recover_stream(project, stream, export_dir=export, allow_empty=allow_empty)


def _confirm_empty(pending: list[dict[str, Any]]) -> None:
    """Ask before a stream is cut to nothing; without a terminal to ask on, refuse (--yes skips this)."""
    names = ", ".join(r["stream"] for r in pending)
    for r in pending:
        moved = r["suffix"] if "suffix" in r else f"all {r['suffix_bytes']} bytes"
        sys.stderr.write(f"loopstate: recover would keep 0 events of {r['stream']}: its first record is damaged "
                         f"({r['reason']}); {moved} would move to quarantine\n")
    if not sys.stdin.isatty():
        raise LoopstateError(ErrorCode.INVALID_PARAMS, f"not cutting {names} to 0 events without confirmation; "
                             "see `loopstate recover --dry-run`, then run again with --yes")
    sys.stderr.write(f"Cut {names} to 0 events? [y/N] ")
    sys.stderr.flush()
    if sys.stdin.readline().strip().lower() not in ("y", "yes"):
        raise LoopstateError(ErrorCode.INVALID_PARAMS, f"not confirmed: {names} left as they are")


def _recover_dry_run(args: argparse.Namespace, project: Project) -> int:
    plans = []
    for name in project.stream_names():
        stream = Stream(project.dir, name, stream_layout(name))
        with project.lock(name).shared():
            plans.append(plan_recovery(stream))
    return _show_plans(args, project, plans)


def _show_plans(args: argparse.Namespace, project: Project, plans: list[dict[str, Any]]) -> int:
    """A dry run's answer: what recover would do with each stream, nothing written."""
    if args.json:
        emit_json({"project_id": project.project_id, "dry_run": True, "streams": plans})
        return 0
    if not plans:
        print(f"no streams yet for {project.root}")
    for plan in plans:
        print(_recovery_line(plan, planned=True))
    print("dry run: nothing was written")
    return 0


def _summary(event: dict[str, Any]) -> tuple[str, str]:
    kind = event.get("event_type") or event.get("type") or "?"
    at = event.get("occurred_at") or event.get("at") or event.get("recorded_at") or ""
    if kind == "current_task_set":  # how the task became current (resumed, or migrated from an old store)
        kind = f"{kind} ({(event.get('payload') or {}).get('reason')})"
    return str(kind), str(at)


def cmd_log(args: argparse.Namespace) -> int:
    from loopstate_protocol.project import MAX_LOG_LIMIT, ProjectLog

    project = _project(args)
    from loopstate.core.stores import open_store

    known = open_store(project).stream_names()  # the project's store: this machine's files, or a shared one
    names = [args.stream] if args.stream else known
    if args.stream and args.stream not in known:
        raise LoopstateError(ErrorCode.NOT_FOUND, f"no stream {args.stream!r} in this project; `loopstate log` lists them")
    service = _service()
    out = []
    for name in names:
        layout = stream_layout(name)
        seq_field, hash_field = layout.sequence_field, layout.hash_field
        if args.limit is None:  # every event, page by page
            page = service.query(project.root, ProjectLog(stream=name, limit=MAX_LOG_LIMIT))
            events = page.events
            while page.next_after is not None:
                page = service.query(project.root, ProjectLog(stream=name, after=page.next_after, limit=MAX_LOG_LIMIT))
                events += page.events
        else:
            page = service.query(project.root, ProjectLog(stream=name, limit=min(args.limit, MAX_LOG_LIMIT), tail=True))
            events = page.events
            while len(events) < args.limit and page.next_before is not None:
                page = service.query(project.root, ProjectLog(stream=name, before=page.next_before,
                                                              limit=min(args.limit - len(events), MAX_LOG_LIMIT),
                                                              tail=True))
                events = page.events + events
        head, total = page.head, page.event_count
        if args.json:
            out.append({"stream": name, "head": {"sequence": head.sequence, "hash": head.hash},
                        "event_count": total, "events": events})
            continue
        shown = "" if len(events) == total else f", the last {len(events)} of {total} events"
        print(f"== {name} (head {head.sequence} {str(head.hash)[:12]}{shown})")
        for event in events:
            kind, at = _summary(event)
            print(f"{event[seq_field]:>6}  {at:<27}  {kind:<24}  {event[hash_field][:12]}")
        sys.stdout.flush()
    if args.json:
        emit_json({"project_id": project.project_id, "streams": out})
    return 0


def _other_store(project: Project, where: str, here: Any, *, option: str):
    """The store ``where`` (given as ``option``: ``--to`` or ``--from``) names for this project: a URL with
    a scheme, else a data dir's path (JSONL); never the store ``here`` itself (the project's data dir while
    its store is the local one). A source data dir must exist: a mistyped path is not an empty store."""
    import os
    import re
    from pathlib import Path

    from loopstate.core.stores import opener_for

    if not where.strip():
        raise LoopstateError(ErrorCode.INVALID_PARAMS, f"{option} is empty: name a store URL "
                             "(postgresql://HOST[:PORT]/DATABASE) or a data dir's path")
    if re.match(r"^[A-Za-z][A-Za-z0-9+.-]+:", where):  # a scheme (two letters or more: not a drive letter)
        return opener_for(where)(where, Project(project.root))
    folder = Path(os.path.abspath(os.path.expanduser(where)))
    if option == "--from" and not folder.is_dir():
        raise LoopstateError(ErrorCode.NOT_FOUND, f"--from {where}: no data dir there ({folder} "
                             f"{'is not a folder' if folder.exists() else 'does not exist'}); name a data dir, the "
                             "folder that holds projects/ (`loopstate root --json` shows this machine's project "
                             "folder, DATA_DIR/projects/ID, as store)", path=str(folder))
    other = Project(project.root, data_dir=folder)
    if other.data_dir == project.data_dir and here.url.split(":", 1)[0] in ("jsonl", "file"):
        raise LoopstateError(ErrorCode.INVALID_PARAMS, f"{where} is this project's own data dir; name another store")
    return opener_for("jsonl:")("jsonl:", other)


def _copy_progress(direction: str):
    if not sys.stderr.isatty():
        return None

    def show(stream: str, done: int, total: int) -> None:
        sys.stderr.write(f"\r{direction}: {stream}: {done}/{total} events")
        if done >= total:
            sys.stderr.write("\n")
        sys.stderr.flush()

    return show


def cmd_store_copy(args: argparse.Namespace) -> int:
    from loopstate.core.stores import open_store
    from loopstate.service.store_copy import copy_project, summary, where

    project = _project(args)
    here = open_store(project)
    exporting = args.direction == "export"
    other = _other_store(project, args.to if exporting else args.source, here, option="--to" if exporting else "--from")
    source, target = (here, other) if args.direction == "export" else (other, here)
    try:
        copies = copy_project(source, target, progress=_copy_progress(args.direction))
    finally:
        other.close()
    if args.json:
        emit_json({"project_id": project.project_id, "source": where(source), "target": where(target),
                   **summary(copies)})
        return 0
    if not copies:
        print(f"no streams in {where(source)} for project {project.project_id[:12]}: nothing to copy")
    for c in copies:
        if c.action == "copied":
            print(f"copied  {c.stream}: {c.copied} events ({c.target_head_before} -> {c.target_head}), chain verified")
        elif c.action == "up_to_date":
            print(f"ok      {c.stream}: the target already holds all {c.source_head} events")
        else:
            print(f"ahead   {c.stream}: the target holds {c.target_head} events, the source {c.source_head} of the same "
                  "history; left as it is")
    print(f"{where(source)} -> {where(target)}: {sum(c.copied for c in copies)} events copied")
    return 0
