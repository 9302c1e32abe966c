"""`loopstate intent ...`: the claims ledger from a terminal (human tables, or --json).

Every verb builds one protocol command or query and hands it to the same
Service the sidecar uses; no rule lives here. Private mode is refused: a CLI
process exits at once, and private events live only in a serving process's
memory (use the sidecar, `loopstate serve`). Recovery of a private session's
control (`intent recover`) works from here.
"""

from __future__ import annotations

import argparse
import sys
from typing import Any, Union

import msgspec

from loopstate_protocol.intent import ACTORS, AUDIT_PAGE, FACETS, SCOPES, SNAPSHOT_PAGE, STATUSES
from loopstate_protocol.intent import SOURCE_KINDS as ALL_SOURCE_KINDS

from loopstate.cli.output import add_common, emit_json, project_root

# explicit_import is set by the server on import; a caller never names it.
SOURCE_KINDS = tuple(kind for kind in ALL_SOURCE_KINDS if kind != "explicit_import")
TASK_HELP = "task id or a unique prefix (`loopstate intent tasks` lists them)"
CLAIM_HELP = "claim id or a unique prefix of an active claim (`loopstate intent show` lists them)"
CLAIMS_JSON_EXAMPLE = """\
--claims-json FILE: a JSON list of claim objects, each with
  statement         one atomic statement (1-500 characters)
  role              "user" (initial claims are the user's own)
  epistemic_status  "explicit"
  facets            a list of: outcome success_signal failure_signal hard_constraint
                    soft_constraint tradeoff unknown result_feedback disagreement
  scope             optional: "task" (default), "project" or "long_term"
  valid_from        optional: RFC 3339 UTC time (default now)

example:
  cat > claims.json <<'EOF'
  [{"statement": "Keep the public API", "role": "user", "epistemic_status": "explicit",
    "facets": ["hard_constraint"]},
   {"statement": "Checkout answers in under 2 s", "role": "user", "epistemic_status": "explicit",
    "facets": ["success_signal"], "scope": "project"}]
  EOF
  loopstate intent start --label checkout --claims-json claims.json
"""
EXEC_EXAMPLE = """\
COMMAND_JSON: one intent command as the sidecar's loopstate/execute takes it: its "kind" (intent.task_start,
intent.claim_add, intent.claim_replace, intent.claim_invalidate, ...) and its fields, listed per kind in
docs/protocol.md and `loopstate schema`.

example:
  loopstate intent exec '{"kind": "intent.claim_add", "task_id": "TASK_ID", "actor": "agent",
    "claim": {"statement": "Prefers small diffs", "role": "agent", "epistemic_status": "inferred",
              "facets": ["soft_constraint"], "confidence": 0.6}}'
"""
IMPORT_EXAMPLE = """\
FILE: a claim graph exactly as `loopstate intent export` writes it ({"tasks": [...], "claims": [...], ...}).

example:
  loopstate intent export --output graph.json     # in one project
  loopstate intent import graph.json              # in another: fresh ids, explicit_import provenance
"""
CLAIM_SYNTAX = (
    "a user-explicit initial claim; repeatable. A single word (letters, digits, '_' or '-') before the first "
    "colon names its facet and must be one: hard_constraint:Keep the API. Without such a word the whole text is "
    "an outcome ('Fix bug: the parser' is one); to keep a leading word and colon in an outcome, write outcome:Note: ..."
)


_SERVICE: list[Any] = []


def _service():
    """One Service per command: resolving an id prefix and the command it is for share one fold."""
    if not _SERVICE:
        from loopstate.domains.intent import DOMAIN
        from loopstate.service import Service

        _SERVICE.append(Service(domains=[DOMAIN]))
    return _SERVICE[0]


def _task(args: argparse.Namespace, given: str | None) -> str | None:
    """A task id as the user gave it (any unique prefix, as the run verbs take run ids), in full."""
    if given is None:
        return None
    from loopstate.service.intent_ids import resolve_task

    return resolve_task(_service(), project_root(args), given)


def _claim(args: argparse.Namespace, given: str, task_id: str | None) -> str:
    """A claim id as the user gave it (any unique prefix of an active claim the task's view shows), in full."""
    from loopstate.service.intent_ids import resolve_claim

    return resolve_claim(_service(), project_root(args), given, task_id)


def _request_id(args: argparse.Namespace) -> str:
    if args.request_id:
        return args.request_id
    from loopstate.core.ids import random_uuid

    return "cli-" + random_uuid()


