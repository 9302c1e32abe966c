"""The kill switch on a team's shared store: a stop set on one machine reaches every machine.

On the local store the switch is a file in the work tree (``.loopstate/STOP``,
core/killswitch.py), which only that machine sees. A store that holds the
switch itself (the ``StopSwitch`` capability of core/backend.py: PostgreSQL
keeps it as a row beside the project's events, checked in the same
transaction as each append) is told by ``run stop`` and ``run unstop`` too, so
every machine's next tool call is denied (the hook asks ``standing``) within
the store's notification latency. The local file is still set and still
denies: the shared stop is added to it, never put in its place.

A project on the local store pays for none of this beyond one environment
lookup and one failed open of its store file: nothing more is imported (the
hook runs on every tool call).
A shared store that cannot be reached denies nothing by itself (hooks fail
open); the local file still does.
"""

from __future__ import annotations

import os
import threading
from typing import TYPE_CHECKING

from loopstate.core.errors import LoopstateError
from loopstate.core.project import Project
from loopstate.core.store_file import read_store_file

if TYPE_CHECKING:
    from loopstate.core.backend import StopSwitch, Store

LOCAL_SCHEMES = ("jsonl", "file")
_stores: dict[str, Store] = {}  # project root -> its shared store, kept open (one connection per process)
_guard = threading.Lock()


def _on_shared_store(root: str) -> bool:
    """Whether ``root``'s store is a shared one, as core/stores.configured_url chooses (LOOPSTATE_STORE, else
    the store file), without importing it: on the local store this is all the hook pays."""
    url = os.environ.get("LOOPSTATE_STORE", "").strip()
    if not url:
        found = read_store_file(root)
        url = found.url if found is not None else ""
    return bool(url) and url.split(":", 1)[0].lower() not in LOCAL_SCHEMES


def on_shared_store(root: str) -> bool:
    """Whether ``root``'s streams are in a shared store (not this machine's files); cheap, imports nothing."""
    return _on_shared_store(root)


def _switch(root: str) -> StopSwitch | None:
    """The shared store of ``root`` when it holds a kill switch; None on the local store."""
    if not _on_shared_store(root):
        return None
    from loopstate.core.backend import StopSwitch
    from loopstate.core.stores import open_store

    with _guard:
        store = _stores.get(root)
        if store is None:
            store = _stores[root] = open_store(Project(root))
    return store if isinstance(store, StopSwitch) else None


def store_label(store: "StopSwitch") -> str:
    """How the shared store is named to a person: its URL without a password."""
    return str(getattr(store, "url", "")) or "(the shared store)"


def describe(store: "StopSwitch") -> str:
    return f"the stop recorded in the shared store {store_label(store)}"


def standing(root: str) -> str | None:
    """The shared store (its label) whose recorded stop stands for the hook, or None (none set, or no shared store).

    A store that does not answer is logged and denies nothing here (the hook fails open)."""
    try:
        switch = _switch(root)
        if switch is None:
            return None
        return store_label(switch) if switch.stopped() is not None else None
    except LoopstateError as error:
        import logging

        logging.getLogger("loopstate.service").warning("the shared kill switch could not be read: %s", error.message)
        return None


def as_switch(root: str) -> dict[str, str] | None:
    """The shared stop as the runs domain sees a standing switch (``{"path", "state": "present"}``, and the
    store's label under ``"store"``), or None.

    For the runs' own checks (service/runs_effects.py: create, acquire, heartbeat and the rest are refused
    or halted while it stands). Unlike ``standing`` a store that does not answer raises: the command that
    asks is about to write to that very store, and fails with the store's own clear error."""
    switch = _switch(root)
    if switch is None or switch.stopped() is None:
        return None
    return {"path": f"in the shared store {store_label(switch)}", "state": "present", "store": store_label(switch)}


def set_stop(root: str, reason: str | None) -> str | None:
    """Record the stop in the shared store (``run stop``); what it is called, or None on the local store.
    A store that does not answer raises: the caller has set the local file first."""
    switch = _switch(root)
    if switch is None:
        return None
    switch.set_stop(reason or "loopstate run stop")
    return describe(switch)


def clear_stop(root: str) -> str | None:
    """Lift the shared store's stop (``run unstop``); what was lifted, or None when none was set."""
    switch = _switch(root)
    if switch is None or switch.stopped() is None:
        return None
    switch.clear_stop()
    return describe(switch)
