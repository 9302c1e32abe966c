"""`loopstate run ...` (bounded runs) and `loopstate validate KIND FILE`.

A thin front door: each verb builds one runs command or query and hands it to
the same Service the sidecar uses; there is a verb for every runs command the
sidecar serves. Ids are taken by any unique prefix (resolved by
service.runs_project); a new run or grant id is derived from --request-id when
one is given, so reusing the request id retries exactly.
"""

from __future__ import annotations

import argparse
import sys
import textwrap
import uuid
from pathlib import Path
from typing import TYPE_CHECKING, Any, overload

from loopstate_protocol.errors import ErrorCode
from loopstate_protocol.runs import RUN_STATUSES

from loopstate.cli.output import add_common, emit_json, project_root
from loopstate.core.errors import LoopstateError
from loopstate.service.run_records import parse_json

if TYPE_CHECKING:
    from loopstate.service.runs_project import InRun

HARNESSES = ("codex", "claude_code", "kimi_code", "opencode", "deepseek_harness", "manual")
# --host takes the names `loopstate setup --host` takes (claude, codex) and the rest of the records' harnesses.
HOSTS = ("claude", "codex", "kimi_code", "opencode", "deepseek_harness", "manual", "claude_code")
HOST_RECORDED = {"claude": "claude_code"}
KINDS = ("config", "run", "lease", "grant", "route", "evidence", "issue_ledger", "install_receipt", "audit_event",
         "harness_status")
STAGES = ("strategize", "spec_pack", "build", "test", "resolve", "close")
COMPLETIONS = ("route_selected", "stage_started", "evidence_recorded", "issue_opened", "issue_transitioned",
               "stage_completed")

EVIDENCE_EXAMPLE = """\
example: write the evidence record to a file, then add it under your lease:

  cat > evidence.json <<'EOF'
  {
    "requirement_ids": ["parser-accepts-empty-input"],
    "type": "command",
    "description": "the parser's unit tests pass",
    "procedure": ["python -m pytest -q tests/parser"],
    "outcome": "passed",
    "artifact_refs": [{"kind": "command_output", "ref": "pytest: 12 passed"}],
    "digest": null,
    "environment": {"python": "3.12"}
  }
  EOF
  loopstate run evidence add RUN evidence.json --lease LEASE --generation 1

fields (`loopstate schema`, EvidenceAdd.evidence, lists each with its values):
  requirement_ids  at least one requirement the evidence is for
  type             command, file, visual, source, manual or harness_probe
  description      what was checked
  procedure        the steps; a passed record needs at least one
  outcome          passed, failed, blocked, denied or unverified
  artifact_refs    {"kind": file|command_output|url|manual_observation, "ref": ...};
                   a passed record needs one (or a "manual_observation" text)
  digest           SHA-256 hex of the artifact, or null
  environment      redacted facts (strings, numbers, booleans); credentials are refused
  stage            optional: default the run's current stage
loopstate fills evidence_id, run_id, actor, observed_at and schema_version itself."""

COMPLETION_DATA = """\
--data per --type (the exact completion; `run complete` repeats it):
  stage_started       {"stage": STAGE}
  stage_completed     {"stage": STAGE, "outcome": "passed"|"failed"|"blocked"}
  evidence_recorded   {"evidence_id": UUID, "outcome": OUTCOME}   (complete with --record FILE)
  issue_opened        {"issue_id": UUID, "severity": SEVERITY}     (complete with --record FILE)
  issue_transitioned  {"issue_id": UUID, "from_status": STATUS, "to_status": STATUS}
  route_selected      {"capability": C, "selected_provider": P, "selected_source": "installed"|"bundled"}

example:
  OP=$(loopstate run intend RUN --lease LEASE --generation 1 --type stage_started \\
         --data '{"stage": "build"}' --action local_write --destination repository)
  loopstate run complete RUN "$OP" --lease LEASE --generation 1 --type stage_started \\
         --data '{"stage": "build"}'"""

ISSUE_EXAMPLE = """\
example: open a blocking issue under your lease, then move it along:

  loopstate run issue open RUN --lease LEASE --generation 1 \\
      --title "empty input crashes the parser" --severity high --blocking \\
      --requirement parser-accepts-empty-input \\
      --reproduction "echo -n | python -m app.parse" \\
      --regression "python -m pytest -q tests/parser"
  loopstate run issue update RUN ISSUE resolving --lease LEASE --generation 1

A blocking issue keeps the run from completing until it is closed or deferred;
--requirement, --reproduction and --regression repeat. loopstate fills the
issue id, its status (open), the attempt count and the times."""