def _execute(args: argparse.Namespace, command: Any) -> Any:
    outcome = _service().execute(project_root(args), command, _request_id(args))
    if args.json:
        emit_json({"events": outcome.events, "head": outcome.head, "replayed": outcome.replayed})
    else:
        note = " (exact retry: nothing new written)" if outcome.replayed else ""
        if not outcome.events:
            print(f"done{note}; head at sequence {outcome.head.sequence}")
        for event in outcome.events:
            print(f"{event['event_type']}: {_describe(event)}{note}")
    return outcome


def _describe(event: dict[str, Any]) -> str:
    payload = event.get("payload") or {}
    parts = [f"task {event['task_id']}"]
    claim = payload.get("claim")
    if claim:
        parts.append(f"claim {claim['claim_id']}")
    for initial in payload.get("initial_claims", ()):
        parts.append(f"claim {initial['claim_id']}")
    if payload.get("superseded"):
        parts.append("supersedes " + ", ".join(payload["superseded"]))
    if event["event_type"] == "claim_invalidated":
        parts.append(f"claim {payload['claim_id']}")
    if payload.get("candidate_id"):
        parts.append(f"candidate {payload['candidate_id']} (signal {payload['signal_key'][:12]}...)")
    if event["event_type"] == "mode_set":
        parts.append(f"mode {payload['mode']}")
    if payload.get("current"):
        parts.append("now the project's current task")
    if event["event_type"] == "current_task_set":
        parts.append({"resumed": "resumed: now the project's current task",
                      "migrated": "made current on the first write since tasks became current "
                                  "(the newest task with the user's own claims)"}.get(payload["reason"], payload["reason"]))
    if payload.get("counts"):
        parts.append(", ".join(f"{v} {k}" for k, v in payload["counts"].items()))
    return "; ".join(parts)


def _query(args: argparse.Namespace, query: Any) -> Any:
    return _service().query(project_root(args), query)


def _source(args: argparse.Namespace):
    """The source the user named, or None for the server's default (the actor's own kind, a fresh id).

    --source-kind and --source-id name a source together (--excerpt adds to them):
    one without the other is refused, never dropped, because only the user knows
    the provenance they describe.
    """
    from loopstate_protocol.intent import SourceInput

    flags = (("--source-kind", args.source_kind), ("--source-id", args.source_id), ("--excerpt", args.excerpt))
    given = [flag for flag, value in flags if value is not None]
    if not given:
        return None
    missing = [flag for flag, value in flags[:2] if value is None]
    if missing:
        from loopstate_protocol.errors import ErrorCode

        from loopstate.core.errors import LoopstateError
        from loopstate.domains.intent.records import ACTOR_SOURCES

        raise LoopstateError(
            ErrorCode.INVALID_PARAMS,
            f"{' and '.join(given)} {'describe' if len(given) > 1 else 'describes'} the claim's source, which also "
            f"needs {' and '.join(missing)}: --source-kind is one of {', '.join(SOURCE_KINDS)} (--actor {args.actor} "
            f"may cite {', '.join(ACTOR_SOURCES[args.actor])}), --source-id the host event id; without any of them "
            "the server records the actor's own kind with a fresh id",
            field="source", missing=[flag.lstrip("-").replace("-", "_") for flag in missing],
        )
    return SourceInput(kind=args.source_kind, event_id=args.source_id, excerpt=args.excerpt)


def _initial_claim(text: str) -> tuple[str, str]:
    """--claim's [FACET:]STATEMENT as (facet, statement); a prefix that is no facet is refused with
    the nearest one (the domain's vocabulary and its refusal), before anything is written."""
    from loopstate.core.errors import LoopstateError
    from loopstate.domains.intent import rules

    try:
        return rules.split_facet(text)
    except LoopstateError as exc:
        raise LoopstateError(
            exc.code,
            f"--claim {text!r}: {exc.message}. The word before the first colon names the claim's facet; to keep "
            f"it in an outcome's statement, write --claim 'outcome:{text}'",
            **exc.details,
        ) from None


def _claim_input(args: argparse.Namespace):
    from loopstate_protocol.intent import ClaimInput

    status = args.status or ("explicit" if args.actor == "user" else "evidence" if args.actor == "evidence" else "inferred")
    return ClaimInput(
        statement=args.statement, role=args.actor, epistemic_status=status, facets=args.facet or ["outcome"],
        scope=args.scope, confidence=args.confidence, valid_from=args.valid_from,
    )


def _decode(raw: str, type_: Any, what: str) -> Any:
    """Decode JSON input into protocol types; a bad field is a clear refusal, not a crash."""
    from loopstate_protocol.errors import ErrorCode

    from loopstate.core.errors import LoopstateError
    from loopstate.core.nesting import decoded_text

    try:
        return decoded_text(lambda: msgspec.json.decode(raw.encode(), type=type_), what)
    except (msgspec.DecodeError, msgspec.ValidationError) as exc:
        raise LoopstateError(ErrorCode.INVALID_PARAMS, f"{what}: {exc}", field=what) from None


