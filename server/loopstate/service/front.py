"""What every front door needs beside commands and queries, in one place.

The CLI, the sidecar, the hooks and any later adapter each need the same few
things around the service: which project a directory belongs to, the
project's config, its kill switches (probe, create), whether a rendered
Markdown workbench is current, a Service of one domain for a short-lived
verb, and the parse of a claim typed as ``[FACET:]STATEMENT``. They call these functions and never the
``*_effects`` modules behind them, which stay private to the service (a test
in tests/cli/test_cli_layering.py keeps it so).

Each function imports its domain's glue on first use: resolving a root or
probing a kill switch loads no other domain.
"""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, Any

from loopstate.core.discovery import ProjectRoot, resolve_root

if TYPE_CHECKING:
    from loopstate.service.engine import Service

__all__ = [
    "ProjectRoot", "create_kill_switch", "domain_service", "goal_state", "hook_answer", "hook_event",
    "hook_fault", "hook_switch_denial", "kill_switch_paths", "markdown_status", "probe_kill_switch", "project_config",
    "resolve_root", "split_claim", "stream_layout",
]


def domain_service(name: str, *, snapshots: bool = True) -> Service:
    """A Service that serves the one domain ``name`` (a CLI verb of that domain): it loads no other
    domain, and refuses another domain's message as unknown."""
    from loopstate.service.engine import Service
    from loopstate.service.registry import load_domain

    domain = load_domain(name)
    if domain is None:
        raise ValueError(f"loopstate serves no domain {name!r}")
    return Service(domains=[domain], snapshots=snapshots)


def split_claim(text: str) -> tuple[str, str]:
    """A claim typed as ``[FACET:]STATEMENT`` (``--claim``, ``/intent remember``) as (facet, statement);
    a prefix that is no facet is refused with the nearest one."""
    from loopstate.domains.intent.rules import split_facet

    return split_facet(text)


def project_config(root: str) -> dict[str, Any]:
    """The project's ``.loopstate/config.json`` (the runs config), validated, or its defaults.

    An invalid file raises VALIDATION_FAILED naming the file: run mutations are
    refused until it is fixed (fail closed).
    """
    from loopstate.service.runs_effects import load_config

    return load_config(root)


def kill_switch_paths(root: str) -> tuple[Path, ...]:
    """Every kill switch of the project, as absolute paths, the default ``.loopstate/STOP`` first."""
    from loopstate.core.killswitch import switch_path

    return tuple(switch_path(root, configured) for configured in project_config(root)["kill_switches"])


def probe_kill_switch(root: str) -> dict[str, str] | None:
    """The first kill switch that stands (present, or unreadable, which also means stop), else None."""
    from loopstate.core.killswitch import enclosing_switches, probe_kill_switches

    return probe_kill_switches(root, [*project_config(root)["kill_switches"], *enclosing_switches(root)])


def create_kill_switch(root: str, note: str) -> Path:
    """Create the project's first kill switch (owner-only, durable); one already there is left as it is.

    This only sets the switch: the runs halt when the runs domain sees it (at
    their next command, or when the caller executes ``runs.stop`` for them).
    """
    from loopstate.service.runs_effects import create_kill_switch as create

    return create(root, project_config(root)["kill_switches"][0], note)


def markdown_status(service: Any, root: str, goal_id: str, target: str) -> Any:
    """Is the Markdown workbench at ``target`` (relative to the root) the goal's current projection?"""
    from loopstate.service.goals_effects import markdown_status as status

    return status(service, root, goal_id, target)


def goal_state(root: str, goal_id: str, *, use_snapshot: bool = True, data_dir: Path | None = None) -> Any:
    """A goal's folded state for a short-lived reader, from its snapshot checkpoint when one is valid."""
    from loopstate.core.project import Project
    from loopstate.service.goals_effects import load_existing

    return load_existing(Project(root, data_dir=data_dir), goal_id, use_snapshot=use_snapshot)


def stream_layout(stream_name: str) -> Any:
    """The chain layout of a stream, from the domain that owns its name prefix (for store-level tools)."""
    from loopstate_protocol.errors import ErrorCode

    from loopstate.core.errors import LoopstateError
    from loopstate.service.registry import all_domains

    prefix = stream_name.split(".", 1)[0]
    for domain in all_domains():
        if prefix in getattr(domain, "stream_prefixes", (domain.name,)):
            return domain.layout
    raise LoopstateError(
        ErrorCode.NOT_FOUND,
        f"no domain owns stream {stream_name!r}; was it written by a newer loopstate?",
        stream=stream_name,
    )


def hook_event(**fields: Any) -> Any:
    """A host-neutral hook event (service.hook_decisions.HookEvent) from the fields a host adapter parsed."""
    from loopstate.service.hook_decisions import HookEvent

    return HookEvent(**fields)


def hook_answer(root: str, event: Any, env: Any) -> Any:
    """The answer to one harness hook event (context, denial, block, notice); raises on a fault."""
    from loopstate.service.hook_decisions import answer

    return answer(root, event, env)


def hook_fault(error: Exception) -> str:
    """What a failed-open hook tells the user: the fault and the command that fixes it."""
    from loopstate.service.hook_decisions import fix_for

    return fix_for(error)


def hook_fault_answer(event: str, session_id: str | None, where: str, said: str) -> Any:
    """A failed-open hook's answer: the fault as a notice, and once per session as context (print modes)."""
    from loopstate.service.hook_decisions import fault_answer

    return fault_answer(event, session_id, where, said)


def hook_switch_denial(root: str) -> str | None:
    """A tool denial for a kill switch that stands, reading no store (what a failed hook still enforces)."""
    from loopstate.service.hook_decisions import deny_if_switch

    return deny_if_switch(root)
