"""The fields of a host's hook input that loopstate reads; the rest of the payload is ignored.

Both hosts send one JSON object on stdin with ``session_id`` and ``cwd``
beside the event's own fields. Nothing here is stored: the prompt is read
only to see whether it is an ``/intent`` command.
"""

from __future__ import annotations

import os
from typing import Any

import msgspec


class BadInput(Exception):
    """The host's stdin is not the shape a hook expects (said in the message, with the fix).

    ``named`` is the event the host's input names (``hook_event_name``), when it could be read: a
    PreToolUse whose registration is wrong must still be denied while a kill switch stands."""

    def __init__(self, message: str, named: str | None = None) -> None:
        super().__init__(message)
        self.named = named


def parse(data: bytes, event: str | None, *, prompt_id_field: str | None) -> Any:
    """The hook input for ``event``, the event the registration names; with no event named there,
    the one the host's input names (both hosts send ``hook_event_name``)."""
    from loopstate.service.front import hook_event

    try:
        payload = msgspec.json.decode(data)  # msgspec, loaded already: the json module is ~1 ms of a hook's start
    except msgspec.DecodeError:
        raise BadInput("the hook's stdin is not a JSON object; the host should send its hook input there") from None
    except RecursionError:
        raise BadInput("the hook's stdin nests too deeply to read (about a thousand levels of arrays and objects); "
                       "the host should send its hook input there") from None
    if not isinstance(payload, dict):
        raise BadInput("the hook's stdin is not a JSON object; the host should send its hook input there")
    named = payload.get("hook_event_name")
    named = named if isinstance(named, str) and named else None
    session_id, cwd = payload.get("session_id"), payload.get("cwd")
    if not isinstance(session_id, str) or not session_id:
        raise BadInput("the hook input has no session_id; is this hook registered for the right host?", named)
    if not isinstance(cwd, str) or not os.path.isabs(cwd):
        raise BadInput("the hook input has no absolute cwd; is this hook registered for the right host?", named)
    if not event:
        if named is None:
            raise BadInput("the registration names no event and the host's input none either (hook_event_name); "
                           "register it as `loopstate hook HOST EVENT` (`loopstate setup apply` does)")
        event = named
    elif named is not None and named != event:
        raise BadInput(f"the hook was registered for {event} but the host sent {named!r}; run `loopstate setup apply`",
                       named)

    def text(name: str) -> str | None:
        value = payload.get(name)
        return value if isinstance(value, str) else None

    return hook_event(
        event=event, session_id=session_id, cwd=cwd, source=text("source"), prompt=text("prompt"),
        prompt_id=text(prompt_id_field) if prompt_id_field else None, tool_name=text("tool_name"),
        stop_hook_active=payload.get("stop_hook_active") is True, trigger=text("trigger"),
    )