def _read_input(path: str, what: str) -> str:
    """A file's text, or stdin's for '-'; a missing or unreadable file is a clear refusal, not a crash."""
    from loopstate_protocol.errors import ErrorCode

    from loopstate.core.errors import LoopstateError

    if path == "-":
        return sys.stdin.read()
    try:
        with open(path, encoding="utf-8") as handle:
            return handle.read()
    except FileNotFoundError:
        raise LoopstateError(ErrorCode.NOT_FOUND, f"{what}: {path} does not exist; pass an existing file or '-' for stdin", field=what) from None
    except UnicodeDecodeError:
        raise LoopstateError(ErrorCode.VALIDATION_FAILED, f"{what}: {path} is not UTF-8 text; pass the JSON file", field=what) from None
    except OSError as exc:
        raise LoopstateError(ErrorCode.VALIDATION_FAILED, f"{what}: {path} cannot be read ({exc.strerror}); pass a readable file", field=what) from None


def _refuse_private(mode: str) -> None:
    if mode == "private":
        from loopstate_protocol.errors import ErrorCode

        from loopstate.core.errors import LoopstateError

        raise LoopstateError(
            ErrorCode.RULE_VIOLATION,
            "private mode keeps events only in a serving process's memory, and this CLI process exits now; "
            "start private tasks through the sidecar (loopstate serve)",
            field="mode",
        )


# --- mutations ----------------------------------------------------------------------


def cmd_start(args: argparse.Namespace) -> int:
    from loopstate_protocol.intent import ClaimInput, IntentTaskStart

    _refuse_private(args.mode)
    claims = []
    for text in args.claim or ():
        facet, statement = _initial_claim(text)
        claims.append(ClaimInput(statement=statement, role="user", epistemic_status="explicit", facets=[facet],
                                 scope=args.scope))
    if args.claims_json:
        raw = _read_input(args.claims_json, "claims-json")
        claims.extend(_decode(raw, list[ClaimInput], "claims-json"))
    _execute(args, IntentTaskStart(task_id=args.task_id, label=args.label, mode=args.mode, initial_claims=claims))
    return 0


def cmd_resume(args: argparse.Namespace) -> int:
    from loopstate_protocol.intent import IntentTaskResume

    _execute(args, IntentTaskResume(task_id=_task(args, args.task)))
    return 0


def cmd_add(args: argparse.Namespace) -> int:
    from loopstate_protocol.intent import IntentClaimAdd

    _execute(args, IntentClaimAdd(task_id=_task(args, args.task), claim=_claim_input(args), actor=args.actor, source=_source(args)))
    return 0


def cmd_replace(args: argparse.Namespace) -> int:
    from loopstate_protocol.intent import IntentClaimReplace

    task = _task(args, args.task)
    _execute(args, IntentClaimReplace(
        task_id=task, supersedes=[_claim(args, c, task) for c in args.supersedes], claim=_claim_input(args), actor=args.actor, source=_source(args),
    ))
    return 0


def cmd_invalidate(args: argparse.Namespace) -> int:
    from loopstate_protocol.intent import IntentClaimInvalidate

    task = _task(args, args.task)
    _execute(args, IntentClaimInvalidate(task_id=task, claim_id=_claim(args, args.claim, task), reason=args.reason,
                                         actor=args.actor))
    return 0


def cmd_confirm(args: argparse.Namespace) -> int:
    from loopstate_protocol.intent import IntentClaimConfirm

    task = _task(args, args.task)
    _execute(args, IntentClaimConfirm(task_id=task, claim_id=_claim(args, args.claim, task)))
    return 0


def cmd_mode(args: argparse.Namespace) -> int:
    from loopstate_protocol.intent import IntentModeSet

    _refuse_private(args.mode)
    _execute(args, IntentModeSet(task_id=_task(args, args.task), mode=args.mode, host_session_id=args.session))
    return 0


def cmd_candidate(args: argparse.Namespace) -> int:
    from loopstate_protocol.intent import IntentCandidateAdd

    _execute(args, IntentCandidateAdd(
        task_id=_task(args, args.task), statement=args.statement, facets=args.facet or ["soft_constraint"], actor=args.actor,
        source=_source(args),
    ))
    return 0


def cmd_promote(args: argparse.Namespace) -> int:
    from loopstate_protocol.intent import IntentCandidatePromote

    _execute(args, IntentCandidatePromote(
        task_id=_task(args, args.task), signal_key=args.signal_key, confirmation=args.confirmation, confidence=args.confidence,
    ))
    return 0


