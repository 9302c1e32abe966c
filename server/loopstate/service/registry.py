"""Which domains loopstate serves, and which domain owns each command and query."""

from __future__ import annotations

import importlib
from typing import Any

from loopstate.domains.base import Domain

# Each served domain's package; a command's or query's tag starts with its domain's name
# ("runs.status"), which is how the service finds the one domain a message needs.
DOMAIN_PACKAGES = {
    "intent": "loopstate.domains.intent",
    "runs": "loopstate.domains.runs",
    "goals": "loopstate.domains.goals",
}


def load_domain(name: str) -> Domain | None:
    """One served domain by name (imported on first use), or None when there is no such domain."""
    package = DOMAIN_PACKAGES.get(name)
    if package is None:
        return None
    domain: Domain = importlib.import_module(package).DOMAIN
    return domain


def all_domains() -> list[Domain]:
    """Every served domain."""
    return [domain for name in DOMAIN_PACKAGES if (domain := load_domain(name)) is not None]


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
