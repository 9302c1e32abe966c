"""The goals privacy boundary: what a public_safe record may hold, and redaction.

Three record classes: ``public_safe`` (compact state that could be committed),
``local_private`` (project-private detail kept in the local store) and
``private_pointer`` (a compact pointer to private material, never the
material). A public_safe event is refused when its text holds a local
absolute path, a credential, or a raw log or chat transcript; public projections additionally redact every
string they show (defence in depth) and replace private fields with omission
notes. Credentials are recognised by ``loopstate.core.redaction``; local paths
here.
"""

from __future__ import annotations

import re
from typing import Any, Iterator

from loopstate_protocol.errors import ErrorCode

from loopstate.core.errors import LoopstateError

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
    | (?:(?<![\w.:/-])/(?:home|Users|Volumes|root|tmp|var|private|etc|opt|mnt|media|srv|usr|workspace|work|data|run|nix|snap)
         (?:/[^\s'"`)<>,;]*)?)
    | (?:\b[A-Za-z]:[\\/][^\s'"`)<>,;]*)
    | (?:\\\\[A-Za-z0-9_.$-]+\\[^\s'"`)<>,;]*)
    """
)


_LEVEL = r"\[?(?:TRACE|DEBUG|INFO|NOTICE|WARN|WARNING|ERROR|FATAL|CRITICAL|PANIC)\]?"
# Raw logs and chat transcripts: shapes that compact state never has. A log line is a
# clock time followed by an upper-case level, or a stack trace; a transcript is a
# chat-template token, a JSON chat message, or two speaker turns in one text.
_RAW = (
    ("raw_log", re.compile(r"Traceback \(most recent call last\)|\bFile \"[^\"]+\", line \d+")),
    ("raw_log", re.compile(
        r"(?:\b\d{4}-\d{2}-\d{2}[ T]|\b)\d{2}:\d{2}:\d{2}(?:[.,]\d+)?(?:Z|[+-]\d{2}:?\d{2})?\]?\s+" + _LEVEL + r"(?=[\s:]|$)")),
    ("raw_log", re.compile(r"(?:^|\s)at [\w$.]+\([\w$.-]+\.(?:java|kt|scala|js|ts):\d+(?::\d+)?\)")),
    ("raw_transcript", re.compile(r"<\|im_(?:start|end)\|>|\[/?INST\]")),
    ("raw_transcript", re.compile(r"(?i)\"role\"\s*:\s*\"(?:user|assistant|system|tool)\"")),
    ("raw_transcript", re.compile(
        r"(?i)\b(?:user|human)\s*:\s*\S.*\b(?:assistant|ai|claude|codex|chatgpt|gpt|model)\s*:\s*\S")),
)
RAW_MARK = "[omitted: {kind}]"


def find_raw_material(text: str) -> str | None:
    """``raw_log`` or ``raw_transcript`` when ``text`` looks like either, else None."""
    for kind, pattern in _RAW:
        if pattern.search(text):
            return kind
    return None


def find_local_path(text: str) -> str | None:
    match = _LOCAL_PATH.search(text)
    return match.group(0) if match else None


def _redact(text: str) -> Any:
    """Credentials taken out (core/redaction.py, imported here: a reader of a local board never pays for it)."""
    from loopstate.core.redaction import redact

    return redact(text)


def scrub(text: str) -> tuple[str, list[str]]:
    """Text safe to show publicly, and the kinds of material taken out.

    A raw log or transcript is replaced as a whole (a partly redacted log is still a log).
    """
    raw = find_raw_material(text)
    if raw is not None:
        return RAW_MARK.format(kind=raw.replace("_", " ")), [raw]
    redacted = _redact(text)
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
        raw = find_raw_material(text)
        if _redact(text).changed:
            reason = "a credential"
        elif find_local_path(text) is not None:
            reason = "an absolute local path"
        elif raw is not None:
            reason = "a raw log line" if raw == "raw_log" else "a raw chat transcript"
        if reason is not None:
            raise LoopstateError(
                ErrorCode.PRIVACY_VIOLATION,
                f"{event_type}: {path} holds {reason}, which a public_safe event may not carry; "
                "record it with privacy local_private, or keep it out of the store and point to it "
                "with privacy private_pointer and a compact pointer",
                field=path, event_type=event_type,
            )
