"""`loopstate init`: give a project its runs config and keep the state folder out of git.

Writes ``<project>/.loopstate/config.json`` with the runs defaults (the
config `load_config` reads; it passes `loopstate validate config`) and makes
sure the project's ``.gitignore`` ignores ``.loopstate/``: a project's state folder
stays out of git. Both steps are safe to repeat: an existing config is
refused unless replaced on purpose (``force``), and the ignore line is added
once. Nothing is written through a link.
"""

from __future__ import annotations

import os
import stat
from pathlib import Path
from typing import Any

import msgspec

from loopstate_protocol.errors import ErrorCode

from loopstate.core import safefs
from loopstate.core.errors import LoopstateError
from loopstate.core.ids import derived_uuid4
from loopstate.core.paths import canonical_root, project_id_for
from loopstate.domains.runs import records
from loopstate.domains.runs.config import CONFIG_PATH, default_config

IGNORE_LINE = ".loopstate/"
# Lines that already keep the folder out of git (with or without the anchor and the slash).
IGNORES = {".loopstate", ".loopstate/", "/.loopstate", "/.loopstate/", ".loopstate/*", "/.loopstate/*"}


def init_project(root: str, *, force: bool = False) -> dict[str, Any]:
    """Write the default config and the ignore line; returns what was done, path by path."""
    project = Path(canonical_root(root))
    config_path = project / CONFIG_PATH
    existed = os.path.lexists(config_path)
    if existed and not force:
        raise LoopstateError(ErrorCode.CONFLICT, f"{config_path} already exists; keep it, or pass --force to replace it "
                             "with the defaults", path=str(config_path))
    gitignore = project / ".gitignore"
    _refuse_unsafe(gitignore)  # before anything is written: a refusal leaves the project as it was
    defaults = default_config()
    # The config's project_id is a UUIDv4; loopstate's own project id (a digest of the root) gives a stable one.
    config = {"schema_version": defaults.pop("schema_version"),
              "project_id": derived_uuid4("runs.config-project", project_id_for(str(project))), **defaults}
    records.validate("config", config)  # never write a config the reader would refuse
    safefs.ensure_dir(config_path.parent, project)
    safefs.atomic_write(config_path, project, msgspec.json.format(msgspec.json.encode(config), indent=2) + b"\n")
    return {
        "root": str(project),
        "config": str(config_path), "config_replaced": existed,
        "gitignore": str(gitignore), "gitignore_added": _ignore_state_folder(gitignore),
    }


def _refuse_unsafe(path: Path) -> None:
    try:
        info = os.lstat(path)
    except FileNotFoundError:
        return
    if not stat.S_ISREG(info.st_mode) or info.st_nlink != 1:
        raise LoopstateError(ErrorCode.UNSAFE_PATH, f"{path} is a link or not a regular file, and loopstate writes "
                             f"through no link; add the line {IGNORE_LINE!r} to it yourself", path=str(path))


def _ignore_state_folder(path: Path) -> bool:
    """Append the ignore line unless a line already ignores the folder; True when it was appended."""
    try:
        fd = os.open(path, os.O_RDWR | os.O_APPEND | os.O_CREAT | os.O_NOFOLLOW | os.O_CLOEXEC, 0o644)
    except OSError as exc:
        raise LoopstateError(ErrorCode.UNSAFE_PATH, f"cannot open {path}: {exc.strerror}; add the line "
                             f"{IGNORE_LINE!r} to it yourself", path=str(path)) from None
    try:
        safefs.check_descriptor(fd, path)
        with os.fdopen(os.dup(fd), "rb") as handle:
            text = handle.read().decode("utf-8", errors="replace")
        if any(line.strip() in IGNORES for line in text.splitlines()):
            return False
        safefs.write_all(fd, (("\n" if text and not text.endswith("\n") else "") + IGNORE_LINE + "\n").encode())
        os.fsync(fd)
    finally:
        os.close(fd)
    return True
