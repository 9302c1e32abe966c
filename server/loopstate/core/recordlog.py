"""Small append-only JSONL record files beside the streams (quarantine summaries, purge records).

Each record is one canonical JSON line, appended and fsynced under the lock of
the stream it describes. A power cut can leave the last line short: the next
append starts a fresh line after it, and readers skip any line that is not a
whole JSON object, so one torn record never stops anything that reads the file.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

from loopstate.core import canonical, safefs


def append(path: Path, base: Path, record: dict[str, Any]) -> None:
    """Durably append ``record``; a line a crash cut short is closed with a newline first."""
    safefs.ensure_dir(path.parent, base)
    torn = False
    fd = safefs.open_read(path, base)
    if fd is not None:
        try:
            size = os.fstat(fd).st_size
            torn = size > 0 and os.pread(fd, 1, size - 1) != b"\n"
        finally:
            os.close(fd)
    fd, _ = safefs.open_append(path, base)
    try:
        safefs.write_all(fd, (b"\n" if torn else b"") + canonical.encode(record) + b"\n")
        os.fsync(fd)
    finally:
        os.close(fd)


def read(path: Path, base: Path) -> list[dict[str, Any]]:
    """The records, oldest first; a line a crash cut short (or any line that is not
    a JSON object) is skipped. Creates nothing."""
    data = safefs.read_file(path, base)
    if not data:
        return []
    out = []
    for line in data.splitlines():
        try:
            entry = canonical.decode(line)
        except Exception:  # msgspec.DecodeError, UnicodeDecodeError: half a record from a crash
            continue
        if isinstance(entry, dict):
            out.append(entry)
    return out
