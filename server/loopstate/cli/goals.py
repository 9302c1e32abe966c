"""`loopstate goals ...`: todos and gates of a goal, its board, and its Markdown workbench.

A thin command-line layer: each verb builds one protocol command or query and hands it
to the service; every rule lives in the goals domain. Mutating verbs accept
--request-id (retry safely: the same id returns the first result) and
--event-id (re-appending an identical event is a no-op, a different body is
refused). A goal starts with its first event; a first command for a goal whose
name is one edit away from an existing goal's is refused until --new-goal
confirms it. Read verbs of a goal without events say so and list the goals;
they fold the stream from its snapshot checkpoint when there is a valid one.
"""

from __future__ import annotations

import argparse
import os
import sys
import typing
from typing import Any, Callable

import msgspec

from loopstate_protocol import goals as proto
from loopstate_protocol.errors import ErrorCode

from loopstate.cli.output import add_common, emit_json, project_root
from loopstate.core.errors import LoopstateError

EXIT_DIFFERENT = 1

DESCRIPTION = """\
Track a goal's todos and gates, and the runs, quota and evidence that belong to
it. Every verb that changes something appends one event to the goal's
append-only, hash-chained log in loopstate's store; `board` shows the current
state folded from that log, and `render` writes it as the Markdown workbench
ACTIVE_GOAL_STATE.md. Editing that file changes no state: `backfill` imports a
Markdown file as events, `bridge` lists how a file differs from the events.

A goal starts with its first event (`loopstate goals add GOAL TITLE`). A first
event for a goal whose name is one edit away from an existing goal's is refused
until --new-goal confirms it; reading a goal that has no events says so and
lists the project's goals. Verbs that change something take --request-id
(retry safely: the same id returns the first result) and --event-id
(re-appending an identical event is a no-op; a different body is refused).

--privacy sets the event's privacy class, which is printed in brackets after
each recorded event: public_safe (the default: no local path, credential, raw
log or private detail, refused otherwise), local_private (anything, kept out of
public boards) or private_pointer (carries a --pointer to private material).
"""


def _service(*, snapshots: bool = True):
    from loopstate.domains.goals import DOMAIN
    from loopstate.service.engine import Service

    return Service(domains=[DOMAIN], snapshots=snapshots)


# The roles a todo is for that need no declaring; any other is taken once declared with --new-role (or once
# a todo of the goal has it), so `--role agnet` is refused with the nearest role instead of filed apart.
ROLES = ("agent", "user", "owner", "operator", "controller", "reviewer")


def _role(args: argparse.Namespace) -> str | None:
    """``--role`` as given, refused when it is neither a usual role, nor one of the goal's, nor --new-role."""
    role = args.role
    if role is None or role in ROLES or args.new_role:
        return role
    from loopstate.service.front import goal_state

    try:
        used = {todo.role for todo in goal_state(project_root(args), args.goal).state.todos.values()}
    except LoopstateError:
        used = set()  # no such goal yet, or one the command itself will refuse: only the usual roles
    if role in used:
        return role
    import difflib

    near = difflib.get_close_matches(role, [*ROLES, *sorted(used)], n=1, cutoff=0.6)
    hint = f"did you mean {near[0]!r}? " if near else ""
    raise LoopstateError(ErrorCode.INVALID_PARAMS, f"--role {role!r} is not a role of goal {args.goal!r}: {hint}"
                         f"the usual roles are {', '.join(ROLES)}; to give it a new role, repeat with --new-role",
                         field="role", role=role)


def _pairs(values: list[str] | None, option: str) -> dict[str, str]:
    out = {}
    for item in values or []:
        key, sep, value = item.partition("=")
        if not sep or not key:
            raise LoopstateError(ErrorCode.INVALID_PARAMS, f"{option} takes key=value (e.g. {option} pr=41), got {item!r}")
        out[key] = value
    return out


