"""What a harness hook decides, from plain facts: pure rules across the three domains.

A hook sees one host event and a few facts the service gathered (a standing
kill switch, the bound run's status, open gates, the intent hook context). The
rules here turn them into the three things a host can be told: context to
inject, a tool denial, a stop block. No file, clock or id is touched here, so
every rule is a table of plain values in tests/hooks/.
"""

from __future__ import annotations

import msgspec

# Tools that only look: always allowed, even with a kill switch standing (an agent
# told to stop may still read what it was doing). Claude Code's names; Codex sends
# Bash, apply_patch and MCP tools, none of which is read-only by name.
READ_ONLY_TOOLS = frozenset({"Read", "Glob", "Grep", "LS", "NotebookRead"})
ACTIVE = "active"
# domains.runs.machine.TERMINAL, written out: importing the runs machine would load the runs domain into every
# tool call's hook (tests/hooks/test_hooks_rules.py checks the two agree).
TERMINAL = frozenset({"complete", "cancelled"})
DEFAULT_CONTEXT_CHARS = 1800
MAX_LINE = 200


class Gate(msgspec.Struct, frozen=True, kw_only=True):
    goal_id: str
    gate_id: str
    title: str


class RunFacts(msgspec.Struct, frozen=True, kw_only=True):
    """The bound run as its log says: status, lease, budgets, issues. ``found`` False: no such run."""

    run_id: str
    found: bool = True
    status: str | None = None
    lease_expired: bool | None = None
    exhausted: tuple[str, ...] = ()
    open_blocking_issues: int = 0
    usage: str = ""
    live_lease: tuple[str, int] | None = None  # a lease still live: its id and generation (resume must name them)


class Facts(msgspec.Struct, frozen=True, kw_only=True):
    kill_switch: str | None = None  # the configured path of the first standing switch file
    shared_stop: str | None = None  # the shared store (its URL) whose recorded stop stands: `run unstop` lifts it
    run: RunFacts | None = None
    gates: tuple[Gate, ...] = ()
    faults: tuple[str, ...] = ()  # what could not be read (each fails open, said in the context)


def _switches(facts: Facts, file_as: str = "the kill switch ") -> str:
    """What stands when a shared store's stop is among it, as the subject of a sentence (the file, when one
    stands too, introduced by ``file_as``)."""
    shared = f"a stop recorded in the shared store {facts.shared_stop}"
    if facts.kill_switch is None:
        return f"{shared} stands"
    return f"{file_as}{facts.kill_switch} and {shared} stand"


def _it(facts: Facts) -> str:
    return "it" if facts.kill_switch is None else "both"


def _short(text: str) -> str:
    return text if len(text) <= MAX_LINE else text[: MAX_LINE - 3] + "..."


def _resume(run: RunFacts, why: str) -> str:
    """The recovery command for a run, complete as the CLI takes it: ``--reason`` is required, and a lease
    still live is replaced only by its holder naming it (``--lease`` and ``--generation``)."""
    lease = f" --lease {run.live_lease[0]} --generation {run.live_lease[1]}" if run.live_lease else ""
    return f'`loopstate run resume {run.run_id} --reason "{why}"{lease}`'


def tool_denial(tool_name: str, facts: Facts) -> str | None:
    """Why a tool call must not run, saying how to lift it; None lets it pass (no decision).

    Every command in a reason runs as written (tests/hooks/test_hooks_commands.py runs each one): the run's own
    id, every required option, never a placeholder.
    """
    if tool_name in READ_ONLY_TOOLS:
        return None
    run = facts.run
    if facts.kill_switch is not None or facts.shared_stop is not None:
        then = (f", then resume the halted run with {_resume(run, 'kill switch lifted')}"
                if run is not None and run.found else "")
        if facts.shared_stop is None:
            return (f"loopstate: the kill switch {facts.kill_switch} stands for this project, so tools that change "
                    f"things are denied. Remove {facts.kill_switch} to lift it{then}.")
        return (f"loopstate: {_switches(facts)} for this project, so tools that change things are denied. "
                f"Run `loopstate run unstop` (on any machine of the project) to lift {_it(facts)}{then}.")
    if run is None:
        return None
    if not run.found:
        return (f"loopstate: this session is bound to run {run.run_id}, which this project does not have. "
                "Unset LOOPSTATE_RUN, or name one of this project's runs (`loopstate run list` shows them).")
    if run.exhausted:
        return (f"loopstate: run {run.run_id} exhausted its budget ({', '.join(run.exhausted)}). "
                f"Start a new run with a fresh budget (`loopstate run status {run.run_id}` shows what it used).")
    if run.status in TERMINAL:
        return (f"loopstate: run {run.run_id} is {run.status}: a finished run does no more work. "
                "Unset LOOPSTATE_RUN, or bind a run that is still open (`loopstate run list` shows them).")
    if run.status == "ready":
        return (f"loopstate: run {run.run_id} is ready but has no lease yet. "
                f"Take it with `loopstate run acquire {run.run_id}` before work.")
    if run.status != ACTIVE:
        return (f"loopstate: run {run.run_id} is {run.status}, not active. "
                f"Resume it with {_resume(run, 'continue the work')}.")
    if run.lease_expired:
        return (f"loopstate: the lease of run {run.run_id} expired. "
                f"Recover it with {_resume(run, 'lease expired')} before more work.")
    return None


