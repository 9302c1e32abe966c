"""The project-level privacy defaults for goal state (``state_privacy``).

loopstate reads them from ``<project>/.loopstate/goals.json`` when it exists
(the effects glue loads it; an invalid file refuses renders, fail closed):

    {"state_privacy": {"active_state": "local_private", "public_projection": "public_safe",
                       "allow_private_links_in_ignored_state": true,
                       "require_redaction_for_tracked_outputs": true}}

The defaults are LoopX's documented example (kept for compatibility). The file is
separate from ``.loopstate/config.json``, whose schema (the runs config) allows no
other keys.
"""

from __future__ import annotations

from typing import Literal

import msgspec

from loopstate_protocol.errors import ErrorCode

from loopstate.core.errors import LoopstateError

CONFIG_PATH = ".loopstate/goals.json"


class StatePrivacy(msgspec.Struct, forbid_unknown_fields=True, kw_only=True, frozen=True):
    active_state: Literal["local_private", "public_safe"] = "local_private"
    public_projection: Literal["public_safe"] = "public_safe"
    allow_private_links_in_ignored_state: bool = True
    require_redaction_for_tracked_outputs: bool = True


class GoalsConfig(msgspec.Struct, forbid_unknown_fields=True, kw_only=True, frozen=True):
    state_privacy: StatePrivacy = StatePrivacy()


def parse_config(data: bytes) -> GoalsConfig:
    try:
        return msgspec.json.decode(data, type=GoalsConfig)
    except msgspec.MsgspecError as exc:
        raise LoopstateError(
            ErrorCode.VALIDATION_FAILED, f"{CONFIG_PATH} is invalid: {exc}; fix or remove it", path=CONFIG_PATH,
        ) from None


def _needs_public(target: str, why: str) -> LoopstateError:
    return LoopstateError(
        ErrorCode.PRIVACY_VIOLATION, f"{CONFIG_PATH} {why}, so {target} must be rendered with --public (redacted)",
        target=target,
    )


def render_rule(config: StatePrivacy, *, public: bool, tracked: bool, target: str) -> None:
    """May a projection with (or without) redaction be written to ``target``?"""
    if public:
        return
    if config.active_state == "public_safe":
        raise _needs_public(target, "sets state_privacy.active_state to public_safe")
    if tracked and config.require_redaction_for_tracked_outputs:
        raise LoopstateError(
            ErrorCode.PRIVACY_VIOLATION,
            f"{target} is tracked by git, and tracked outputs need explicit redaction: render it with "
            "--public, or keep the private workbench out of git (add it to .gitignore)",
            target=target,
        )
    if not tracked and not config.allow_private_links_in_ignored_state:
        raise _needs_public(target, "sets state_privacy.allow_private_links_in_ignored_state to false")
