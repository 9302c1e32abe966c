"""Which domains loopstate serves, and which domain owns each command and query."""

from __future__ import annotations

import importlib
from typing import Any

from loopstate.domains.base import Domain


def all_domains() -> list[Domain]:
    """Every served domain; imported lazily so read paths load only what they use."""
    from loopstate.domains.goals import DOMAIN as goals
    from loopstate.domains.intent import DOMAIN as intent
    from loopstate.domains.runs import DOMAIN as runs

    return [d for d in (intent, runs, goals) if d is not None]


def effects_for(domain_name: str) -> Any:
    """The impure glue of a domain (``service/<name>_effects.py``'s EFFECTS), or None.

    The binding lives here, in the service, so that domain packages never import
    the service: domains stay pure and the dependency points one way.
    """
    try:
        module = importlib.import_module(f"loopstate.service.{domain_name}_effects")
    except ModuleNotFoundError as exc:
        if exc.name == f"loopstate.service.{domain_name}_effects":
            return None
        raise
    return getattr(module, "EFFECTS", None)
