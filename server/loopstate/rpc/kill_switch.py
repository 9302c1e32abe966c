"""A kill switch that appears halts the runs the editor is watching, at once.

The runs domain probes its kill switches (``.loopstate/STOP`` and any
configured path) at every run command, so without help a STOP file takes
effect at the agent's next command. A server with a ``runs/status/<run_id>``
subscription also watches the switches' folders and, when a switch appears,
executes ``runs.sync`` for that run: the domain then writes the halt it is
missing (``kill_switch_detected``, status ``halted_kill_switch``) and every
subscriber sees it. The rule stays in the domain; this only says "look now".
"""

from __future__ import annotations

import logging
import os
import uuid
from pathlib import Path

from loopstate.core.errors import LoopstateError
from loopstate.service.engine import Service

log = logging.getLogger("loopstate.rpc")

RUNS = "runs"


def switch_paths(domain_name: str, view: str, root: str) -> tuple[Path, ...]:
    """The kill switch files that concern a subscription (none unless it follows a run)."""
    if domain_name != RUNS or view != "status":
        return ()
    from loopstate.service.front import kill_switch_paths

    try:
        return kill_switch_paths(root)
    except LoopstateError as exc:  # an invalid config refuses run mutations anyway
        log.warning("cannot read the kill switches of %s: %s", root, exc.message)
        return ()


def halt_if_switched(service: Service, root: str, run_id: str, switches: tuple[Path, ...]) -> None:
    """On the service thread: if a switch is present, let the domain record the halt."""
    if not any(os.path.lexists(path) for path in switches):
        return
    from loopstate_protocol.runs import Sync

    try:
        outcome = service.execute(root, Sync(run_id=run_id),
                                  f"kill-switch-sync-{uuid.uuid4()}")
        log.info("kill switch for run %s: runs.sync appended %d events", run_id, len(outcome.events))
    except LoopstateError as exc:
        log.info("kill switch for run %s: runs.sync refused: %s", run_id, exc.message)