def register(sub: argparse._SubParsersAction) -> None:
    run = sub.add_parser("run", help="bounded runs: leases, budgets, authority, kill switch, audit log")
    verbs = run.add_subparsers(dest="run_verb", metavar="VERB")
    from loopstate.cli.parser import group_verbs

    group_verbs(run, "create list status acquire heartbeat stage intend complete stop unstop resume",
                "transition route issue evidence authority reconcile sync", "for harnesses, recovery and audits")

    p = _verb(verbs, "create", "create a ready run bound to an authority grant", cmd_create, actor=True, derives="run")
    p.add_argument("--grant", help="authority grant id or a unique prefix (see `loopstate run authority grant`); "
                                   "without it, the default local authority: a new attended grant for "
                                   "local_write to repository on this asset only, expiring after 24 hours")
    p.add_argument("--objective", required=True, help="one bounded outcome")
    p.add_argument("--done-gate", action="append", required=True, help="a testable condition (repeatable)")
    p.add_argument("--asset", required=True, help="what the run may change: a name for it (e.g. app) that the authority grant's scope must "
                   "list")
    p.add_argument("--asset-root", default=".", help="the folder of that asset, relative to the project (default .)")
    p.add_argument("--track", choices=("code", "noncode"), default="code")
    p.add_argument("--boundary", action="append", help="a declared boundary (repeatable; default: repository-local files)")
    p.add_argument("--mode", choices=("loop", "auto"), default=None, help="default: the project config's default_mode")
    p.add_argument("--budgets", help="frozen budgets as JSON, e.g. '{\"max_mutations\": 5}' (fields left out: the "
                                     "project config's)")

    p = _verb(verbs, "list", "list the project's runs: status, stage, owner, budget use", cmd_list, mutation=False)
    p.add_argument("--status", action="append", choices=RUN_STATUSES, metavar="STATUS",
                   help=f"only runs in this status (repeat for several): {', '.join(RUN_STATUSES)}")

    p = _verb(verbs, "status", "show a run's current state, lease, pending operation, issues and the kill switch",
              cmd_status, mutation=False)
    p.add_argument("run_id", metavar="RUN", help="run id or a unique prefix")

    p = _verb(verbs, "acquire", "take a ready run's first lease", cmd_acquire, actor=True)
    _run_arg(p)
    p.add_argument("--lane", help="a UUIDv4 naming one parallel line of work inside the run, when several "
                   "workers share it (default: none)")

    p = _verb(verbs, "heartbeat", "renew your own lease (no event is written until a renewal is due)", cmd_heartbeat, lease=True)
    _run_arg(p)

    p = _verb(verbs, "transition", "move an active run (waiting_approval, waiting_external, blocked, complete, failed, "
              "cancelled); stages have their own verbs: `run stage start|complete`", cmd_transition, lease=True)
    _run_arg(p)
    p.add_argument("to")
    p.add_argument("--reason", required=True)

    stage_parser = verbs.add_parser("stage", help="start or complete a stage (each start uses one stage attempt)")
    stage = stage_parser.add_subparsers(dest="stage_verb", metavar="VERB")
    p = _verb(stage, "start", "start a stage (runs.stage_start)", cmd_stage_start, lease=True)
    _run_arg(p)
    p.add_argument("stage", choices=STAGES)
    p = _verb(stage, "complete", "complete the current stage (runs.stage_complete)", cmd_stage_complete, lease=True)
    _run_arg(p)
    p.add_argument("stage", choices=STAGES)
    p.add_argument("--outcome", choices=("passed", "failed", "blocked"), required=True)

    route_parser = verbs.add_parser("route", help="route decisions")
    route = route_parser.add_subparsers(dest="route_verb", metavar="VERB")
    p = _verb(route, "select", "record a route decision from a JSON file (runs.route_select)", cmd_route_select,
              lease=True)
    _run_arg(p)
    p.add_argument("file", help="JSON file holding the route record (check it with `loopstate validate route`)")

    p = _verb(verbs, "intend", "announce an operation before doing it: reserves its budget, checks its authority "
              "(runs.intend); prints the operation id", cmd_intend, lease=True, epilog=COMPLETION_DATA)
    _run_arg(p)
    _completion_args(p)
    p.add_argument("--action", required=True, help="what the operation does, e.g. local_write")
    p.add_argument("--destination", required=True, help="where, e.g. repository")
    p.add_argument("--cost", default="0", help="its cost in USD as a decimal string (default 0)")
    p.add_argument("--operation", help="operation id (UUIDv4; default: made by loopstate)")

    p = _verb(verbs, "complete", "report the completion an intent declared (runs.complete)", cmd_complete, lease=True,
              epilog=COMPLETION_DATA)
    _run_arg(p)
    p.add_argument("operation_id", metavar="OPERATION", help="the pending operation's id or a unique prefix")
    _completion_args(p)
    p.add_argument("--record", metavar="FILE", help="JSON file with the full record of an evidence_recorded or "
                                                    "issue_opened completion (the evidence fields, or the issue's)")

    issue_parser = verbs.add_parser("issue", help="the run's issue ledger")
    issue = issue_parser.add_subparsers(dest="issue_verb", metavar="VERB")
    p = _verb(issue, "open", "open an issue", cmd_issue_open, lease=True, epilog=ISSUE_EXAMPLE)
    _run_arg(p)
    p.add_argument("--title", required=True)
    p.add_argument("--severity", choices=("critical", "high", "medium", "low"), required=True)
    p.add_argument("--blocking", action="store_true", help="keep the run from completing until the issue is closed")
    p.add_argument("--requirement", action="append", default=[], help="a requirement id it breaks (repeatable)")
    p.add_argument("--reproduction", action="append", default=[], help="a step that shows it (repeatable)")
    p.add_argument("--regression", action="append", default=[], help="a check that proves it fixed (repeatable)")
    p = _verb(issue, "update", "move an issue to another status", cmd_issue_update, lease=True)
    _run_arg(p)
    p.add_argument("issue_id", metavar="ISSUE", help="issue id or a unique prefix")
    p.add_argument("status", choices=("open", "acknowledged", "resolving", "verification_pending", "closed", "reopened", "deferred"))
    p.add_argument("--resolution")

    evidence_parser = verbs.add_parser("evidence", help="evidence records")
    evidence = evidence_parser.add_subparsers(dest="evidence_verb", metavar="VERB")
    p = _verb(evidence, "add", "record evidence from a JSON file (without evidence_id, run_id, actor, observed_at)",
              cmd_evidence_add, lease=True, epilog=EVIDENCE_EXAMPLE)
    _run_arg(p)
    p.add_argument("file", help="JSON file with the evidence fields (see the example below)")

    auth_parser = verbs.add_parser("authority", help="authority grants")
    auth = auth_parser.add_subparsers(dest="authority_verb", metavar="VERB")
    p = _verb(auth, "grant", "record a typed, confirmed, expiring authority grant", cmd_grant, derives="grant")
    p.add_argument("--level", choices=("attended", "bounded", "scoped", "operational", "full"), required=True)
    p.add_argument("--by", dest="grantor", required=True, help="user-confirmed identity label")
    p.add_argument("--asset", action="append", default=[], help="an asset (a name runs give with --asset) the grant covers ('*' for any; repeatable)")
    p.add_argument("--action", action="append", default=[], help="action in scope, e.g. local_write (repeatable)")
    p.add_argument("--destination", action="append", default=[], help="destination in scope, e.g. repository (repeatable)")
    p.add_argument("--exclude", action="append", default=[], help="explicit exclusion; wins over every entry (repeatable)")
    p.add_argument("--risk", action="append", required=True, help="a realistic risk shown before confirmation (repeatable)")
    p.add_argument("--confirm", required=True, help="the exact typed confirmation (no secrets)")
    p.add_argument("--expires", required=True, help="RFC 3339 UTC expiry; no grant is non-expiring")
    p = _verb(auth, "show", "show a grant as recorded (scope, expiry, revocation)", cmd_grant_show, mutation=False)
    p.add_argument("grant_id", metavar="GRANT", help="grant id or a unique prefix")
    p = _verb(auth, "revoke", "revoke a grant for good (each bound run gets its marker)", cmd_revoke)
    p.add_argument("grant_id", metavar="GRANT", help="grant id or a unique prefix")
    p.add_argument("--by", dest="revoker", required=True)

    p = _verb(verbs, "stop", "kill switch: create the project's STOP file and halt EVERY run of the project "
              "(--cancel RUN cancels one run instead)", cmd_stop, actor=True, mutation=False)
    p.add_argument("run_id", nargs="?", metavar="RUN",
                   help="a run you mean to halt (checked and reported); the switch is project-wide, so every run "
                        "halts either way")
    p.add_argument("--cancel", metavar="RUN", help="cancel only this run (status cancelled); sets no kill switch")
    p.add_argument("--reason", default="stopped by the user", help="why (recorded with --cancel)")
    p.add_argument("--request-id", default=None, help="idempotency key of the stop or the --cancel (reuse it to retry exactly: "
                        "each run's halt is replayed, not written again)")

    p = _verb(verbs, "unstop", "clear the kill switch: remove the STOP files inside .loopstate (a switch elsewhere is "
              "reported, not removed); halted runs stay halted until `run resume RUN`", cmd_unstop, actor=True,
              mutation=False)

    p = _verb(verbs, "resume", "explicit recovery: fresh-generation lease, straight to active", cmd_resume, actor=True)
    _run_arg(p)
    p.add_argument("--reason", required=True)
    p.add_argument("--lease", help="your own still-valid lease id, if any")
    p.add_argument("--generation", type=int)
    p.add_argument("--grant", help="replace the run's grant (only during recovery)")

    p = _verb(verbs, "reconcile", "close an interrupted operation as unknown (or known_not_started by its holder)",
              cmd_reconcile, actor=True)
    _run_arg(p)
    p.add_argument("operation_id", metavar="OPERATION", help="the pending operation's id or a unique prefix")
    p.add_argument("--outcome", choices=("unknown", "known_not_started"), default="unknown")
    p.add_argument("--lease")
    p.add_argument("--generation", type=int)

    p = _verb(verbs, "sync", "write the safety truth a run is missing (kill switch halt, revocation marker, budget "
              "markers) without other work (runs.sync)", cmd_sync, actor=True)
    _run_arg(p)

    validate = sub.add_parser(
        "validate", help="check a hand-written record (config, run, lease, grant, ...) before loopstate reads it",
        description="Check a JSON record written by hand (or by another tool) against the shape loopstate reads, "
                    "and say every field that is wrong. Nothing is written.",
        epilog="examples:\n  loopstate validate config .loopstate/config.json\n"
               "  loopstate validate evidence evidence.json     # the file `loopstate run evidence add` takes\n"
               "  loopstate validate route route.json           # the file `loopstate run route select` takes",
        formatter_class=argparse.RawDescriptionHelpFormatter)
    # Not argparse choices: an unknown kind is refused like any bad input (exit 1, the kinds listed).
    validate.add_argument("kind", metavar="KIND", help="one of: " + ", ".join(KINDS))
    validate.add_argument("file", metavar="FILE", help="the JSON record")
    validate.add_argument("--json", action="store_true", help="print machine-readable JSON")
    validate.set_defaults(func=cmd_validate)


