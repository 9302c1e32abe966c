"""Which domains loopstate serves, and which domain owns each command and query."""

from __future__ import annotations

from loopstate.domains.base import Domain


def all_domains() -> list[Domain]:
    """Every served domain; imported lazily so read paths load only what they use."""
    from loopstate.domains.goals import DOMAIN as goals
    from loopstate.domains.intent import DOMAIN as intent
    from loopstate.domains.runs import DOMAIN as runs

    return [d for d in (intent, runs, goals) if d is not None]
