"""`loopstate run ...` (bounded runs) and `loopstate validate KIND FILE`.

A thin front door: each verb builds one runs command or query and hands it to
the same Service the sidecar uses. Ids (run, grant) are made here so an exact
retry (same --request-id) lands on the same stream.
"""

from __future__ import annotations

import argparse
import getpass
import os
import sys
import uuid
from pathlib import Path
from typing import Any

from loopstate_protocol.errors import ErrorCode

from loopstate.cli.output import add_common, emit_json, project_root
from loopstate.core.errors import LoopstateError
from loopstate.domains.runs.records import parse_json

HARNESSES = ("codex", "claude_code", "kimi_code", "opencode", "deepseek_harness", "manual")
KINDS = ("config", "run", "lease", "grant", "route", "evidence", "issue_ledger", "install_receipt", "audit_event",
         "harness_status")


def register(sub: argparse._SubParsersAction) -> None:
    run = sub.add_parser("run", help="bounded runs: leases, budgets, authority, kill switch, audit log")
    verbs = run.add_subparsers(dest="run_verb", metavar="VERB")
    run.set_defaults(func=_usage(run))

    p = _verb(verbs, "create", "create a ready run bound to an authority grant", cmd_create, actor=True)
    p.add_argument("--grant", help="authority grant id (see `loopstate run authority grant`); without it, the seed's "
                                   "default local authority: a new attended grant for local_write to repository on "
                                   "this asset only, expiring after 24 hours")
    p.add_argument("--objective", required=True, help="one bounded outcome")
    p.add_argument("--done-gate", action="append", required=True, help="a testable condition (repeatable)")
    p.add_argument("--asset", required=True, help="asset name (must be in the grant's scope)")
    p.add_argument("--asset-root", default=".", help="asset root, relative to the project (default .)")
    p.add_argument("--track", choices=("code", "noncode"), default="code")
    p.add_argument("--boundary", action="append", help="a declared boundary (repeatable; default: repository-local files)")
    p.add_argument("--mode", choices=("loop", "auto"), default=None, help="default: the project config's default_mode")
    p.add_argument("--budgets", help="frozen budgets as JSON (default: the project config's)")

    p = _verb(verbs, "status", "show a run's projection, lease, pending operation and issues", cmd_status, mutation=False)
    p.add_argument("run_id")

    p = _verb(verbs, "acquire", "take a ready run's first lease", cmd_acquire, actor=True)
    p.add_argument("run_id")
    p.add_argument("--lane", help="lane id (UUIDv4)")

    p = _verb(verbs, "heartbeat", "renew your own lease (coalesced until a renewal is due)", cmd_heartbeat, lease=True)
    p.add_argument("run_id")

    p = _verb(verbs, "transition", "move an active run (waiting_approval, waiting_external, blocked, complete, failed, cancelled)",
              cmd_transition, lease=True)
    p.add_argument("run_id")
    p.add_argument("to")
    p.add_argument("--reason", required=True)

    issue_parser = verbs.add_parser("issue", help="the run's issue ledger")
    issue_parser.set_defaults(func=_usage(issue_parser))
    issue = issue_parser.add_subparsers(dest="issue_verb", metavar="VERB")
    p = _verb(issue, "open", "open an issue", cmd_issue_open, lease=True)
    p.add_argument("run_id")
    p.add_argument("--title", required=True)
    p.add_argument("--severity", choices=("critical", "high", "medium", "low"), required=True)
    p.add_argument("--blocking", action="store_true")
    p.add_argument("--requirement", action="append", default=[])
    p.add_argument("--reproduction", action="append", default=[])
    p.add_argument("--regression", action="append", default=[])
    p = _verb(issue, "update", "move an issue to another status", cmd_issue_update, lease=True)
    p.add_argument("run_id")
    p.add_argument("issue_id")
    p.add_argument("status", choices=("open", "acknowledged", "resolving", "verification_pending", "closed", "reopened", "deferred"))
    p.add_argument("--resolution")

    evidence_parser = verbs.add_parser("evidence", help="evidence records")
    evidence_parser.set_defaults(func=_usage(evidence_parser))
    evidence = evidence_parser.add_subparsers(dest="evidence_verb", metavar="VERB")
    p = _verb(evidence, "add", "record evidence from a JSON file (without evidence_id, run_id, actor, observed_at)",
              cmd_evidence_add, lease=True)
    p.add_argument("run_id")
    p.add_argument("file", help="JSON file with stage, requirement_ids, type, description, procedure, outcome, "
                                "artifact_refs, digest, environment")

    auth_parser = verbs.add_parser("authority", help="authority grants")
    auth_parser.set_defaults(func=_usage(auth_parser))
    auth = auth_parser.add_subparsers(dest="authority_verb", metavar="VERB")
    p = _verb(auth, "grant", "record a typed, confirmed, expiring authority grant", cmd_grant)
    p.add_argument("--level", choices=("attended", "bounded", "scoped", "operational", "full"), required=True)
    p.add_argument("--by", dest="grantor", required=True, help="user-confirmed identity label")
    p.add_argument("--asset", action="append", default=[], help="asset in scope ('*' for any; repeatable)")
    p.add_argument("--action", action="append", default=[], help="action in scope, e.g. local_write (repeatable)")
    p.add_argument("--destination", action="append", default=[], help="destination in scope, e.g. repository (repeatable)")
    p.add_argument("--exclude", action="append", default=[], help="explicit exclusion; wins over every entry (repeatable)")
    p.add_argument("--risk", action="append", required=True, help="a realistic risk shown before confirmation (repeatable)")
    p.add_argument("--confirm", required=True, help="the exact typed confirmation (no secrets)")
    p.add_argument("--expires", required=True, help="RFC 3339 UTC expiry; no grant is non-expiring")
    p = _verb(auth, "show", "show a grant as recorded (scope, expiry, revocation)", cmd_grant_show, mutation=False)
    p.add_argument("grant_id")
    p = _verb(auth, "revoke", "revoke a grant for good (each bound run gets its marker)", cmd_revoke)
    p.add_argument("grant_id")
    p.add_argument("--by", dest="revoker", required=True)

    p = _verb(verbs, "stop", "kill switch: create the STOP file and halt runs (or --cancel one run)", cmd_stop, actor=True)
    p.add_argument("run_id", nargs="?", help="the run to halt or cancel (default: every run of the project)")
    p.add_argument("--cancel", action="store_true", help="cancel the run instead of halting through the kill switch")
    p.add_argument("--reason", default="stopped by the user")

    p = _verb(verbs, "resume", "explicit recovery: fresh-generation lease, straight to active", cmd_resume, actor=True)
    p.add_argument("run_id")
    p.add_argument("--reason", required=True)
    p.add_argument("--lease", help="your own still-valid lease id, if any")
    p.add_argument("--generation", type=int)
    p.add_argument("--grant", help="replace the run's grant (only during recovery)")

    p = _verb(verbs, "reconcile", "close an interrupted operation as unknown (or known_not_started by its holder)",
              cmd_reconcile, actor=True)
    p.add_argument("run_id")
    p.add_argument("operation_id")
    p.add_argument("--outcome", choices=("unknown", "known_not_started"), default="unknown")
    p.add_argument("--lease")
    p.add_argument("--generation", type=int)

    validate = sub.add_parser("validate", help="check a hand-written seed record (config, run, lease, grant, ...)")
    # Not argparse choices: an unknown kind is refused like any bad input (exit 1, the kinds listed).
    validate.add_argument("kind", metavar="KIND", help="one of: " + ", ".join(KINDS))
    validate.add_argument("file")
    validate.add_argument("--json", action="store_true", help="print machine-readable JSON")
    validate.set_defaults(func=cmd_validate)