def _verb(sub, name: str, help_: str, func, *, actor: bool = False, lease: bool = False, mutation: bool = True,
          epilog: str | None = None, derives: str | None = None):
    """One verb's parser; ``derives`` names the id a --request-id derives (so a retry lands on it)."""
    if epilog is None:
        p = sub.add_parser(name, help=help_, description=help_)
    else:  # a worked example keeps its lines as written
        p = sub.add_parser(name, help=help_, description=textwrap.fill(help_, 79), epilog=epilog,
                           formatter_class=argparse.RawDescriptionHelpFormatter)
    add_common(p)
    if actor:
        p.add_argument("--host", "--harness", dest="harness", choices=HOSTS, default="manual", metavar="HOST",
                       help=f"the agent host acting: {', '.join(h for h in HOSTS if h != 'claude_code')} (default "
                       "manual; `claude` as `loopstate setup --host` names it, recorded as claude_code)")
        p.add_argument("--actor", default=None, help="actor label (default: your user name)")
        bind = (" and binds that host session to the run: its hooks (PreToolUse) then enforce the run's lease and "
                "budgets, as LOOPSTATE_RUN would") if name in ("create", "acquire") else ""
        p.add_argument("--session", default=None, help="the host session id (Claude Code's or Codex's session_id) the "
                       f"command acts for (default: cli); recorded as the actor's session{bind}")
    if lease:
        p.add_argument("--lease", help="your lease id (or a unique prefix); default: the run's current lease when "
                                       "you (your user name) acquired it")
        p.add_argument("--generation", type=int, help="your lease generation (with --lease)")
    if mutation:
        derived = f"; the new {derives} id is derived from it" if derives else ""
        p.add_argument("--request-id", default=None, help=f"idempotency key (reuse it to retry exactly{derived})")
    p.set_defaults(func=func)
    return p