def _envelope(parser: argparse.ArgumentParser) -> None:
    add_common(parser)
    group = parser.add_argument_group("event envelope")
    group.add_argument("--request-id", help="idempotency key of this mutation (default: a fresh id)")
    group.add_argument("--event-id", help="the event's stable id; re-appending the same event is a no-op")
    group.add_argument("--recorded-at", help="producer timestamp, ISO-8601 with offset (default: now)")
    group.add_argument("--producer", help="compact producer label (default: loopstate.goals)")
    group.add_argument("--privacy", choices=["public_safe", "local_private", "private_pointer"], default="public_safe")
    group.add_argument("--ref", action="append", metavar="KEY=ID", help="extra ref, e.g. parent_event_id=<id> or pr=123")
    group.add_argument("--new-goal", action="store_true",
                       help="confirm a new goal whose name is one edit away from an existing goal's")


def _common(args: argparse.Namespace) -> dict[str, Any]:
    return {
        "goal_id": args.goal, "event_id": args.event_id, "recorded_at": args.recorded_at,
        "producer": args.producer, "privacy": args.privacy, "refs": _pairs(args.ref, "--ref"),
        "new_goal": args.new_goal,
    }


def _outcome_json(request_id: str, outcome: Any) -> dict[str, Any]:
    return {"request_id": request_id, "events": outcome.events, "head": msgspec.to_builtins(outcome.head),
            "replayed": outcome.replayed, "no_op": not outcome.events}


def _print_outcome(args: argparse.Namespace, command: Any, outcome: Any) -> None:
    if not outcome.events:
        print(f"goal {args.goal}: no change: event {command.event_id or '(derived)'} is already recorded "
              f"identically (head {outcome.head.sequence})")
    for event in outcome.events:
        subject = " ".join(f"{k}={v}" for k, v in sorted(event["refs"].items()) if k in ("todo_id", "gate_id", "run_id", "evidence_id"))
        again = " (retry: first result)" if outcome.replayed else ""
        print(f"goal {args.goal}: {event['event_type']} {subject} at append_sequence {event['append_sequence']}"
              f" [{event['privacy']}]{again}".replace("  ", " "))


def _execute(args: argparse.Namespace, command: Any) -> int:
    """Run one command; with --render, then write the Markdown projection after its event."""
    from loopstate.core.ids import random_uuid

    service = _service()
    request_id = args.request_id or random_uuid()
    outcome = service.execute(project_root(args), command, request_id)
    result = _outcome_json(request_id, outcome)
    if not args.json:
        _print_outcome(args, command, outcome)
        if isinstance(command, proto.RenderMarkdown) and outcome.events:
            print(f"goal {args.goal}: wrote {command.target}")
    target = getattr(args, "render_after", None)
    if target is None:
        if args.json:
            emit_json(result)
        return 0
    render = proto.RenderMarkdown(goal_id=args.goal, target=target)
    render_id = random_uuid()
    try:
        rendered = service.execute(project_root(args), render, render_id)
    except LoopstateError as exc:
        # The first event is durable; say so, and why the projection was not written.
        if args.json:
            emit_json({**result, "render_error": exc.to_dict()})
        else:
            sys.stderr.write(f"loopstate: {exc.code.value}: the event was recorded, but {target} was not "
                             f"rendered: {exc.message}\n")
        return EXIT_DIFFERENT
    if args.json:
        emit_json({**result, "render": _outcome_json(render_id, rendered)})
    else:
        _print_outcome(args, render, rendered)
        print(f"goal {args.goal}: wrote {target}")
    return 0


