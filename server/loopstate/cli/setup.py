"""`loopstate setup plan|apply|uninstall` and `loopstate doctor`: install into Claude Code or Codex, and check it.

A thin front door over loopstate.install: the merge rules, receipts and checks
live there. The project (for --scope project and for doctor's project files) is
found from the current directory upward, as for every other verb.
"""

from __future__ import annotations

import argparse
import re
import sys

from loopstate.cli.output import add_common, emit_json, project_root

HOST_NAMES = ("claude", "codex")


def register(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("setup", help="register loopstate's hooks in Claude Code or Codex (plan, apply, uninstall)",
                       description="Register `loopstate hook HOST EVENT` in a host's config, merged with what is "
                                   "there (other hooks and settings keep their bytes). plan prints the exact diff "
                                   "and writes nothing; apply writes it and an install receipt; uninstall undoes "
                                   "what the receipts did. See docs/setup.md.")
    verbs = p.add_subparsers(dest="setup_verb", metavar="VERB", required=True)
    for verb, text in (("plan", "print the diff apply would write; write nothing"),
                       ("apply", "write the registration and an install receipt (a re-apply changes nothing)"),
                       ("uninstall", "undo what loopstate's receipts did (restore what they replaced)")):
        v = verbs.add_parser(verb, help=text, description=text[0].upper() + text[1:] + ".")
        add_common(v)
        v.add_argument("--host", choices=HOST_NAMES, required=True)
        v.add_argument("--scope", choices=("user", "project"), default="user",
                       help="user: the host's config in your home (default); project: the project's own")
        if verb != "uninstall":
            v.add_argument("--executable", metavar="PATH",
                           help="the loopstate executable the hooks run (default: this one)")
            v.add_argument("--mcp", action=argparse.BooleanOptionalAction, default=None,
                           help="also register `loopstate mcp` as the host's MCP server `loopstate` (default: when "
                                "the MCP SDK is installed: pip install 'loopstate[mcp]')")
            v.add_argument("--trust-hooks", action="store_true",
                           help="Codex: record your trust of loopstate's hooks in Codex's config.toml, as its "
                                "/hooks does (Codex runs no hook you have not trusted); on a terminal apply asks")
        if verb != "plan":
            v.add_argument("--approve", action="store_true",
                           help="go ahead although the file changed since loopstate wrote it")
        v.set_defaults(func=cmd_setup)

    d = sub.add_parser("doctor", help="check each host: installed, hooks registered, each hook's output valid",
                       description="Per host: its CLI and version, whether its config holds loopstate's hooks and "
                                   "their executable exists, a run of each hook with a synthetic input whose output "
                                   "must be what the host accepts, and other hooks on the same events that could "
                                   "deny or block. Exit 1 when a check failed (the fix is in the message).")
    add_common(d)
    d.add_argument("--host", choices=HOST_NAMES, action="append",
                   help="check only this host (repeatable; default: every host that is installed or set up)")
    d.set_defaults(func=cmd_doctor)


def _places(args: argparse.Namespace, *, need_project: bool):
    from loopstate.install.setup import Places

    return Places.from_environment(project_root(args) if need_project else None)


def cmd_setup(args: argparse.Namespace) -> int:
    from loopstate.install import setup
    from loopstate.install.hosts import HOSTS

    host = HOSTS[args.host]
    places = _places(args, need_project=args.scope == "project")
    if args.setup_verb == "uninstall":
        if not setup.plan_uninstall(places, host, args.scope, approve=True):
            return _uninstall(args, setup, places, host)  # nothing to undo: said so, nothing written
        with setup.installs_lock(places):
            return _uninstall(args, setup, places, host)
    executable = setup.program_for(host, args.scope, args.executable)
    mcp = setup.mcp_available() if args.mcp is None else args.mcp
    trust = _codex_trust_consent(args, host)
    if args.setup_verb == "plan":
        plan = setup.make_plan(places, host, args.scope, executable, mcp=mcp, trust=trust)
        # Without the MCP SDK, apply leaves the MCP entry out; the plan still shows it, and how to get it.
        with_mcp = (setup.make_plan(places, host, args.scope, executable, mcp=True, trust=trust)
                    if args.mcp is None and not mcp else None)
        if args.json:
            emit_json({**plan.to_dict(), "mcp_available": mcp or args.mcp is not None,
                       "with_mcp_extra": with_mcp.to_dict() if with_mcp is not None else None})
        else:
            _print_plan(plan)
            if with_mcp is not None:
                print(f"\nThe MCP server entry is left out: `loopstate mcp` needs the MCP SDK, which is not installed "
                      f"here. Install it with `pip install 'loopstate[mcp]'` (in loopstate's environment); then "
                      f"`loopstate setup apply --host {host.name}` also writes this:")
                planned = {f.target.path: f.after for f in plan.files}
                for f in [f for f in with_mcp.files if planned.get(f.target.path) != f.after]:
                    sys.stdout.write(f.diff())
        return 0
    plan = setup.make_plan(places, host, args.scope, executable, mcp=mcp, trust=trust)
    done = None
    if not plan.noop:  # a re-apply writes nothing at all, not even the lock's owner record
        with setup.installs_lock(places):
            # planned again, under the lock
            plan = setup.make_plan(places, host, args.scope, executable, mcp=mcp, trust=trust)
            done = setup.apply(places, plan, approve=args.approve)
    closing = _codex_closing(args, places) if host.name == "codex" else []
    if args.json:
        emit_json({**plan.to_dict(), "receipt": done, "next_steps": closing})
    elif done is None:
        print(f"{', '.join(f.target.path for f in plan.files)}: already set up for {host.label}: nothing to do")
    else:
        for f in plan.files:
            what = " and ".join(w for w, on in ((f"{len(host.events)} hooks", f.target.hooks),
                                                ("the MCP server loopstate", f.target.mcp and mcp),
                                                ("the /intent command", f.target.file_format == "command")) if on)
            print(f"{'kept' if f.noop else 'wrote'} {f.target.path} ({what})")
        print(f"receipt {done['receipt_id']}; undo with `loopstate setup uninstall --host {host.name} "
              f"--scope {args.scope}`")
    if not args.json and (shared := setup.shared_files(plan)):
        print("commit these with the project (they hold no path of this machine; each teammate needs `loopstate` "
              f"on PATH): {', '.join(shared)}")
    if not args.json:
        for line in closing:
            print(line)
    return 0


CODEX_TRUST_EXPLAINED = ("Codex runs a hook from config.toml only after you trust it (its /hooks records a hash of "
                         "each hook in your config.toml; `codex exec` skips an untrusted hook without a word, so "
                         "a STOP would not stop anything).")


def _codex_trust_consent(args: argparse.Namespace, host) -> bool:
    """The user's consent to trust our Codex hooks: --trust-hooks, or a yes to the question on a terminal
    (apply only; never asked with --json or when stdin is not a terminal)."""
    if host.name != "codex" or args.trust_hooks:
        return bool(args.trust_hooks) and host.name == "codex"
    if args.setup_verb != "apply" or args.json or args.scope != "user" or not (sys.stdin.isatty() and sys.stdout.isatty()):
        return False
    print(CODEX_TRUST_EXPLAINED)
    try:
        answer = input("Trust loopstate's hooks in Codex now, as /hooks would? [y/N] ")
    except EOFError:
        return False
    return answer.strip().lower() in ("y", "yes")


def _codex_closing(args: argparse.Namespace, places) -> list[str]:
    """What the user reads last after a Codex apply while Codex would not run every hook setup registered: why,
    and the one step that makes it (as the very last line)."""
    from loopstate.install.doctor import codex_untrusted

    lines = []
    untrusted = codex_untrusted(places)
    if untrusted and args.scope == "user":
        lines.append(CODEX_TRUST_EXPLAINED)
        lines.append(f"{len(untrusted)} of loopstate's hooks are not trusted yet; to make Codex run them: "
                     f"loopstate setup apply --host codex --trust-hooks")
    elif untrusted:
        lines.append(CODEX_TRUST_EXPLAINED)
        lines.append(f"{len(untrusted)} of loopstate's hooks are not trusted yet (Codex keeps a project's trust in "
                     "your own config only); to make Codex run them: open /hooks in Codex in this project and "
                     "trust each loopstate hook")
    return lines


def _print_plan(plan) -> None:
    if plan.noop:
        print(f"{', '.join(f.target.path for f in plan.files)}: already set up for {plan.host.label}: "
              "apply changes nothing")
        return
    for f in plan.files:
        for folder in f.folders:
            print(f"create folder {f.target.root}/{folder}")
        sys.stdout.write(f.diff())
        if f.changed_since is not None and not f.noop:
            print(f"note: {f.target.path} changed since loopstate wrote it (receipt "
                  f"{f.changed_since['receipt_id']}): apply needs --approve")


def _uninstall(args, setup, places, host) -> int:
    undos = setup.plan_uninstall(places, host, args.scope, approve=args.approve)
    if not undos:
        paths = ", ".join(t.path for t in places.targets(host, args.scope))
        if args.json:
            emit_json({"files": [], "kept_folders": []})
        else:
            print(f"nothing to uninstall: no receipt of `loopstate setup apply --host {host.name} --scope "
                  f"{args.scope}` for {paths}")
        return 0
    kept = setup.uninstall(places, undos)
    if args.json:
        emit_json({"files": [{"path": u.target.path, "receipts": [r["receipt_id"] for r in u.receipts],
                              "steps": u.steps, "removed": u.final is None} for u in undos], "kept_folders": kept})
        return 0
    for undo in undos:
        for step in undo.steps:
            print(step)
        print(f"{'removed' if undo.final is None else 'restored'} {undo.target.path}")
    for folder in kept:
        print(f"kept folder {folder}: something else is in it now")
    return 0


PROGRESS_WIDTH = 79


def _doctor_progress():
    """On a terminal's stderr, one line that says which host is being checked (each takes a few seconds)."""
    if not sys.stderr.isatty():
        return None

    def show(host: str, index: int, total: int) -> None:
        # Plain text and a carriage return: stderr on a terminal shows escape sequences as text (cli/terminal.py).
        line = f"loopstate doctor: checking {host} ({index + 1}/{total}): running its hooks and probes..."
        sys.stderr.write("\r" + line[:PROGRESS_WIDTH].ljust(PROGRESS_WIDTH))
        sys.stderr.flush()

    return show


def cmd_doctor(args: argparse.Namespace) -> int:
    from loopstate.install import doctor

    report = doctor.run(_places(args, need_project=True), args.host, progress=_doctor_progress())
    if sys.stderr.isatty():
        sys.stderr.write("\r" + " " * PROGRESS_WIDTH + "\r")  # the progress line, cleared before the report
    if args.json:
        emit_json(report.to_dict())
    else:
        sys.stdout.write(_painted_report(report.text()))
    return 0 if report.ok else 1


_VERDICT_LINE = re.compile(r"^(\s*)(discovery|behavior):(\s+)(\w+)")
_LABEL_LINE = re.compile(r"^(\s*)(problem|note)(:)")


def _painted_report(text: str) -> str:
    """The doctor's report with what a person scans for painted on a terminal (cli/terminal.PALETTE):
    each verdict (verified green, unverified yellow, failed or denied red), ``problem`` red, ``note``
    yellow, and the last line green when all is well, red when not. The words stay as they are."""
    from loopstate.cli.terminal import colour_on, paint, painted

    if not colour_on(sys.stdout):
        return text
    lines = text.splitlines()
    for index, line in enumerate(lines):
        verdict = _VERDICT_LINE.match(line)
        label = _LABEL_LINE.match(line)
        if verdict:
            head = verdict.group(1) + verdict.group(2) + ":" + verdict.group(3)
            lines[index] = head + painted(verdict.group(4), "verdict") + line[verdict.end():]
        elif label:
            lines[index] = label.group(1) + painted(label.group(2), "verdict") + line[label.end(2):]
    if lines:
        last = lines[-1]
        lines[-1] = paint(last, "green" if last == "ok" else "red")
    return "\n".join(lines) + "\n"