def _run_arg(p: argparse.ArgumentParser) -> None:
    p.add_argument("run_id", metavar="RUN", help="run id or a unique prefix (`loopstate run list` shows them)")


def _completion_args(p: argparse.ArgumentParser) -> None:
    p.add_argument("--type", dest="completion_type", choices=COMPLETIONS, required=True,
                   help="the completion event the operation ends with")
    p.add_argument("--data", required=True, help="its exact data as JSON, or @FILE (the fields per type are below)")


# plumbing ------------------------------------------------------------------------------------

class _Session:
    """One command's service, root and id resolution (any unique prefix, see service.runs_project)."""

    def __init__(self, args: argparse.Namespace) -> None:
        from loopstate.service.engine import Service

        self.args = args
        self.service = Service()
        self.root = project_root(args)

    def run_id(self, given: str | None = None) -> str:
        from loopstate.service.runs_project import resolve_run

        return resolve_run(self.service, self.root, given if given is not None else self.args.run_id)

    def grant_id(self, given: str) -> str:
        from loopstate.service.runs_project import resolve_grant

        return resolve_grant(self.service, self.root, given)

    @overload
    def in_run(self, run_id: str, kind: InRun, given: str) -> str: ...

    @overload
    def in_run(self, run_id: str, kind: InRun, given: None) -> None: ...

    def in_run(self, run_id: str, kind: InRun, given: str | None) -> str | None:
        """An issue, evidence, operation or lease id of the run, by a unique prefix (None: not given)."""
        from loopstate.service.runs_project import resolve_in_run

        return None if given is None else resolve_in_run(self.service, self.root, run_id, kind, given)

    def lease(self, run_id: str) -> dict[str, Any]:
        """The lease a leased verb acts under: the one named, else the run's current one if this user holds it."""
        given, generation = self.args.lease, self.args.generation
        if (given is None) != (generation is None):
            raise LoopstateError(ErrorCode.INVALID_PARAMS, "give --lease and --generation together, or neither (then "
                                 "the run's current lease is used, when you acquired it)")
        if given is None:
            import getpass

            from loopstate.service.runs_project import own_lease

            return own_lease(self.service, self.root, run_id, getpass.getuser())
        return {"lease_id": self.in_run(run_id, "lease", given), "generation": generation}

    def execute(self, command) -> Any:
        return self.service.execute(self.root, command, self.args.request_id or str(uuid.uuid4()))


def _actor(args: argparse.Namespace) -> dict[str, str]:
    import getpass  # here: only commands that name an actor need it (it loads termios)

    return {"harness": HOST_RECORDED.get(args.harness, args.harness), "actor": args.actor or getpass.getuser(), "session_id": args.session or "cli"}


def _bind_session(args: argparse.Namespace, session: _Session, run_id: str) -> None:
    """``--session ID`` on create and acquire: that host session's hooks now enforce this run (service.sessions)."""
    if args.session:
        from loopstate.core.clock import format_time, system_clock
        from loopstate.service.sessions import bind_run

        bind_run(session.service.project(session.root), args.session, run_id, format_time(system_clock()))