def cmd_observe(args: argparse.Namespace) -> int:
    from loopstate_protocol.intent import IntentSourceObserve, SourceInput

    source = SourceInput(
        kind=args.source_kind, event_id=args.source_id, text=args.text, excerpt=args.excerpt, via_hook=args.via_hook,
        keep_excerpt=args.keep_excerpt,
    )
    _execute(args, IntentSourceObserve(task_id=_task(args, args.task), source=source, actor=args.actor))
    return 0


def cmd_signal(args: argparse.Namespace) -> int:
    from loopstate_protocol.intent import IntentResultSignal

    _execute(args, IntentResultSignal(
        task_id=_task(args, args.task), signal=args.signal, note=args.note, actor=args.actor, source=_source(args),
    ))
    return 0


def cmd_compaction(args: argparse.Namespace) -> int:
    from loopstate_protocol.intent import IntentCompactionObserve

    _execute(args, IntentCompactionObserve(task_id=_task(args, args.task), trigger=args.trigger, host_event_id=args.host_event_id))
    return 0


def cmd_import(args: argparse.Namespace) -> int:
    import json

    from loopstate_protocol.intent import IntentImport

    from loopstate.core.nesting import decoded_text

    raw = _read_input(args.file, "graph")
    try:
        graph = decoded_text(lambda: json.loads(raw), "graph")
    except json.JSONDecodeError as exc:
        from loopstate_protocol.errors import ErrorCode

        from loopstate.core.errors import LoopstateError

        raise LoopstateError(
            ErrorCode.VALIDATION_FAILED, f"{args.file}: not JSON ({exc}); pass the output of `loopstate intent export`", field="graph",
        ) from None
    _execute(args, IntentImport(graph=graph))
    return 0


def cmd_purge(args: argparse.Namespace) -> int:
    from loopstate_protocol.intent import IntentPurge

    if not args.yes:
        from loopstate_protocol.errors import ErrorCode

        from loopstate.core.errors import LoopstateError

        raise LoopstateError(
            ErrorCode.RULE_VIOLATION,
            f"a purge physically deletes the {args.target} and cannot be undone; re-run with --yes to confirm",
            field="confirm",
        )
    target = _task(args, args.id) if args.target == "task" else _claim(args, args.id, None)
    _execute(args, IntentPurge(target=args.target, id=target, confirm=True))
    return 0


def cmd_recover(args: argparse.Namespace) -> int:
    from loopstate_protocol.intent import IntentPrivateRecover

    if args.action == "resume":
        _refuse_private("private")
    _execute(args, IntentPrivateRecover(host_session_id=args.session, action=args.action))
    return 0


def cmd_exec(args: argparse.Namespace) -> int:
    """Any intent command as JSON (the same shape as loopstate/execute's params.command)."""
    from loopstate_protocol import intent as p

    raw = sys.stdin.read() if args.command_json == "-" else args.command_json
    command = _decode(raw, Union[p.COMMANDS], "command")
    if getattr(command, "mode", None) == "private":
        _refuse_private("private")
    _execute(args, command)
    return 0


# --- reads ----------------------------------------------------------------------------


def _table(headers: list[str], rows: list[list[Any]], colour: tuple[str, str] | None = None) -> None:
    """Print a table; ``colour`` (a header, a palette kind) paints that column's values on a terminal."""
    from loopstate.cli.terminal import painted

    cells = [[("" if v is None else str(v)) for v in row] for row in rows]
    widths = [max([len(h)] + [len(r[i]) for r in cells]) for i, h in enumerate(headers)]
    painted_at = headers.index(colour[0]) if colour is not None and colour[0] in headers else None
    print("  ".join(h.ljust(w) for h, w in zip(headers, widths)).rstrip())
    for row in cells:
        shown = [painted(v, colour[1], w) if i == painted_at and colour else v.ljust(w)
                 for i, (v, w) in enumerate(zip(row, widths))]
        print("  ".join(shown).rstrip())


def _with_task_column(headers: list[str], rows: list[list[Any]], column: int,
                      several: bool) -> tuple[list[str], list[list[Any]]]:
    """The table with its TASK column (``column``) only when the rows come from several tasks: a
    project-wide listing says whose each claim is; one task's listing needs no column for it."""
    if several:
        return headers, rows
    return headers[:column] + headers[column + 1:], [row[:column] + row[column + 1:] for row in rows]


def _short(text: str, width: int = 72) -> str:
    text = " ".join(text.split())
    return text if len(text) <= width else text[: width - 3] + "..."


