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
    """Durably append one summary ({offset, length, sha256, reason, at, ...}).

    If a crash cut the previous summary short, it is closed with a newline
    first, so the new summary stays a line of its own.
    """
    target = path_for(base, stream_name)
    safefs.ensure_dir(target.parent, base)
    torn = False
    fd = safefs.open_read(target, base)
    if fd is not None:
        try:
            size = os.fstat(fd).st_size
            torn = size > 0 and os.pread(fd, 1, size - 1) != b"\n"
        finally:
            os.close(fd)
    fd, _ = safefs.open_append(target, base)
    try:
        safefs.write_all(fd, (b"\n" if torn else b"") + canonical.encode({"stream": stream_name, **entry}) + b"\n")
        os.fsync(fd)
    finally:
        os.close(fd)


def entries(base: Path, stream_name: str) -> list[dict]:
    """The summaries, oldest first; a line a crash cut short is skipped."""
    data = safefs.read_file(path_for(base, stream_name), base)
    if not data:
        return []
    out = []
    for line in data.splitlines():
        try:
            entry = canonical.decode(line)
        except Exception:  # msgspec.DecodeError: half a summary from a crash
            continue
        if isinstance(entry, dict):
            out.append(entry)
    return out