def stop_block(facts: Facts, *, enforce_gates: bool, stop_hook_active: bool) -> str | None:
    """Why the agent may not stop yet (open blocking issues, unresolved gates), when enforcement is on.

    A gate is the user's decision, so the reason asks the agent to bring it to the user, and names the
    command the user resolves it with, complete (``--decision`` is required)."""
    if not enforce_gates or stop_hook_active:
        return None
    open_items, commands = [], []
    if facts.run is not None and facts.run.open_blocking_issues:
        open_items.append(f"{facts.run.open_blocking_issues} open blocking issue(s) on run {facts.run.run_id}")
        commands.append(f"`loopstate run status {facts.run.run_id}` lists the issues")
    open_items += [f"gate {g.gate_id} of goal {g.goal_id} ({_short(g.title)})" for g in facts.gates]
    if facts.gates:
        first = facts.gates[0]
        commands.append(f"the user resolves a gate with `loopstate goals resolve {first.goal_id} {first.gate_id} "
                        "--decision approve` (or reject, defer)")
    if not open_items:
        return None
    return ("loopstate: not done yet: " + "; ".join(open_items)
            + ". Finish them, bring them to the user, or say why they stay open (" + "; ".join(commands) + ").")


def status_lines(facts: Facts) -> list[str]:
    """One line each for a standing kill switch, the bound run, and what is open; in a fixed order."""
    lines = []
    if facts.shared_stop is not None:
        lifts = f"`loopstate run unstop` lifts {_it(facts)}"
        lines.append(f"Kill switch: {_switches(facts, file_as='')} ({lifts}); tools that change things are denied.")
    elif facts.kill_switch is not None:
        lines.append(f"Kill switch: {facts.kill_switch} stands; tools that change things are denied.")
    run = facts.run
    if run is not None:
        if not run.found:
            lines.append(f"Run {run.run_id}: not found in this project.")
        else:
            lease = "lease expired" if run.lease_expired else "lease live" if run.lease_expired is False else "no lease"
            spent = f"; budget exhausted: {', '.join(run.exhausted)}" if run.exhausted else ""
            lines.append(_short(f"Run {run.run_id}: {run.status}, {lease}; used {run.usage}{spent}."))
        if run.found and run.open_blocking_issues:
            lines.append(f"Open blocking issues on run {run.run_id}: {run.open_blocking_issues}.")
    if facts.gates:
        shown = ", ".join(f"{g.goal_id}/{g.gate_id}" for g in facts.gates[:8])
        more = f" and {len(facts.gates) - 8} more" if len(facts.gates) > 8 else ""
        lines.append(_short(f"Unresolved gates: {shown}{more}."))
    lines += [_short(f"loopstate could not read {fault}.") for fault in facts.faults]
    return lines


def omitted_line(omitted: dict[str, int], open_disputes: int) -> str | None:
    """Everything the intent context does not show as text, as counts (sorted, so deterministic)."""
    counts = [f"{kind} {count}" for kind, count in sorted(omitted.items()) if count]
    if open_disputes:
        counts.append(f"open disputes {open_disputes}")
    return f"Also recorded, not shown: {', '.join(counts)}." if counts else None


def compose(intent_text: str, extra: list[str], max_chars: int) -> str:
    """The injected context: the status lines, then the intent text; at most ``max_chars``.

    The intent text was already cut to whole claims within what ``extra``
    leaves (``intent_budget``); a status line that still does not fit is dropped whole.
    """
    out: list[str] = []
    used = 0
    for line in extra:
        if used + len(line) + (1 if out else 0) <= max_chars:
            out.append(line)
            used += len(line) + (1 if len(out) > 1 else 0)
    if intent_text and used + len(intent_text) + (1 if out else 0) <= max_chars:
        out.append(intent_text)
    return "\n".join(out)


def intent_budget(extra: list[str], max_chars: int) -> int:
    """What the status lines leave for the intent text (at least 1, the query's lower bound)."""
    return max(1, max_chars - sum(len(line) + 1 for line in extra))