def _verb(sub, name: str, help_text: str, build: Callable[[argparse.Namespace], Any], *args: tuple,
          renders: bool = True) -> argparse.ArgumentParser:
    parser = sub.add_parser(name, help=help_text, description=help_text)
    parser.add_argument("goal", help="goal id (letters, digits, '_' and '-')")
    for flags, options in args:
        parser.add_argument(*flags, **options)
    _envelope(parser)
    if renders:
        parser.add_argument("--render", dest="render_after", nargs="?", const="ACTIVE_GOAL_STATE.md", metavar="TARGET",
                            help="after the event, render the Markdown workbench (default ACTIVE_GOAL_STATE.md)")
    parser.set_defaults(func=lambda a: _execute(a, build(a)), build=build)
    return parser


def register(sub: argparse._SubParsersAction) -> None:
    goals = sub.add_parser("goals", help="todos and gates of a goal (an event stream) and its Markdown workbench",
                           description=DESCRIPTION, formatter_class=argparse.RawDescriptionHelpFormatter)
    verbs = goals.add_subparsers(dest="goals_command", metavar="VERB")
    from loopstate.cli.parser import group_verbs

    group_verbs(goals, "add board list claim update complete block defer gate resolve render",
                "run refresh quota evidence append compact backfill bridge", "for tools that record a goal's history")

    arg = lambda *flags, **options: (flags, options)  # noqa: E731 - a compact table of options
    priority = arg("--priority", choices=["P0", "P1", "P2", "P3", "P4"])
    meta = arg("--meta", action="append", metavar="KEY=VALUE", help="compact metadata (repeatable)")

    _verb(verbs, "add", "add a todo (todo_added)", lambda a: proto.AddTodo(
        **_common(a), title=a.title, todo_id=a.id, role=_role(a) or "agent", priority=a.priority or "P2",
        planner_order=a.order, metadata=_pairs(a.meta, "--meta"), details=a.details, pointer=a.pointer),
        arg("title"), arg("--id", help="todo id (default: the next T###)"), arg("--role", default="agent", help="who the todo is for (default agent; usual: " + ", ".join(ROLES) + ")"),
        arg("--new-role", action="store_true", help="declare a --role that is not a usual one and new to this goal"),
        priority, arg("--order", type=int, help="planner order among same-priority todos"), meta,
        arg("--details", help="private detail text (needs --privacy local_private)"),
        arg("--pointer", help="pointer to private material (needs --privacy private_pointer)"))
    _verb(verbs, "claim", "claim or renew a todo (todo_claimed)", lambda a: proto.ClaimTodo(
        **_common(a), todo_id=a.todo, claimed_by=a.by, lease_seconds=a.lease, note=a.note),
        arg("todo"), arg("--by", required=True, help="who claims it"),
        arg("--lease", type=int, metavar="SECONDS", help="lease length; others cannot claim it until then"),
        arg("--note"))
    _verb(verbs, "update", "update a todo's compact metadata (todo_updated)", lambda a: proto.UpdateTodo(
        **_common(a), todo_id=a.todo, title=a.title, role=_role(a), priority=a.priority, planner_order=a.order,
        metadata=_pairs(a.meta, "--meta") if a.meta else None, details=a.details, pointer=a.pointer),
        arg("todo"), arg("--title"), arg("--role"),
        arg("--new-role", action="store_true", help="declare a --role that is not a usual one and new to this goal"),
        priority, arg("--order", type=int), meta,
        arg("--details"), arg("--pointer"))
    _verb(verbs, "block", "mark a todo blocked (todo_blocked)", lambda a: proto.BlockTodo(
        **_common(a), todo_id=a.todo, reason=a.reason, gate_ids=a.gate or []),
        arg("todo"), arg("--reason", required=True, help="public-safe blocker reason"),
        arg("--gate", action="append", help="gate id that blocks it (repeatable)"))
    _verb(verbs, "defer", "defer a todo (todo_deferred)", lambda a: proto.DeferTodo(
        **_common(a), todo_id=a.todo, resume_when=a.resume_when, until=a.until),
        arg("todo"), arg("--resume-when", required=True, help="the resume condition"),
        arg("--until", help="resume time, ISO-8601 with offset"))
    _verb(verbs, "complete", "complete a todo (todo_completed); its gates must be resolved", lambda a: proto.CompleteTodo(
        **_common(a), todo_id=a.todo, rationale=a.rationale, validation_refs=a.validation or [],
        evidence_ids=a.evidence or []),
        arg("todo"), arg("--reason", "--rationale", dest="rationale", metavar="REASON", required=True, help="why it is done (one line)"),
        arg("--validation", action="append", help="validation ref"),
        arg("--evidence", action="append", help="evidence id"))
    _verb(verbs, "gate", "add a user/owner/operator/controller gate (gate_added)", lambda a: proto.AddGate(
        **_common(a), title=a.title, gate_kind=a.kind, gate_id=a.id, todo_id=a.todo, run_id=a.run),
        arg("title"), arg("--kind", choices=["user", "owner", "operator", "controller"], default="user"),
        arg("--id", help="gate id (default: the next G###)"),
        arg("--todo", help="todo whose completion waits for this gate"), arg("--run", help="run id it concerns"))
    _verb(verbs, "resolve", "approve, reject or defer a gate (gate_resolved)", lambda a: proto.ResolveGate(
        **_common(a), gate_id=a.gate, decision=a.decision, rationale=a.rationale, resolved_by=a.by),
        arg("gate"), arg("--decision", choices=["approve", "reject", "defer"], required=True),
        arg("--reason", "--rationale", dest="rationale", metavar="REASON", help="why this decision (one line)"), arg("--by"))
    _verb(verbs, "run", "record a run's status (run_recorded)", lambda a: proto.RecordRun(
        **_common(a), run_id=a.run_id, status=a.status, classification=a.classification,
        delivery_outcome=a.delivery, todo_id=a.todo, summary=a.summary, pointer=a.pointer),
        arg("run_id"), arg("--status", required=True), arg("--classification"), arg("--delivery"),
        arg("--todo"), arg("--summary"), arg("--pointer"))
    _verb(verbs, "refresh", "record a state refresh (refresh_recorded)", lambda a: proto.RecordRefresh(
        **_common(a), summary=a.summary, refresh_kind=a.kind, pointer=a.pointer),
        arg("summary"), arg("--kind", choices=["progress", "state_only"], default="progress"), arg("--pointer"))
    _verb(verbs, "quota", "record compute spend (quota_spent)", lambda a: proto.SpendQuota(
        **_common(a), amount=a.amount, unit=a.unit, category=a.category, quota_id=a.quota_id, run_id=a.run,
        todo_id=a.todo),
        arg("amount", type=float), arg("unit"), arg("--category", default="compute"), arg("--quota-id"),
        arg("--run"), arg("--todo"))
    _verb(verbs, "evidence", "attach evidence to a todo, gate or run (evidence_attached)", lambda a: proto.AttachEvidence(
        **_common(a), target_kind=a.target_kind, target_id=a.target_id, ref=a.evidence_ref, evidence_id=a.id,
        summary=a.summary, pointer=a.pointer),
        arg("target_kind", choices=["todo", "gate", "run"]), arg("target_id"),
        arg("evidence_ref", metavar="REF", help="compact evidence ref (PR, CI run, report id)"), arg("--id"),
        arg("--summary"), arg("--pointer"))
    _verb(verbs, "append", "append one lifecycle event in the raw goal-event shape, as a tool that already writes "
          "goal events sends it: event type and JSON payload",
          lambda a: proto.AppendEvent(**_common(a), event_type=a.event_type, payload=_payload(a.payload)),
          arg("event_type", choices=list(typing.get_args(proto.LifecycleEventType)), metavar="EVENT_TYPE",
              help="todo_added, todo_claimed, ..., evidence_attached"),
          arg("payload", help="the payload as a JSON object, or - to read it from stdin; e.g. for todo_added: "
              "'{\"todo_id\": \"T007\", \"title\": \"Write the docs\", \"priority\": \"P1\"}' (every event type's "
              "fields: docs/goals.md)"))
    _verb(verbs, "compact", "declare a snapshot checkpoint (snapshot_compacted); the event lineage stays",
          lambda a: proto.Compact(**_common(a)), renders=False)
    _verb(verbs, "backfill", "import todos and gates from ACTIVE_GOAL_STATE.md-style Markdown", lambda a: proto.Backfill(
        **_common(a), markdown=_read(a.file), source_label=a.source_label or os.path.basename(a.file)),
        arg("file"), arg("--source-label", help="label recorded in the source refs (default: the file name)"))

    render = _verb(verbs, "render", "write ACTIVE_GOAL_STATE.md (and record that it was rendered: projection_rendered)",
                   lambda a: proto.RenderMarkdown(**_common(a), target=a.output, public=a.public, force=a.force),
                   arg("--output", default="ACTIVE_GOAL_STATE.md", help="path relative to the project root"),
                   arg("--public", action="store_true", help="the redacted public view (required for files git tracks)"),
                   arg("--force", action="store_true", help="overwrite a hand-edited or foreign file"),
                   arg("--check", action="store_true", help="only say whether the file is current (exit 1 if not)"),
                   arg("--stdout", action="store_true", help="print the Markdown; write and record nothing"),
                   renders=False)
    render.set_defaults(func=cmd_render)

    board = verbs.add_parser(
        "board", help="the goal's current state: todos by role and priority, gates, runs, quota (one page at a time)",
        description="The goal's board, one page at a time: the active todos and the ten newest completed ones "
                    "first, then older completed todos on the pages --cursor continues to. A line at the end says "
                    "what the page left out and how to see it.")
    board.add_argument("goal")
    board.add_argument("--public", action="store_true", help="the redacted public board")
    board.add_argument("--limit", type=int, default=proto.BOARD_LIMIT, metavar="N",
                       help=f"todos on the page (default {proto.BOARD_LIMIT}, at most {proto.MAX_BOARD_LIMIT})")
    board.add_argument("--cursor", metavar="CURSOR", help="continue after the page that gave this next cursor")
    board.add_argument("--all", action="store_true", help="the whole board in one answer (every todo)")
    board.add_argument("--no-snapshot", action="store_true", help="replay from the first event")
    add_common(board)
    board.set_defaults(func=cmd_board)

    bridge = verbs.add_parser("bridge", help="compare the goal's events with a Markdown file (exit 1 if they differ)")
    bridge.add_argument("goal")
    bridge.add_argument("file", nargs="?", default=None, help="Markdown file (default: ACTIVE_GOAL_STATE.md in the root)")
    bridge.add_argument("--public", action="store_true", help="compare with the public board")
    add_common(bridge)
    bridge.set_defaults(func=cmd_bridge)

    listing = verbs.add_parser("list", help="the goals of this project (those with at least one event)")
    add_common(listing)
    listing.set_defaults(func=cmd_list)