def cmd_show(args: argparse.Namespace) -> int:
    from loopstate_protocol.intent import IntentSnapshot

    view = _query(args, IntentSnapshot(task_id=_task(args, args.task), limit=args.limit, cursor=args.cursor))
    if args.json:
        emit_json(view)
        return 0
    scope = f"task {view.task_id}" if view.task_id else "project"
    print(f"intent of {scope} at sequence {view.sequence}: {view.active_count} active claim(s)")
    current = next((t for t in view.tasks if t.task_id == view.current_task_id), None)
    if view.current_task_id is None:
        print("current task: none yet (`loopstate intent start` starts one)")
    elif view.task_id is None or view.task_id == view.current_task_id:
        label = f" ({current.label})" if current is not None and current.label else ""
        print(f"current task: {view.current_task_id}{label}, the one new host sessions bind to")
    rows, tasks = [], set()
    for facet, by_status in view.by_facet.items():
        for status, claims in by_status.items():
            for claim in claims:
                mark = "*" if claim.direct_user else ""
                rows.append([facet, status + mark, claim.task_id[:8], claim.claim_id[:8], _short(claim.statement)])
                tasks.add(claim.task_id)
    if rows:
        _table(*_with_task_column(["FACET", "STATUS", "TASK", "CLAIM", "STATEMENT"], rows, 2, len(tasks) > 1),
               colour=("STATUS", "claim"))
    from loopstate.cli.terminal import paint

    for item in view.disagreements:
        print(f"{paint('open dispute', 'red')}: {item.claim_id[:8]} {_short(item.statement)}")
    for warning in view.stale:
        print(f"stale long-term ({warning.days_unconfirmed} days unconfirmed): {warning.claim_id[:8]} {_short(warning.statement)}")
    if rows:
        print("(* = the user's own words from a direct user event)")
    if view.remaining:
        print(f"{view.remaining} more active claim(s) not shown; the next page: "
              + _next_page("show", view.task_id, args.limit, SNAPSHOT_PAGE, view.next_cursor))
    return 0


def _next_page(verb: str, task_id: str | None, limit: int, default_limit: int, cursor: str | None) -> str:
    """The exact command that prints the page after this one."""
    again = [f"loopstate intent {verb}"] + (["--task", task_id] if task_id else [])
    if limit != default_limit:
        again += ["--limit", str(limit)]
    return " ".join(again + ["--cursor", cursor or ""])


def cmd_audit(args: argparse.Namespace) -> int:
    from loopstate_protocol.intent import IntentAudit

    view = _query(args, IntentAudit(task_id=_task(args, args.task), limit=args.limit, cursor=args.cursor))
    if args.json:
        emit_json(view)
        return 0
    _table(*_with_task_column(
        ["TASK", "CLAIM", "STATE", "STATUS", "ROLE", "SOURCE", "STATEMENT"],
        [[c.task_id[:8], c.claim_id[:8], c.state, c.epistemic_status, c.role, c.source_ref.kind if c.source_ref else "",
          _short(c.statement, 56)] for c in view.claims],
        0, len({c.task_id for c in view.claims}) > 1), colour=("STATUS", "claim"))
    for edge in view.edges:
        print(f"{edge.new[:8]} supersedes {edge.old[:8]}")
    if view.remaining:
        print(f"{view.remaining} more claim(s) not shown ({view.total} in all); the next page: "
              + _next_page("audit", view.task_id, args.limit, AUDIT_PAGE, view.next_cursor))
    return 0


def cmd_compact(args: argparse.Namespace) -> int:
    from loopstate_protocol.intent import IntentCompact

    view = _query(args, IntentCompact(task_id=_task(args, args.task), max_records=args.max_records, max_chars=args.max_chars))
    if args.json:
        emit_json(view)
        return 0
    for item in view.items:
        print(f"[{item.facet}/{item.epistemic_status}] {item.statement}")
    if view.omitted:
        print("omitted: " + ", ".join(f"{v} {k}" for k, v in sorted(view.omitted.items())))
    if view.open_disputes:
        print(f"open disputes: {view.open_disputes} (not resolved to fit the budget)")
    return 0


def cmd_hook_context(args: argparse.Namespace) -> int:
    """What a hook may inject; like `loopstate hook`, it fails open (exit 0, nothing injected).

    A script that runs this before a prompt must never block the user's turn:
    a corrupt, locked or unreadable store, or a task that is gone, prints the
    fault and its fix on stderr (and as ``fault`` with --json) and injects
    nothing, instead of exiting 1.
    """
    from loopstate_protocol.intent import IntentHookContext

    try:
        task = _task(args, args.task)
        view = _query(args, IntentHookContext(task_id=task, max_chars=args.max_chars))
    except Exception as error:  # fail open, as every hook does: the fault is said, never raised
        from loopstate.service.front import hook_fault

        said = hook_fault(error)
        sys.stderr.write(f"loopstate: intent hook-context: {said}; nothing injected (a hook's read fails open)\n")
        if args.json:
            code = getattr(getattr(error, "code", None), "value", "INTERNAL_ERROR")
            emit_json({"task_id": args.task, "text": "", "claim_ids": [], "omitted": {}, "open_disputes": 0,
                       "fault": {"code": code, "message": said}})
        return 0
    if args.json:
        emit_json(view)
        return 0
    print(view.text or "(nothing to inject)")
    if view.omitted:
        print("omitted: " + ", ".join(f"{v} {k}" for k, v in sorted(view.omitted.items())))
    return 0


