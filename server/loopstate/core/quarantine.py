"""The quarantine: what was cut from a stream, by length and SHA-256 only.

A torn tail is never kept verbatim (it may hold half a secret); its summary is
appended here before the bytes are cut, under the same exclusive lock, so the
repair is accounted for even if the process dies right after.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from loopstate.core import recordlog


def path_for(base: Path, stream_name: str) -> Path:
    return base / "quarantine" / f"{stream_name}.jsonl"


def record(base: Path, stream_name: str, entry: dict[str, Any]) -> None:
    """Durably append one summary ({offset, length, sha256, reason, at, ...}); a summary
    a crash cut short is closed first, so the new one stays a line of its own."""
    recordlog.append(path_for(base, stream_name), base, {"stream": stream_name, **entry})


def entries(base: Path, stream_name: str) -> list[dict[str, Any]]:
    """The summaries, oldest first; a line a crash cut short is skipped."""
    return recordlog.read(path_for(base, stream_name), base)
