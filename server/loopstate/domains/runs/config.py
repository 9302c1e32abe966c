"""The runs configuration: the config record, its defaults, and where loopstate reads it.

loopstate reads ``<project>/.loopstate/config.json`` when it exists (the
effects glue loads and validates it; an invalid file refuses every run
mutation, fail closed) and otherwise uses these defaults. The default kill
switch is ``.loopstate/STOP``: loopstate's state lives in its data dir, and
this folder in the project is where the user can touch the switch. The path the-loop
uses, ``.the-loop/STOP``, is probed too: a switch only ever halts, so
honouring that path as well costs nothing and never misses a user's STOP.
"""

from __future__ import annotations

from typing import Any

from loopstate.core.killswitch import COMPAT_KILL_SWITCH, CONFIG_PATH, DEFAULT_KILL_SWITCH  # noqa: F401  (the runs glue imports CONFIG_PATH from here)
from loopstate.domains.base import Context
from loopstate.domains.runs.records import DEFAULT_BUDGETS


def default_config() -> dict[str, Any]:
    return {
        "schema_version": "1.0",
        "default_mode": "auto",
        "state_root": ".loopstate",
        "kill_switches": [DEFAULT_KILL_SWITCH, COMPAT_KILL_SWITCH],
        "heartbeat_seconds": 120,
        "lease_seconds": 300,
        "routing": {"capability_pins": {}, "disabled_providers": []},
        "budgets": dict(DEFAULT_BUDGETS),
        "telemetry": False,
        "harnesses": {},
    }


def effective_config(ctx: Context) -> dict[str, Any]:
    config = ctx.extra.get("config")
    return config if config is not None else default_config()
