"""The service: applies commands under the lock, keeps projections current, tells listeners.

Every front door (JSON-RPC, CLI, hooks) calls this and nothing else.
"""

from loopstate.service.engine import Outcome, Service

__all__ = ["Outcome", "Service"]