def _payload(text: str) -> dict[str, Any]:
    """A JSON object from the argument, or from stdin for ``-``."""
    import json

    from loopstate.core.nesting import decoded_text

    raw = sys.stdin.read() if text == "-" else text
    try:
        value = decoded_text(lambda: json.loads(raw), "payload")
    except ValueError as exc:
        raise LoopstateError(ErrorCode.INVALID_PARAMS, f"the payload is not JSON ({exc}); give an object such as "
                             '\'{"todo_id": "T001", "title": "..."}\'') from None
    if not isinstance(value, dict):
        raise LoopstateError(ErrorCode.INVALID_PARAMS, "the payload must be a JSON object of the event type's fields")
    return value


def _read(path: str) -> str:
    try:
        with open(path, encoding="utf-8") as handle:
            return handle.read()
    except FileNotFoundError:
        raise LoopstateError(ErrorCode.NOT_FOUND, f"{path} does not exist; check the path (`loopstate goals render` "
                             "writes the workbench, ACTIVE_GOAL_STATE.md by default)") from None
    except (OSError, UnicodeDecodeError) as exc:
        raise LoopstateError(ErrorCode.VALIDATION_FAILED, f"cannot read {path}: {exc}; give a readable UTF-8 text file") from None


def cmd_render(args: argparse.Namespace) -> int:
    from loopstate.service.front import markdown_status

    root = project_root(args)
    if args.check:
        status = markdown_status(_service(), root, args.goal, args.output)
        if args.json:
            emit_json(msgspec.to_builtins(status))
        else:
            print(f"{args.output}: {status.message}")
        return 0 if status.status == "current" else EXIT_DIFFERENT
    if args.stdout:
        result = _service().query(root, proto.PreviewMarkdown(goal_id=args.goal, public=args.public))
        if args.json:
            emit_json(msgspec.to_builtins(result))
        else:
            sys.stdout.write(result.text)
        return 0
    return _execute(args, args.build(args))


