"""One project's folder in the data dir, and the names of its streams.

Layout (all 0700 folders, 0600 files)::

    <data dir>/projects/<project_id>/
        project.json            id, canonical root, schema version
        streams/<name>.jsonl    the event streams
        locks/<name>.lock       one lock per stream (owner pid, token, time)
        checkpoints/<name>.json verified heads for short-lived processes
        quarantine/<name>.jsonl length + SHA-256 of what was cut

Opening a project for reading creates nothing, and neither does a refused
command: the folder, ``project.json`` and a stream's lock file are made by its
first append (``ensure``, called from ``StoreLock.publish``; a first writer
decides under the founding lock, ``core/founding.py``).
"""

from __future__ import annotations

import os
import re
import stat
from pathlib import Path

from loopstate_protocol.errors import ErrorCode

from loopstate.core import canonical, safefs
from loopstate.core.adopted import adopted_id
from loopstate.core.errors import LoopstateError
from loopstate.core.lock import DEFAULT_TIMEOUT, StoreLock
from loopstate.core.paths import canonical_root, project_id_for, resolve_data_dir
from loopstate.core.store_file import read_store_file

STREAM_NAME = re.compile(r"^[a-z][a-z0-9_]{0,31}(\.[A-Za-z0-9][A-Za-z0-9_-]{0,79})?$")
PROJECT_SCHEMA = 1


def check_stream_name(name: str) -> str:
    if not isinstance(name, str) or not STREAM_NAME.match(name):
        raise LoopstateError(
            ErrorCode.INVALID_PARAMS,
            f"stream name {name!r} is not valid: use '<domain>' or '<domain>.<id>' with letters, digits, '_' and '-'",
            stream=name,
        )
    return name


class Project:
    """A validated project root and its store folder."""

    def __init__(self, root: str | os.PathLike[str], *, data_dir: Path | None = None, lock_timeout: float = DEFAULT_TIMEOUT) -> None:
        self.root = canonical_root(root)
        self.data_dir = Path(data_dir) if data_dir is not None else resolve_data_dir()
        # A committed store file gives every clone of a team's project one id (core/store_file.py);
        # else a root that adopted a moved or re-cloned project carries that project's id (core/adopted.py).
        self.store_file = read_store_file(self.root)
        shared_id = None if self.store_file is None else self.store_file.project_id
        self.project_id = shared_id or adopted_id(self.data_dir, project_id_for(self.root))
        self.dir = self.data_dir / "projects" / self.project_id
        self.lock_timeout = lock_timeout
        self._ensured: tuple[int, int] | None = None
        self._lock_paths: dict[str, Path] = {}
        explicit = data_dir is not None or bool(os.environ.get("LOOPSTATE_DATA_DIR"))
        if not explicit and (self.data_dir == Path(self.root) or Path(self.root) in self.data_dir.parents):
            home = os.path.realpath(os.path.expanduser("~"))
            where = f"your home folder ({self.root})" if self.root == home else self.root
            raise LoopstateError(
                ErrorCode.INVALID_ROOT,
                f"the project root is {where}, which holds loopstate's own data dir ({self.data_dir}); "
                "use a project folder instead (from the CLI: cd into it, or pass --root DIR), "
                "or set LOOPSTATE_DATA_DIR to a folder outside it",
                root=self.root,
            )

    def exists(self) -> bool:
        return self.dir.is_dir()

    def check_existing(self) -> None:
        """``ensure``'s checks of the project folder, when there is one; nothing made when not."""
        if self._ensured is not None or os.path.lexists(self.dir):
            self.ensure()

    def ensure(self) -> None:
        """Create the project folder and its record (mutations only).

        After the first full check a later call costs one lstat: the folder must
        still be the very folder that was checked (not replaced by a link).
        """
        if self._ensured is not None:
            try:
                info = os.lstat(self.dir)
                if (info.st_dev, info.st_ino) == self._ensured and stat.S_ISDIR(info.st_mode):
                    return
            except FileNotFoundError:
                pass
            self._ensured = None
        safefs.ensure_base(self.data_dir)
        safefs.ensure_dir(self.dir, self.data_dir)
        meta = self.dir / "project.json"
        if not os.path.lexists(meta):
            record = {"schema_version": PROJECT_SCHEMA, "project_id": self.project_id, "root": self.root}
            safefs.atomic_write(meta, self.dir, canonical.encode(record))
        info = os.lstat(self.dir)
        self._ensured = (info.st_dev, info.st_ino)

    def stream_names(self) -> list[str]:
        folder = self.dir / "streams"
        try:
            names = os.listdir(folder)
        except FileNotFoundError:
            return []
        return sorted(n[: -len(".jsonl")] for n in names if n.endswith(".jsonl") and STREAM_NAME.match(n[: -len(".jsonl")]))

    def stream_path(self, name: str) -> Path:
        """Where stream ``name`` lives (it may not exist yet)."""
        return self.dir / "streams" / f"{check_stream_name(name)}.jsonl"

    def lock(self, name: str) -> StoreLock:
        path = self._lock_paths.get(name)
        if path is None:
            path = self._lock_paths[check_stream_name(name)] = self.dir / "locks" / f"{name}.lock"
        lock = StoreLock(path, self.dir, timeout=self.lock_timeout, founding=self.root)
        lock.before_open, lock.before_create = self.check_existing, self.ensure
        return lock