def _usage(parser: argparse.ArgumentParser):
    """A group named without its verb prints its own verbs (exit 2, as for any usage error)."""
    def show(args: argparse.Namespace) -> int:
        parser.print_help(sys.stderr)
        return 2
    return show


def _verb(sub, name: str, help_: str, func, *, actor: bool = False, lease: bool = False, mutation: bool = True):
    p = sub.add_parser(name, help=help_)
    add_common(p)
    if actor:
        p.add_argument("--harness", choices=HARNESSES, default="manual")
        p.add_argument("--actor", default=None, help="actor label (default: your user name)")
        p.add_argument("--session", default="cli", help="session id")
    if lease:
        p.add_argument("--lease", required=True, help="your lease id")
        p.add_argument("--generation", type=int, required=True, help="your lease generation")
    if mutation:
        p.add_argument("--request-id", default=None, help="idempotency key (reuse it to retry exactly)")
    p.set_defaults(func=func)
    return p


# plumbing ------------------------------------------------------------------------------------

def _service():
    from loopstate.service.engine import Service

    return Service()


def _actor(args: argparse.Namespace) -> dict[str, str]:
    return {"harness": args.harness, "actor": args.actor or getpass.getuser(), "session_id": args.session}


def _lease(args: argparse.Namespace) -> dict[str, Any]:
    return {"lease_id": args.lease, "generation": args.generation}


def _execute(args: argparse.Namespace, command, *, service=None) -> Any:
    service = service or _service()
    outcome = service.execute(project_root(args), command, args.request_id or str(uuid.uuid4()))
    return outcome