def _report(args: argparse.Namespace, outcome, summary: str, **fields: Any) -> int:
    if args.json:
        emit_json({**fields, "events": outcome.events, "head": outcome.head, "replayed": outcome.replayed})
        return 0
    print(summary + (" (exact retry: nothing new written)" if outcome.replayed else ""))
    for event in outcome.events:
        run = event.get("projection", {}).get("run")
        status = f" -> {run['status']}" if run else ""
        print(f"  {event['sequence']:>5} {event['type']:<22}{status}")
    return 0


def _read_json(path: str) -> Any:
    try:
        raw = Path(path).read_bytes()
    except FileNotFoundError:
        raise LoopstateError(ErrorCode.NOT_FOUND, f"{path} does not exist; give the path of a JSON file", path=path) from None
    except IsADirectoryError:
        raise LoopstateError(ErrorCode.INVALID_PARAMS, f"{path} is a folder; give the path of a JSON file", path=path) from None
    except OSError as exc:
        raise LoopstateError(ErrorCode.INVALID_PARAMS, f"cannot read {path}: {exc.strerror}; check the path and its "
                             "permissions", path=path) from None
    try:
        text = raw.decode("utf-8")
    except UnicodeDecodeError:
        raise LoopstateError(ErrorCode.VALIDATION_FAILED, f"{path} is not UTF-8 text; save it as UTF-8 JSON",
                             field="$", rule="json") from None
    return parse_json(text, path)


def _json_arg(value: str, what: str) -> Any:
    """JSON given inline, or @FILE (as curl takes a request body)."""
    return _read_json(value[1:]) if value.startswith("@") else parse_json(value, what)


# verbs ----------------------------------------------------------------------------------------

def cmd_create(args: argparse.Namespace) -> int:
    from loopstate_protocol.runs import Create

    from loopstate.service.run_records import run_id_for_request

    session = _Session(args)
    run_id = run_id_for_request(args.request_id) if args.request_id else str(uuid.uuid4())
    command = Create(
        run_id=run_id, objective=args.objective, done_gate=args.done_gate,
        authority_grant_id=session.grant_id(args.grant) if args.grant else None,
        asset={"name": args.asset, "root": args.asset_root, "track": args.track,
               "boundaries": args.boundary or ["repository-local files"]},
        actor=_actor(args), mode=args.mode,
        budgets=parse_json(args.budgets, "--budgets") if args.budgets else None,
    )
    outcome = session.execute(command)
    _bind_session(args, session, run_id)
    grant_id = next((e["data"]["grant_id"] for e in outcome.events if e["type"] == "authority_granted"), None)
    if args.json:
        emit_json({"run_id": run_id, "authority_grant_id": grant_id, "events": outcome.events, "head": outcome.head,
                   "replayed": outcome.replayed})
        return 0
    print(run_id)
    return 0


def cmd_list(args: argparse.Namespace) -> int:
    import msgspec

    from loopstate_protocol.project import ProjectRuns

    session = _Session(args)
    listed = session.service.query(session.root, ProjectRuns(status=args.status))
    # The rows as `run list --json` has always printed them (project.runs adds lease_expires_at).
    runs = [{k: v for k, v in msgspec.structs.asdict(row).items() if k != "lease_expires_at"} for row in listed.runs]
    switch, total = listed.kill_switch, listed.total
    if args.json:
        emit_json({"runs": runs, "kill_switch": switch})
        return 0
    if switch.set:
        print(f"kill switch SET ({', '.join(switch.paths)}): every run of this project halts at its next command")
    if not runs:
        print(f"no runs in status {', '.join(args.status)} ({total} in other statuses)" if args.status and total
              else "no runs in this project; create one with `loopstate run create`")
        return 0
    print(f"{'RUN':<8}  {'STATUS':<18} {'STAGE':<10} {'OWNER':<14} {'MUTATIONS':>9} {'TIME (s)':>11}  OBJECTIVE")
    for row in runs:
        used = row["budgets"]
        mutations = f"{used['mutations'][0]}/{used['mutations'][1]}"
        seconds = f"{int(used['duration_seconds'][0])}/{used['duration_seconds'][1]}"
        print(f"{row['run_id'][:8]}  {_status_colour(row['status']):<18} {row['stage'] or '-':<10} {(row['owner'] or '-')[:14]:<14} "
              f"{mutations:>9} {seconds:>11}  {row['objective']}")
    return 0


def _status_colour(status: str) -> str:
    """A run's status, coloured on a terminal (cli/terminal.PALETTE["run"]): green active or complete, yellow
    ready or waiting, red ended badly. Padded before painting, so the columns line up with or without colour."""
    from loopstate.cli.terminal import painted

    return painted(status, "run", 18)