def cmd_tasks(args: argparse.Namespace) -> int:
    from loopstate_protocol.intent import IntentTasks

    tasks = _query(args, IntentTasks())
    if args.json:  # an object, as every --json answer is, so a field can be added without breaking a reader
        emit_json({"tasks": tasks, "current_task_id": next((t.task_id for t in tasks if t.current), None)})
        return 0
    _table(["TASK", "MODE", "STARTED", "ACTIVE", "LABEL"],
           [[t.task_id + ("*" if t.current else ""), t.mode + (" (imported)" if t.history_incomplete else ""),
             t.started_at, t.active_claims, t.label] for t in tasks])
    if any(t.current for t in tasks):
        print("(* = the project's current task: new host sessions bind to it)")
    return 0


def cmd_candidates(args: argparse.Namespace) -> int:
    from loopstate_protocol.intent import IntentCandidates

    groups = _query(args, IntentCandidates())
    if args.json:
        emit_json({"candidates": groups})
        return 0
    _table(["SIGNAL", "TASKS", "STATE", "STATEMENT"],
           [[g.signal_key[:16], g.distinct_tasks, "promoted" if g.promoted else "promotable" if g.promotable else "candidate",
             _short(g.statement)] for g in groups])
    return 0


def cmd_export(args: argparse.Namespace) -> int:
    import json

    from loopstate_protocol.intent import IntentExport

    graph = _query(args, IntentExport(task_id=_task(args, args.task)))
    data = json.dumps(graph, indent=None if args.json else 2, sort_keys=True)
    if args.out:
        from pathlib import Path

        try:
            Path(args.out).write_text(data + "\n", encoding="utf-8")
        except OSError as exc:
            from loopstate_protocol.errors import ErrorCode

            from loopstate.core.errors import LoopstateError

            raise LoopstateError(
                ErrorCode.VALIDATION_FAILED, f"--output {args.out}: cannot be written ({exc.strerror}); pass a writable path",
                field="out",
            ) from None
        if not args.json:
            print(f"exported {len(graph['tasks'])} task(s), {len(graph['claims'])} claim(s) to {args.out}")
        else:
            emit_json({"out": args.out, "tasks": len(graph["tasks"]), "claims": len(graph["claims"])})
    else:
        sys.stdout.write(data + "\n")
    return 0


# --- registration -----------------------------------------------------------------------


def _mutating(parser: argparse.ArgumentParser) -> None:
    add_common(parser)
    parser.add_argument("--request-id", help="idempotency key; an exact retry with the same id returns the first result")


def _claim_options(parser: argparse.ArgumentParser, *, with_source: bool = True) -> None:
    parser.add_argument("statement", help="one atomic statement (1-500 characters after redaction)")
    parser.add_argument("--facet", action="append", choices=FACETS, help="repeatable; default outcome")
    parser.add_argument("--actor", choices=ACTORS, default="user", help="who makes the claim (its role); default user")
    parser.add_argument("--status", choices=STATUSES, help="epistemic status (default: explicit for user, evidence for evidence, else inferred)")
    parser.add_argument("--scope", choices=SCOPES, default="task")
    parser.add_argument("--confidence", type=float, help="0-1, required exactly for inferred claims")
    parser.add_argument("--valid-from", help="RFC 3339 UTC (default now)")
    if with_source:
        _source_options(parser)


def _source_options(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--source-kind", choices=SOURCE_KINDS,
                        help="the kind of the source the claim cites, given with --source-id (without either: "
                        "the actor's own kind with a fresh id)")
    parser.add_argument("--source-id", help="opaque host event id of the source (with --source-kind)")
    parser.add_argument("--excerpt", help="redacted excerpt of the source, at most 160 characters (with --source-kind "
                        "and --source-id)")