def _report(args: argparse.Namespace, outcome, summary: str) -> int:
    if args.json:
        emit_json({"events": outcome.events, "head": outcome.head, "replayed": outcome.replayed})
    else:
        print(summary)
        for event in outcome.events:
            run = event["projection"]["run"]
            print(f"  {event['sequence']:>5} {event['type']:<22} -> {run['status']}")
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


# verbs ----------------------------------------------------------------------------------------

def cmd_create(args: argparse.Namespace) -> int:
    from loopstate_protocol.runs import Create

    from loopstate.service.front import project_config

    run_id = str(uuid.uuid4())
    mode = args.mode or project_config(project_root(args))["default_mode"]
    budgets = parse_json(args.budgets, "--budgets") if args.budgets else None
    service = _service()
    grant_id = args.grant or _default_grant(args, service)
    command = Create(
        run_id=run_id, objective=args.objective, done_gate=args.done_gate, authority_grant_id=grant_id,
        asset={"name": args.asset, "root": args.asset_root, "track": args.track,
               "boundaries": args.boundary or ["repository-local files"]},
        actor=_actor(args), mode=mode, budgets=budgets,
    )
    outcome = _execute(args, command, service=service)
    if args.json:
        emit_json({"run_id": run_id, "authority_grant_id": grant_id, "events": outcome.events, "head": outcome.head})
        return 0
    print(run_id)
    return 0


DEFAULT_GRANT_HOURS = 24


def _default_grant(args: argparse.Namespace, service) -> str:
    """The seed's "default local authority" for `run create`: the narrowest grant that lets the run work.

    Level attended, scope this asset with only the exact local pair (local_write to repository), so every
    outward action stays fail-closed; it expires (no grant is non-expiring) and can be revoked like any other.
    """
    import datetime as dt

    from loopstate_protocol.runs import AuthorityGrant

    from loopstate.core.clock import format_time

    grant_id = str(uuid.uuid4())
    service.execute(project_root(args), AuthorityGrant(
        grant_id=grant_id, level="attended", actor=args.actor or getpass.getuser(),
        scope={"assets": [args.asset], "actions": ["local_write"], "destinations": ["repository"], "exclusions": []},
        risks_shown=[f"Files of asset {args.asset} inside the repository may be changed by the agent."],
        confirmation_text="default local authority (loopstate run create without --grant)",
        expires_at=format_time(service.clock() + dt.timedelta(hours=DEFAULT_GRANT_HOURS)),
    ), str(uuid.uuid4()))
    return grant_id


def cmd_status(args: argparse.Namespace) -> int:
    from loopstate_protocol.runs import Status

    status = _service().query(project_root(args), Status(run_id=args.run_id))
    if args.json:
        emit_json(status)
        return 0
    run, lease = status.run, status.lease
    reason = run["terminal_reason"]
    print(f"run {status.run_id}: {run['status']}" + (f" ({reason['code']}: {reason['explanation']})" if reason else ""))
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
    if status.missing_markers:
        print(f"  {status.missing_markers} budget marker(s) missing: the next command repairs them")
    print(f"  audit log: {status.sequence} events")
    return 0


def cmd_acquire(args: argparse.Namespace) -> int:
    from loopstate_protocol.runs import Acquire

    outcome = _execute(args, Acquire(run_id=args.run_id, owner=_actor(args), lane_id=args.lane))
    lease = outcome.events[-1]["projection"]["lease"] if outcome.events else None
    summary = f"lease {lease['lease_id']} generation {lease['generation']} until {lease['expires_at']}" if lease else "no change"
    return _report(args, outcome, summary)


def cmd_heartbeat(args: argparse.Namespace) -> int:
    from loopstate_protocol.runs import Heartbeat

    outcome = _execute(args, Heartbeat(run_id=args.run_id, **_lease(args)))
    return _report(args, outcome, "renewed" if outcome.events else "alive (coalesced: the lease needs no renewal yet)")


def cmd_transition(args: argparse.Namespace) -> int:
    from loopstate_protocol.runs import Transition

    outcome = _execute(args, Transition(run_id=args.run_id, to=args.to, reason=args.reason, **_lease(args)))
    return _report(args, outcome, f"run {args.run_id}: {args.to}")


def cmd_issue_open(args: argparse.Namespace) -> int:
    from loopstate_protocol.runs import IssueOpen

    outcome = _execute(args, IssueOpen(
        run_id=args.run_id, title=args.title, severity=args.severity, blocking=args.blocking,
        requirement_ids=args.requirement, reproduction=args.reproduction, regression_procedure=args.regression,
        **_lease(args),
    ))
    issue_id = next((e["data"]["issue_id"] for e in outcome.events if e["type"] == "issue_opened"), None)
    return _report(args, outcome, f"issue {issue_id}")


