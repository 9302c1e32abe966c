"""The seed's privacy boundary: what a public_safe record may hold, and redaction.

Three record classes: ``public_safe`` (compact state that could be committed),
``local_private`` (project-private detail kept in the local store) and
``private_pointer`` (a compact pointer to private material, never the
material). A public_safe event is refused when its text holds a local
absolute path or a credential; public projections additionally redact every
string they show (defence in depth) and replace private fields with omission
notes. Credentials are recognised by ``loopstate.core.redaction``; local paths
here.
"""

from __future__ import annotations

import re
from typing import Any, Iterator

from loopstate_protocol.errors import ErrorCode

from loopstate.core.errors import LoopstateError
from loopstate.core.redaction import redact as redact_credentials

PUBLIC_SAFE = "public_safe"
LOCAL_PRIVATE = "local_private"
PRIVATE_POINTER = "private_pointer"
PRIVACY_CLASSES = (PUBLIC_SAFE, LOCAL_PRIVATE, PRIVATE_POINTER)

PATH_MARK = "[local-path]"

# Absolute local paths: POSIX paths under well-known roots or any home folder,
# ~/..., file:// URLs and Windows drive or UNC paths. A lone "/" or a URL path
# ("https://host/a/b") is not a local path.
_LOCAL_PATH = re.compile(
    r"""(?x)
    (?:file://[^\s'"`)<>]*)
    | (?:(?<![\w.:/~-])~(?:[A-Za-z_][A-Za-z0-9_.-]*)?/[^\s'"`)<>,;]*)
    | (?:(?<![\w.:/-])/(?:home|Users|root|tmp|var|private|etc|opt|mnt|media|srv|usr|workspace|work|data|run|nix|snap)
         (?:/[^\s'"`)<>,;]*)?)
    | (?:\b[A-Za-z]:[\\/][^\s'"`)<>,;]*)
    | (?:\\\\[A-Za-z0-9_.$-]+\\[^\s'"`)<>,;]*)
    """
)


def find_local_path(text: str) -> str | None:
    match = _LOCAL_PATH.search(text)
    return match.group(0) if match else None


def scrub(text: str) -> tuple[str, list[str]]:
    """Text safe to show publicly, and the kinds of material taken out."""
    redacted = redact_credentials(text)
    out, count = _LOCAL_PATH.subn(PATH_MARK, redacted.text)
    kinds = list(redacted.kinds)
    if count:
        kinds.append("local_path")
    return out, kinds


def strings_in(value: Any, path: str = "") -> Iterator[tuple[str, str]]:
    """Every string inside a payload with its dotted path (dict keys included)."""
    if isinstance(value, str):
        yield path, value
    elif isinstance(value, dict):
        for key, item in value.items():
            yield f"{path}.{key}" if path else str(key), str(key)
            yield from strings_in(item, f"{path}.{key}" if path else str(key))
    elif isinstance(value, (list, tuple)):
        for index, item in enumerate(value):
            yield from strings_in(item, f"{path}[{index}]")


def check_public_text(event_type: str, where: str, value: Any) -> None:
    """Refuse a local path or credential in text that a public_safe event would carry."""
    for path, text in strings_in(value, where):
        reason = None
        if redact_credentials(text).changed:
            reason = "a credential"
        elif find_local_path(text) is not None:
            reason = "an absolute local path"
        if reason is not None:
            raise LoopstateError(
                ErrorCode.PRIVACY_VIOLATION,
                f"{event_type}: {path} holds {reason}, which a public_safe event may not carry; "
                "record it with privacy local_private, or keep it out of the store and point to it "
                "with privacy private_pointer and a compact pointer",
                field=path, event_type=event_type,
            )