def cmd_status(args: argparse.Namespace) -> int:
    from loopstate_protocol.runs import Status

    session = _Session(args)
    status = session.service.query(session.root, Status(run_id=session.run_id()))
    if args.json:
        emit_json(status)
        return 0
    run, lease, switch = status.run, status.lease, status.kill_switch
    reason = run["terminal_reason"]
    halting = " (kill switch set: it halts at its next command)" if switch and switch.set and run["status"] == "active" else ""
    from loopstate.cli.terminal import paint, painted

    print(f"run {status.run_id}: {painted(run['status'], 'run')}"
          + (f" ({reason['code']}: {reason['explanation']})" if reason else "") + halting)
    if switch and switch.set:
        print(f"  kill switch: {paint('SET', 'red')} ({', '.join(switch.paths)}); project-wide: no run works or starts "
              "until `loopstate run unstop` lifts it")
    if switch and switch.config_error:
        print(f"  config: {switch.config_error}")
    print(f"  objective: {run['objective']}")
    print(f"  stage: {run['stage']}  grant: {run['authority_grant_id']}  blocking issues: {run['open_blocking_issues']}")
    usage, budgets = run["usage"], run["budgets"]
    print(f"  usage: {usage['duration_seconds']}s/{budgets['max_duration_seconds']}s, mutations {usage['mutations']}/"
          f"{budgets['max_mutations']}, external {usage['external_actions']}/{budgets['max_external_actions']}, "
          f"cost {usage['cost_usd'] or 'unrecorded'}/{budgets['max_cost_usd'] or 'none (no spending authority)'}")
    if lease:
        state = "expired" if status.lease_expired else "live"
        print(f"  lease: {lease['lease_id']} generation {lease['generation']} ({state}, expires {lease['expires_at']}) "
              f"held by {lease['owner']['actor']}")
    if status.pending_operation:
        p = status.pending_operation
        print(f"  pending: {p['operation_id']} {p['completion_event_type']} ({p['effect']})")
    for issue in status.issues:
        print(f"  issue {issue['issue_id']}: {issue['status']} {issue['severity']}"
              + (" blocking" if issue["blocking"] else "") + f" {issue['title']}")
    if status.missing_markers:
        print(f"  {status.missing_markers} budget marker(s) missing: the next command repairs them")
    print(f"  audit log: {status.sequence} events")
    return 0


def cmd_acquire(args: argparse.Namespace) -> int:
    from loopstate_protocol.runs import Acquire

    session = _Session(args)
    run_id = session.run_id()
    outcome = session.execute(Acquire(run_id=run_id, owner=_actor(args), lane_id=args.lane))
    _bind_session(args, session, run_id)
    lease = outcome.events[-1]["projection"]["lease"] if outcome.events else None
    summary = (f"lease {lease['lease_id']} generation {lease['generation']} until {lease['expires_at']}; keep it "
               f"with `loopstate run heartbeat {lease['run_id'][:8]}` before then (an expired lease fails the run)"
               if lease else "no change")
    return _report(args, outcome, summary)


def cmd_heartbeat(args: argparse.Namespace) -> int:
    from loopstate_protocol.runs import Heartbeat

    session = _Session(args)
    run_id = session.run_id()
    outcome = session.execute(Heartbeat(run_id=run_id, **session.lease(run_id)))
    return _report(args, outcome, "renewed" if outcome.events else "alive (the lease needs no renewal yet: nothing written)")


def cmd_transition(args: argparse.Namespace) -> int:
    from loopstate_protocol.runs import Transition

    session = _Session(args)
    run_id = session.run_id()
    outcome = session.execute(Transition(run_id=run_id, to=args.to, reason=args.reason, **session.lease(run_id)))
    return _report(args, outcome, f"run {run_id}: {args.to}")


def cmd_stage_start(args: argparse.Namespace) -> int:
    from loopstate_protocol.runs import StageStart

    session = _Session(args)
    run_id = session.run_id()
    outcome = session.execute(StageStart(run_id=run_id, stage=args.stage, **session.lease(run_id)))
    return _report(args, outcome, f"run {run_id}: stage {args.stage} started")


def cmd_stage_complete(args: argparse.Namespace) -> int:
    from loopstate_protocol.runs import StageComplete

    session = _Session(args)
    run_id = session.run_id()
    outcome = session.execute(StageComplete(run_id=run_id, stage=args.stage, outcome=args.outcome,
                                            **session.lease(run_id)))
    return _report(args, outcome, f"run {run_id}: stage {args.stage} completed ({args.outcome})")


def cmd_route_select(args: argparse.Namespace) -> int:
    from loopstate_protocol.runs import RouteSelect

    session = _Session(args)
    run_id = session.run_id()
    outcome = session.execute(RouteSelect(run_id=run_id, route=_read_json(args.file), **session.lease(run_id)))
    return _report(args, outcome, f"run {run_id}: route selected")


def cmd_intend(args: argparse.Namespace) -> int:
    from loopstate_protocol.runs import Intend

    session = _Session(args)
    run_id = session.run_id()
    outcome = session.execute(Intend(
        run_id=run_id, operation_id=args.operation, completion_event_type=args.completion_type,
        completion_data=_json_arg(args.data, "--data"), action=args.action, destination=args.destination,
        cost_usd=args.cost, **session.lease(run_id),
    ))
    operation_id = next((e["data"]["operation_id"] for e in outcome.events if e["type"] == "operation_intended"), None)
    if not args.json and operation_id is not None:
        print(operation_id)
        return 0
    return _report(args, outcome, "no operation intended", operation_id=operation_id)


def cmd_complete(args: argparse.Namespace) -> int:
    from loopstate_protocol.runs import Complete

    session = _Session(args)
    run_id = session.run_id()
    operation_id = session.in_run(run_id, "operation", args.operation_id)
    outcome = session.execute(Complete(
        run_id=run_id, operation_id=operation_id, completion_event_type=args.completion_type,
        completion_data=_json_arg(args.data, "--data"),
        record=_read_json(args.record) if args.record else None,
        **session.lease(run_id),
    ))
    return _report(args, outcome, f"operation {operation_id}: {args.completion_type} recorded")