def cmd_issue_update(args: argparse.Namespace) -> int:
    from loopstate_protocol.runs import IssueUpdate

    outcome = _execute(args, IssueUpdate(run_id=args.run_id, issue_id=args.issue_id, status=args.status,
                                         resolution=args.resolution, **_lease(args)))
    return _report(args, outcome, f"issue {args.issue_id}: {args.status}")


def cmd_evidence_add(args: argparse.Namespace) -> int:
    from loopstate_protocol.runs import EvidenceAdd

    outcome = _execute(args, EvidenceAdd(run_id=args.run_id, evidence=_read_json(args.file), **_lease(args)))
    evidence_id = next((e["data"]["evidence_id"] for e in outcome.events if e["type"] == "evidence_recorded"), None)
    return _report(args, outcome, f"evidence {evidence_id}")


def cmd_grant(args: argparse.Namespace) -> int:
    from loopstate_protocol.runs import AuthorityGrant

    grant_id = str(uuid.uuid4())
    outcome = _execute(args, AuthorityGrant(
        grant_id=grant_id, level=args.level, actor=args.grantor,
        scope={"assets": args.asset, "actions": args.action, "destinations": args.destination, "exclusions": args.exclude},
        risks_shown=args.risk, confirmation_text=args.confirm, expires_at=args.expires,
    ))
    if args.json:
        emit_json({"grant_id": grant_id, "events": outcome.events})
    else:
        print(grant_id)
    return 0


def cmd_grant_show(args: argparse.Namespace) -> int:
    from loopstate_protocol.runs import GrantShow

    grant = _service().query(project_root(args), GrantShow(grant_id=args.grant_id))
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

    outcome = _execute(args, AuthorityRevoke(grant_id=args.grant_id, revoked_by=args.revoker))
    if args.json:
        emit_json({"events": outcome.events})
    else:
        print(f"grant {args.grant_id} revoked" if outcome.events else f"grant {args.grant_id} was already revoked")
    return 0


def cmd_stop(args: argparse.Namespace) -> int:
    from loopstate_protocol.runs import Stop

    service = _service()
    root = project_root(args)
    if args.run_id is not None:
        outcome = _execute(args, Stop(run_id=args.run_id, actor=_actor(args), cancel=args.cancel, reason=args.reason),
                           service=service)
        return _report(args, outcome, f"run {args.run_id}: {'cancelled' if args.cancel else 'kill switch set'}")
    if args.cancel:
        raise LoopstateError(ErrorCode.INVALID_PARAMS, "--cancel needs the run id to cancel")
    from loopstate.domains.runs import RUN_PREFIX
    from loopstate.service.front import create_kill_switch

    path = create_kill_switch(root, "created by `loopstate run stop`\n")
    halted = []
    for stream in service.project(root).stream_names():
        if stream.startswith(RUN_PREFIX):
            run_id = stream[len(RUN_PREFIX):]
            outcome = service.execute(root, Stop(run_id=run_id, actor=_actor(args)), str(uuid.uuid4()))
            if outcome.events:
                halted.append(run_id)
    if args.json:
        emit_json({"kill_switch": os.fspath(path), "halted": halted})
    else:
        print(f"kill switch set: {path}; halted {len(halted)} run(s); remove the file yourself before resuming")
    return 0


def cmd_resume(args: argparse.Namespace) -> int:
    from loopstate_protocol.runs import Resume

    outcome = _execute(args, Resume(run_id=args.run_id, owner=_actor(args), reason=args.reason, lease_id=args.lease,
                                    generation=args.generation, authority_grant_id=args.grant))
    lease = outcome.events[-1]["projection"]["lease"] if outcome.events else None
    summary = f"recovered: lease {lease['lease_id']} generation {lease['generation']}" if lease else "no change"
    return _report(args, outcome, summary)


def cmd_reconcile(args: argparse.Namespace) -> int:
    from loopstate_protocol.runs import Reconcile

    outcome = _execute(args, Reconcile(run_id=args.run_id, operation_id=args.operation_id, outcome=args.outcome,
                                       actor=_actor(args), lease_id=args.lease, generation=args.generation))
    return _report(args, outcome, f"operation {args.operation_id}: {args.outcome}")


def cmd_validate(args: argparse.Namespace) -> int:
    from loopstate.domains.runs.records import validate, validate_written_event

    if args.kind not in KINDS:
        raise LoopstateError(ErrorCode.INVALID_PARAMS,
                             f"unknown record kind {args.kind!r}; use one of: {', '.join(KINDS)}", kind=args.kind)
    data = _read_json(args.file)
    if args.kind == "audit_event":  # an event loopstate wrote carries its own few added fields (docs/runs.md)
        validate_written_event(data)
    else:
        validate(args.kind, data)
    if args.json:
        emit_json({"ok": True, "kind": args.kind})
    else:
        print(f"{args.file}: a valid {args.kind} record")
    return 0