def cmd_board(args: argparse.Namespace) -> int:
    if args.all and args.cursor:
        raise LoopstateError(ErrorCode.INVALID_PARAMS, "--all shows the whole board; leave out --cursor (or --all)")
    query = proto.GetBoard(goal_id=args.goal, public=args.public, limit=None if args.all else args.limit,
                           cursor=args.cursor)
    board = _service(snapshots=not args.no_snapshot).query(project_root(args), query)
    if args.json:
        emit_json(msgspec.to_builtins(board))
    else:
        print_board(board)
        print(page_line(board.page, args.goal, public=args.public))
    return 0


def page_line(page: proto.BoardPage, goal: str, *, public: bool) -> str:
    """What the page showed of the goal's todos, what it left out, and how to see the rest."""
    total = page.active_total + page.completed_total
    shown = total - page.before - page.after
    counts = ", ".join(f"{n} {status}" for status, n in page.status_counts.items()) or "none"
    where = f"todos {page.before + 1}-{page.before + shown} of {total}" if shown else f"no todos of {total}"
    line = f"\nShown: {where} ({counts})."
    if page.after:
        flags = " --public" if public else ""
        line += (f" {page.after} more: `loopstate goals board {goal}{flags} --cursor {page.next_cursor}`"
                 f" (or --all for every todo).")
    return line


