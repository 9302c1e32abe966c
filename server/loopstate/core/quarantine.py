"""The quarantine: what was cut from a stream, by length and SHA-256 only.

A torn tail is never kept verbatim (it may hold half a secret); its summary is
appended here before the bytes are cut, under the same exclusive lock, so the
repair is accounted for even if the process dies right after.
"""

from __future__ import annotations

import os
from pathlib import Path

from loopstate.core import canonical, safefs


def path_for(base: Path, stream_name: str) -> Path:
    return base / "quarantine" / f"{stream_name}.jsonl"


def record(base: Path, stream_name: str, entry: dict) -> None:
    """Durably append one summary ({offset, length, sha256, reason, at, ...})."""
    target = path_for(base, stream_name)
    safefs.ensure_dir(target.parent, base)
    fd, _ = safefs.open_append(target, base)
    try:
        safefs.write_all(fd, canonical.encode({"stream": stream_name, **entry}) + b"\n")
        os.fsync(fd)
    finally:
        os.close(fd)


def entries(base: Path, stream_name: str) -> list[dict]:
    data = safefs.read_file(path_for(base, stream_name), base)
    if not data:
        return []
    return [canonical.decode(line) for line in data.splitlines() if line.strip()]
