"""Which project a root carries when its repository moved or was re-cloned: the adoption table.

A project's id is a digest of its root path (core/paths.project_id_for), so a
repository that moves, or is cloned afresh somewhere else, would start over
with an empty state. `loopstate project adopt OLD_PATH` (service/adopt.py)
records that the new root carries the old project: one small file,
``<data dir>/adopted/<id of the new root>``, holding the old project's id.
Every event keeps the id it was recorded under (intent events carry it in
their hash chain), so the project keeps its id and only its root moves.

Reading it costs one failed open for a root that was never adopted.
"""

from __future__ import annotations

import os
import re
from pathlib import Path

ADOPTED = "adopted"
_ID = re.compile(r"^[0-9a-f]{64}$")


def adopted_id(data_dir: Path, own_id: str) -> str:
    """The project id a root whose own (path-derived) id is ``own_id`` carries: an adopted one, else its own."""
    try:
        with open(data_dir / ADOPTED / own_id, encoding="ascii") as handle:
            text = handle.read(200).strip()
    except (FileNotFoundError, NotADirectoryError):
        return own_id
    except (OSError, UnicodeDecodeError):
        return own_id  # unreadable: the root's own state, as before any adoption (`project adopt` says more)
    carried = text.split()[0] if text else ""
    return carried if _ID.match(carried) else own_id


def alias_path(data_dir: Path, own_id: str) -> Path:
    return data_dir / ADOPTED / own_id


def is_known(projects: Path, own_id: str) -> bool:
    """Whether a store exists for the root whose own id is ``own_id`` (under its id, or adopted)."""
    if os.path.isdir(projects / own_id):
        return True
    carried = adopted_id(projects.parent, own_id)
    return carried != own_id and os.path.isdir(projects / carried)