def cmd_bridge(args: argparse.Namespace) -> int:
    root = project_root(args)
    path = args.file or os.path.join(root, "ACTIVE_GOAL_STATE.md")
    report = _service().query(root, proto.BridgeMarkdown(goal_id=args.goal, markdown=_read(path), public=args.public))
    if args.json:
        emit_json(msgspec.to_builtins(report))
    else:
        print(f"goal {args.goal} vs {path}: {report.events_todos} todos / {report.events_gates} gates in events, "
              f"{report.markdown_todos} / {report.markdown_gates} in Markdown")
        for d in report.differences:
            where = f"line {d.line}: " if d.line else ""
            detail = f" {d.field}: events={d.events_value!r} markdown={d.markdown_value!r}" if d.field else (
                f" {d.markdown_value or d.events_value!r}" if (d.markdown_value or d.events_value) else "")
            print(f"  {where}{d.kind} {d.subject}{detail}")
        print("clean: no differences" if report.clean else f"{len(report.differences)} difference(s)")
    return 0 if report.clean else EXIT_DIFFERENT


def cmd_list(args: argparse.Namespace) -> int:
    from loopstate_protocol.project import ProjectGoals

    goals = [goal.goal_id for goal in _service().query(project_root(args), ProjectGoals()).goals]
    if args.json:
        emit_json({"goals": goals})
    else:
        print("\n".join(goals) if goals else "no goals yet")
    return 0


# Human tables ----------------------------------------------------------------------------------------------


