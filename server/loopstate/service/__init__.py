"""The service: applies commands under the lock, keeps projections current, tells listeners.

Every front door (JSON-RPC, CLI, hooks) calls this and nothing else: the
Service for commands and queries, and the functions of ``front`` for what
surrounds them (the project root, its config, kill switches, Markdown status).
The ``*_effects`` modules are the service's own.
"""

from typing import TYPE_CHECKING, Any

from loopstate.service.front import (
    ProjectRoot,
    create_kill_switch,
    goal_state,
    kill_switch_paths,
    markdown_status,
    probe_kill_switch,
    project_config,
    resolve_root,
    stream_layout,
)

if TYPE_CHECKING:
    from loopstate.domains.base import Domain

__all__ = [
    "Domain", "Outcome", "ProjectRoot", "Service", "create_kill_switch", "goal_state", "kill_switch_paths",
    "markdown_status", "probe_kill_switch", "project_config", "resolve_root", "stream_layout",
]


def __getattr__(name: str) -> Any:
    """``Service`` and ``Outcome`` load the engine on first use: a hook that only probes a kill switch never does.
    ``Domain`` is the interface of every domain the service serves (``Service.domains``), for a front door
    that holds one the service handed it."""
    if name == "Domain":
        from loopstate.domains.base import Domain

        return Domain
    if name in ("Service", "Outcome"):
        from loopstate.service import engine

        return getattr(engine, name)
    raise AttributeError(f"module 'loopstate.service' has no attribute {name!r}")
