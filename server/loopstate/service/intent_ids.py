"""Intent task and claim ids given by any unique prefix, as the run verbs take run ids.

People copy the short ids a listing prints (`loopstate intent tasks`, `intent
show`, `/intent show`); every front door hands what it was given to these
functions and sends the full id on. A full-length id passes through
untouched, so the command that uses it says itself when it names nothing.
Resolving only reads.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from loopstate_protocol import intent as p

from loopstate.core.prefix import FULL_LENGTH, resolve_prefix

if TYPE_CHECKING:
    from loopstate.service.engine import Service


def resolve_task(service: Service, root: str, given: str) -> str:
    """The task id ``given`` abbreviates (any unique prefix of a durable task of this project)."""
    if len(given.strip()) >= FULL_LENGTH:
        return given.strip().lower()
    tasks: list[p.TaskView] = service.query(root, p.IntentTasks())
    return resolve_prefix("task", given, [t.task_id for t in tasks], hint="`loopstate intent tasks` lists them")


def resolve_claim(service: Service, root: str, given: str, task_id: str | None) -> str:
    """The claim id ``given`` abbreviates: any unique prefix of an active claim the task's view shows (its own
    claims and the project's project-wide ones; the whole project's without a task), the claims a command
    may supersede, invalidate or confirm."""
    if len(given.strip()) >= FULL_LENGTH:
        return given.strip().lower()
    ids: list[str] = []
    cursor = None
    while True:  # every page of the view: the claim may be past the first
        view = service.query(root, p.IntentSnapshot(task_id=task_id, limit=1000, cursor=cursor))
        ids += [c.claim_id for statuses in view.by_facet.values() for claims in statuses.values() for c in claims]
        cursor = view.next_cursor
        if cursor is None:
            break
    where = f"`loopstate intent show --task {task_id[:8]}`" if task_id else "`loopstate intent show`"
    return resolve_prefix("claim", given, ids, hint=f"{where} lists the active claims")