def _table(rows: list[list[str]], header: list[str], status: str | None = None) -> list[str]:
    """The table's lines; ``status`` (a palette kind) paints the STATUS column's values on a terminal."""
    from loopstate.cli.terminal import painted

    widths = [max(len(str(r[i])) for r in [header, *rows]) for i in range(len(header))]
    at = header.index("STATUS") if status is not None and "STATUS" in header else None

    def line(row: list[str], heading: bool) -> str:
        return "  " + "  ".join(painted(str(c), status, w) if i == at and status and not heading else str(c).ljust(w)
                                for i, (c, w) in enumerate(zip(row, widths))).rstrip()

    return [line(header, True)] + [line(row, False) for row in rows]


def _note(todo: proto.TodoView) -> str:
    parts = []
    if todo.claimed_by:
        parts.append(f"by {todo.claimed_by}" + (f" until {todo.lease_expires_at}" if todo.lease_expires_at else ""))
    if todo.blocker_reason:
        parts.append(f"blocked: {todo.blocker_reason}")
    if todo.open_gate_ids:
        parts.append("waits for " + ", ".join(todo.open_gate_ids))
    if todo.resume_when:
        parts.append(f"resume when {todo.resume_when}")
    if todo.rationale:
        parts.append(todo.rationale)
    return "; ".join(parts)


def print_board(board: proto.Board) -> None:
    from loopstate.cli.terminal import paint

    m = board.meta
    checksum = (m.source_checksum or "-")[:19]
    print(f"goal {m.goal_id}: {m.source_event_count} lifecycle events, last_append_sequence "
          f"{m.last_append_sequence} (store {m.store_sequence}), {checksum}..., {m.privacy}")
    rows = [[g.role, t.priority, t.todo_id, t.status, t.title, _note(t)] for g in board.active for t in g.todos]
    print("\nActive todos" if rows else "\nActive todos: none")
    if rows:
        print("\n".join(_table(rows, ["ROLE", "PRI", "ID", "STATUS", "TITLE", "NOTE"], "todo")))
    if board.completed:
        print(f"\nCompleted, newest first ({len(board.completed)} of {board.page.completed_total} on this page)")
        print("\n".join(_table([[t.role, t.priority, t.todo_id, t.title, _note(t)] for t in board.completed],
                               ["ROLE", "PRI", "ID", "TITLE", "RATIONALE"])))
    if board.archive_candidates:
        print(f"\nArchive candidates (older completed todos: {len(board.archive_candidates)} on this page)")
        print("\n".join(_table([[t.role, t.priority, t.todo_id, t.title] for t in board.archive_candidates],
                               ["ROLE", "PRI", "ID", "TITLE"])))
    for title, gates, kind in (("User inbox", board.user_inbox, "user_gate"),
                               ("Controller inbox", board.controller_inbox, "gate")):
        if gates:
            waiting = sum(g.status == "open" for g in gates)
            print(f"\n{title}" + (f" ({paint(f'{waiting} waiting for you', 'attention')})"
                                  if kind == "user_gate" and waiting else ""))
            print("\n".join(_table([[g.gate_id, g.gate_kind, g.status, g.title, g.todo_id or "", g.run_id or ""]
                                    for g in gates], ["ID", "KIND", "STATUS", "TITLE", "TODO", "RUN"], kind)))
    if board.runs:
        print(f"\nRuns ({board.run_count} recorded)")
        print("\n".join(_table([[r.run_id, r.status, r.classification or "", r.delivery_outcome or "", r.recorded_at]
                                for r in board.runs], ["RUN", "STATUS", "CLASS", "DELIVERY", "RECORDED"], "run")))
    if board.quota:
        print("\nQuota")
        print("\n".join(_table([[q.unit, q.category, f"{q.amount:g}", str(q.entries)] for q in board.quota],
                               ["UNIT", "CATEGORY", "AMOUNT", "ENTRIES"])))
    if board.omissions:
        print(f"\n{len(board.omissions)} omission note(s); see --json")