def register(sub: argparse._SubParsersAction) -> None:
    intent = sub.add_parser("intent", help="the user's intent as atomic claims: outcomes, constraints, signals, "
                            "unknowns, disputes")
    verbs = intent.add_subparsers(dest="intent_command", metavar="VERB")

    start = verbs.add_parser("start", help="start a task, optionally with up to 12 initial claims",
                             epilog=CLAIMS_JSON_EXAMPLE, formatter_class=argparse.RawDescriptionHelpFormatter)
    _mutating(start)
    start.add_argument("--task-id", help="a UUID (default: derived from the project and the request id)")
    start.add_argument("--label")
    start.add_argument("--mode", choices=("on", "off", "private"), default="on")
    start.add_argument("--claim", action="append", metavar="[FACET:]STATEMENT", help=CLAIM_SYNTAX)
    start.add_argument("--claims-json", metavar="FILE",
                       help="a JSON list of claim objects ('-' for stdin); the fields and an example are below")
    start.add_argument("--scope", choices=SCOPES, default="task",
                       help="the scope of the --claim claims: task (default), project (every task sees them) or "
                       "long_term")
    start.set_defaults(func=cmd_start)

    resume = verbs.add_parser("resume", help="make a task the project's current one (new host sessions bind to it)")
    _mutating(resume)
    resume.add_argument("task", help=TASK_HELP)
    resume.set_defaults(func=cmd_resume)

    add = verbs.add_parser("add", help="add one claim to a task")
    _mutating(add)
    add.add_argument("task", help=TASK_HELP)
    _claim_options(add)
    add.set_defaults(func=cmd_add)

    replace = verbs.add_parser("replace", help="add a claim that supersedes others (one locked mutation)")
    _mutating(replace)
    replace.add_argument("task", help=TASK_HELP)
    replace.add_argument("--supersedes", action="append", required=True, metavar="CLAIM_ID", help=CLAIM_HELP)
    _claim_options(replace)
    replace.set_defaults(func=cmd_replace)

    invalidate = verbs.add_parser("invalidate", help="make a claim inactive (it stays in the audit)")
    _mutating(invalidate)
    invalidate.add_argument("task", help=TASK_HELP)
    invalidate.add_argument("claim", help=CLAIM_HELP)
    invalidate.add_argument("--reason")
    invalidate.add_argument("--actor", choices=ACTORS, default="user")
    invalidate.set_defaults(func=cmd_invalidate)

    confirm = verbs.add_parser("confirm", help="review a claim: re-issue it with last_confirmed = now")
    _mutating(confirm)
    confirm.add_argument("task", help=TASK_HELP)
    confirm.add_argument("claim", help=CLAIM_HELP)
    confirm.set_defaults(func=cmd_confirm)

    mode = verbs.add_parser("mode", help="switch a task on or off")
    _mutating(mode)
    mode.add_argument("task", help=TASK_HELP)
    mode.add_argument("mode", choices=("on", "off", "private"))
    mode.add_argument("--session", help="host session id (only for private transitions)")
    mode.set_defaults(func=cmd_mode)

    candidate = verbs.add_parser("candidate", help="record a repeated signal that may become long-term")
    _mutating(candidate)
    candidate.add_argument("task", help=TASK_HELP)
    candidate.add_argument("statement")
    candidate.add_argument("--facet", action="append", choices=FACETS)
    candidate.add_argument("--actor", choices=ACTORS, default="agent")
    _source_options(candidate)
    candidate.set_defaults(func=cmd_candidate)

    promote = verbs.add_parser("promote", help="the user's explicit confirmation of a signal seen in 3 tasks")
    _mutating(promote)
    promote.add_argument("task", help=TASK_HELP)
    promote.add_argument("signal_key")
    promote.add_argument("--confidence", type=float, required=True)
    promote.add_argument("--confirmation", choices=("explicit", "acceptance", "silence", "single_choice"), default="explicit")
    promote.set_defaults(func=cmd_promote)

    observe = verbs.add_parser("observe", help="record that a source was observed (by id or redacted hash only)")
    _mutating(observe)
    observe.add_argument("task", help=TASK_HELP)
    observe.add_argument("--source-kind", choices=SOURCE_KINDS, required=True)
    observe.add_argument("--source-id", help="opaque host event id")
    observe.add_argument("--text", help="source text: credential-redacted and hashed, never stored")
    observe.add_argument("--excerpt", help="redacted excerpt, at most 160 characters")
    observe.add_argument("--via-hook", action="store_true", help="a hook observation: the event id is the sole identity")
    observe.add_argument("--keep-excerpt", action="store_true", help="keep the excerpt of a hook observation (off by default)")
    observe.add_argument("--actor", choices=ACTORS, default="agent")
    observe.set_defaults(func=cmd_observe)

    signal = verbs.add_parser("signal", help="a success/failure/feedback signal about the result (its note is evidence)")
    _mutating(signal)
    signal.add_argument("task", help=TASK_HELP)
    signal.add_argument("signal", choices=("success", "failure", "feedback"))
    signal.add_argument("--note", help="what was observed; the user's own words are explicit, anything else evidence")
    signal.add_argument("--actor", choices=ACTORS, default="evidence")
    _source_options(signal)
    signal.set_defaults(func=cmd_signal)

    compaction = verbs.add_parser("compaction", help="record that the host compacted its context")
    _mutating(compaction)
    compaction.add_argument("task", help=TASK_HELP)
    compaction.add_argument("--trigger", choices=("manual", "auto"), default="manual")
    compaction.add_argument("--host-event-id")
    compaction.set_defaults(func=cmd_compaction)

    imp = verbs.add_parser("import", help="import an exported graph (fresh ids, explicit_import provenance)",
                           epilog=IMPORT_EXAMPLE, formatter_class=argparse.RawDescriptionHelpFormatter)
    _mutating(imp)
    imp.add_argument("file", help="the graph JSON ('-' for stdin)")
    imp.set_defaults(func=cmd_import)

    purge = verbs.add_parser("purge", help="physically delete one claim or one task (re-chains the ledger)")
    _mutating(purge)
    purge.add_argument("target", choices=("claim", "task"))
    purge.add_argument("id", help="the task's id or a unique prefix; the claim's (or candidate's) id, or a unique "
                       "prefix of an active claim")
    purge.add_argument("--yes", action="store_true", help="confirm the deletion (required)")
    purge.set_defaults(func=cmd_purge)

    recover = verbs.add_parser("recover", help="after a restart: make a private session's task durable or delete it")
    _mutating(recover)
    recover.add_argument("session", help="the host session id of the private task")
    recover.add_argument("action", choices=("durable_on", "durable_off", "delete", "resume"))
    recover.set_defaults(func=cmd_recover)

    exe = verbs.add_parser("exec", help="run any intent command given as JSON (with its \"kind\")",
                           epilog=EXEC_EXAMPLE, formatter_class=argparse.RawDescriptionHelpFormatter)
    _mutating(exe)
    exe.add_argument("command_json", metavar="COMMAND_JSON", help="the command object ('-' for stdin; see below)")
    exe.set_defaults(func=cmd_exec)

    show = verbs.add_parser("show", help="the current view: active claims by facet and status")
    add_common(show)
    show.add_argument("--task", help=TASK_HELP)
    show.add_argument("--limit", type=int, default=SNAPSHOT_PAGE,
                      help=f"active claims per page, 1-1000 (default {SNAPSHOT_PAGE})")
    show.add_argument("--cursor", help="where the page starts: the cursor the page before printed (default: the first page)")
    show.set_defaults(func=cmd_show)

    audit = verbs.add_parser("audit", help="claims with their lifecycle and supersession edges, a page at a time")
    add_common(audit)
    audit.add_argument("--task", help=TASK_HELP)
    audit.add_argument("--limit", type=int, default=AUDIT_PAGE, help=f"claims per page, 1-1000 (default {AUDIT_PAGE})")
    audit.add_argument("--cursor", help="where the page starts: the cursor the page before printed (default: the first page)")
    audit.set_defaults(func=cmd_audit)

    compact = verbs.add_parser("compact", help="the compact handoff, capped by records and characters")
    add_common(compact)
    compact.add_argument("task", help=TASK_HELP)
    compact.add_argument("--max-records", type=int, default=24)
    compact.add_argument("--max-chars", type=int, default=4000)
    compact.set_defaults(func=cmd_compact)

    hook = verbs.add_parser("hook-context", help="what a hook may inject (only the user's own explicit claims)")
    add_common(hook)
    hook.add_argument("task", help=TASK_HELP)
    hook.add_argument("--max-chars", type=int, default=2000)
    hook.set_defaults(func=cmd_hook_context)

    tasks = verbs.add_parser("tasks", help="the project's tasks")
    add_common(tasks)
    tasks.set_defaults(func=cmd_tasks)

    candidates = verbs.add_parser("candidates", help="candidate signals and their distinct task counts")
    add_common(candidates)
    candidates.set_defaults(func=cmd_candidates)

    export = verbs.add_parser("export", help="the project's claim graph (the import format)")
    add_common(export)
    export.add_argument("--task", help=TASK_HELP)
    export.add_argument("--output", "--out", dest="out", help="write to this file instead of stdout")
    export.set_defaults(func=cmd_export)

    intent.set_defaults(func=lambda args: (intent.print_help(), 2)[1])
    from loopstate.cli.parser import group_verbs

    group_verbs(intent, "start show add replace invalidate confirm tasks resume audit export import",
                "mode candidate candidates promote signal observe compaction hook-context compact exec purge recover",
                "what hooks, sidecars and scripts send (and rarer repairs)")