def cmd_issue_open(args: argparse.Namespace) -> int:
    from loopstate_protocol.runs import IssueOpen

    session = _Session(args)
    run_id = session.run_id()
    outcome = session.execute(IssueOpen(
        run_id=run_id, title=args.title, severity=args.severity, blocking=args.blocking,
        requirement_ids=args.requirement, reproduction=args.reproduction, regression_procedure=args.regression,
        **session.lease(run_id),
    ))
    issue_id = next((e["data"]["issue_id"] for e in outcome.events if e["type"] == "issue_opened"), None)
    return _report(args, outcome, f"issue {issue_id}", issue_id=issue_id)


def cmd_issue_update(args: argparse.Namespace) -> int:
    from loopstate_protocol.runs import IssueUpdate

    session = _Session(args)
    run_id = session.run_id()
    issue_id = session.in_run(run_id, "issue", args.issue_id)
    outcome = session.execute(IssueUpdate(run_id=run_id, issue_id=issue_id, status=args.status,
                                          resolution=args.resolution, **session.lease(run_id)))
    return _report(args, outcome, f"issue {issue_id}: {args.status}")


def cmd_evidence_add(args: argparse.Namespace) -> int:
    from loopstate_protocol.runs import EvidenceAdd

    session = _Session(args)
    run_id = session.run_id()
    outcome = session.execute(EvidenceAdd(run_id=run_id, evidence=_read_json(args.file), **session.lease(run_id)))
    evidence_id = next((e["data"]["evidence_id"] for e in outcome.events if e["type"] == "evidence_recorded"), None)
    return _report(args, outcome, f"evidence {evidence_id}", evidence_id=evidence_id)


def cmd_grant(args: argparse.Namespace) -> int:
    from loopstate_protocol.runs import AuthorityGrant

    from loopstate.service.run_records import grant_id_for_request

    session = _Session(args)
    grant_id = grant_id_for_request(args.request_id) if args.request_id else str(uuid.uuid4())
    outcome = session.execute(AuthorityGrant(
        grant_id=grant_id, level=args.level, actor=args.grantor,
        scope={"assets": args.asset, "actions": args.action, "destinations": args.destination, "exclusions": args.exclude},
        risks_shown=args.risk, confirmation_text=args.confirm, expires_at=args.expires,
    ))
    if args.json:
        emit_json({"grant_id": grant_id, "events": outcome.events, "replayed": outcome.replayed})
    else:
        print(grant_id)
    return 0


def cmd_grant_show(args: argparse.Namespace) -> int:
    from loopstate_protocol.runs import GrantShow

    session = _Session(args)
    grant = session.service.query(session.root, GrantShow(grant_id=session.grant_id(args.grant_id)))
    if args.json:
        emit_json(grant)
        return 0
    scope = grant["scope"]
    state = f"revoked at {grant['revoked_at']} by {grant['revoked_by']}" if grant["revoked_at"] else f"expires {grant['expires_at']}"
    print(f"grant {grant['grant_id']}: {grant['level']} by {grant['actor']}, {state}")
    for name in ("assets", "actions", "destinations", "exclusions"):
        print(f"  {name}: {', '.join(scope[name]) or '(none)'}")
    return 0


def cmd_revoke(args: argparse.Namespace) -> int:
    from loopstate_protocol.runs import AuthorityRevoke

    session = _Session(args)
    grant_id = session.grant_id(args.grant_id)
    outcome = session.execute(AuthorityRevoke(grant_id=grant_id, revoked_by=args.revoker))
    if args.json:
        emit_json({"events": outcome.events})
    else:
        print(f"grant {grant_id} revoked" if outcome.events else f"grant {grant_id} was already revoked")
    return 0


def cmd_stop(args: argparse.Namespace) -> int:
    from loopstate_protocol.runs import Stop

    session = _Session(args)
    if args.cancel is not None:
        if args.run_id is not None:
            raise LoopstateError(ErrorCode.INVALID_PARAMS, "give the run to cancel once: `loopstate run stop --cancel RUN`")
        run_id = session.run_id(args.cancel)
        outcome = session.execute(Stop(run_id=run_id, actor=_actor(args), cancel=True, reason=args.reason))
        return _report(args, outcome, f"run {run_id}: cancelled (no kill switch set; other runs go on)")
    import msgspec

    from loopstate_protocol.project import ProjectRuns, ProjectStop

    # First: a typo below must not keep the switch unset.
    done = session.execute(ProjectStop(actor=_actor(args))).project
    result: dict[str, Any] = {
        "root": done.root, "kill_switch": done.kill_switch, "halted": done.halted,
        "failed": msgspec.to_builtins(done.failed), "projects": msgspec.to_builtins(done.projects),
        "state": msgspec.to_builtins(done.state),
    }
    if args.run_id is not None:
        try:
            named = session.run_id()
            known = {row.run_id for row in session.service.query(session.root, ProjectRuns()).runs}
            if named not in known:
                # A whole id passes the prefix check unlooked-at: the run may be another project's, which
                # this project's switch does not reach. Say so, loudly: a stop that misses must not look done.
                raise LoopstateError(
                    ErrorCode.NOT_FOUND,
                    f"run {named} is not a run of this project ({session.root}), so this project's kill switch "
                    "does not reach it; if it runs in another project, stop it there "
                    "(`loopstate run stop RUN --root THAT_PROJECT`)", run_id=named,
                )
        except LoopstateError as error:
            result["named"] = {"given": args.run_id, "code": error.code.value, "message": error.message}
            sys.stderr.write(f"loopstate: note: {error.message} (this project's kill switch is set all the same)\n")
        else:
            result["named"] = {"run_id": named, "halted": named in result["halted"]}
    if args.json:
        emit_json(result)
    else:
        for index, reached in enumerate(result["projects"]):
            halted = reached["halted"]
            print(f"kill switch set: {reached['kill_switch']}" + ("" if index == 0 else
                  f" (an enclosing project, {reached['root']}: a stop reaches the projects around this one too)"))
            print(f"  project-wide: every run of {'this' if index == 0 else 'that'} project halts and no run starts "
                  f"while it stands; halted {len(halted)} run(s) now"
                  + (f": {', '.join(r[:8] for r in halted)}" if halted else ""))
            for failure in reached["failed"]:
                print(f"  run {failure['run_id'][:8]} did not record its halt ({failure['code']}: "
                      f"{failure['message']}); it still halts at its next command")
            if index == 0 and done.state.shared is not None:
                print(f"  recorded in the shared store {done.state.shared} too: every machine of the project "
                      "denies its next tool call, and its runs halt")
        named = result.get("named", {})
        if args.run_id is not None:
            print(f"  run stop {args.run_id} stopped every run, not only {args.run_id}: the kill switch is "
                  f"project-wide; `loopstate run stop --cancel RUN` stops one run")
        if named.get("halted") is False:
            print(f"  run {named['run_id'][:8]} had ended or halted already: nothing to halt now")
        print("  clear it with `loopstate run unstop`, then resume each halted run (`loopstate run resume RUN`)")
    return 0


def cmd_unstop(args: argparse.Namespace) -> int:
    """Clear the kill switch (project.resume): the switch files inside .loopstate go; halted runs stay halted."""
    import msgspec

    from loopstate_protocol.project import ProjectResume

    session = _Session(args)
    done = session.service.execute(session.root, ProjectResume(actor=_actor(args)), str(uuid.uuid4())).project
    if args.json:
        emit_json(msgspec.to_builtins(done))
        return 0 if not done.state.set else 1
    for path in done.removed:
        print(f"kill switch cleared: removed {path}")
    for kept in done.kept:
        print(f"kill switch still set: {kept.path}: {kept.reason}")
    if not done.removed and not done.kept:
        print("no kill switch was set")
    if done.state.set:
        print(f"  the kill switch still stands ({', '.join(done.state.paths)}): runs stay halted and none starts")
    if done.halted_runs:
        print(f"  {len(done.halted_runs)} run(s) stay halted until each is resumed (`loopstate run resume RUN`): "
              + ", ".join(run_id[:8] for run_id in done.halted_runs))
    return 0 if not done.state.set else 1


def cmd_resume(args: argparse.Namespace) -> int:
    from loopstate_protocol.runs import Resume

    session = _Session(args)
    run_id = session.run_id()
    outcome = session.execute(Resume(run_id=run_id, owner=_actor(args), reason=args.reason,
                                     lease_id=session.in_run(run_id, "lease", args.lease), generation=args.generation,
                                     authority_grant_id=session.grant_id(args.grant) if args.grant else None))
    lease = outcome.events[-1]["projection"]["lease"] if outcome.events else None
    summary = f"recovered: lease {lease['lease_id']} generation {lease['generation']}" if lease else "no change"
    return _report(args, outcome, summary)


def cmd_reconcile(args: argparse.Namespace) -> int:
    from loopstate_protocol.runs import Reconcile

    session = _Session(args)
    run_id = session.run_id()
    operation_id = session.in_run(run_id, "operation", args.operation_id)
    outcome = session.execute(Reconcile(run_id=run_id, operation_id=operation_id, outcome=args.outcome,
                                        actor=_actor(args), lease_id=session.in_run(run_id, "lease", args.lease),
                                        generation=args.generation))
    return _report(args, outcome, f"operation {operation_id}: {args.outcome}")


def cmd_sync(args: argparse.Namespace) -> int:
    from loopstate_protocol.runs import Sync

    session = _Session(args)
    run_id = session.run_id()
    outcome = session.execute(Sync(run_id=run_id, actor=_actor(args)))
    return _report(args, outcome, f"run {run_id}: " + ("safety truth written" if outcome.events else "nothing missing"))


def cmd_validate(args: argparse.Namespace) -> int:
    from loopstate.service.run_records import check_record

    if args.kind not in KINDS:
        raise LoopstateError(ErrorCode.INVALID_PARAMS,
                             f"unknown record kind {args.kind!r}; use one of: {', '.join(KINDS)}", kind=args.kind)
    check_record(args.kind, _read_json(args.file))
    if args.json:
        emit_json({"ok": True, "kind": args.kind})
    else:
        print(f"{args.file}: a valid {args.kind} record")
    return 0
