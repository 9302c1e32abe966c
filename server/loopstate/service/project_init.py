"""`loopstate init`: give a project its runs config and keep the state folder out of git.

Writes ``<project>/.loopstate/config.json`` with the runs defaults (the
config `load_config` reads; it passes `loopstate validate config`) and makes
sure the project's ``.gitignore`` ignores ``.loopstate/``: a project's state folder
stays out of git. Both steps are safe to repeat: an existing config is
refused unless replaced on purpose (``force``), and the ignore line is added
once. Nothing is written through a link.

A team sharing one store (``store``, ``loopstate init --store URL``) or only one
project identity (``share_id``: the store ``jsonl:``, each machine's own) also
gets the store file every clone reads (``.loopstate/store.json``,
core/store_file.py): the store URL and the project's id as it is now
(path-derived, or adopted), so the state kept so far stays the project's. The
ignore rule then keeps the folder's state out of git but the store file in
(``.loopstate/*`` and ``!.loopstate/store.json``: git cannot re-include a file
below an ignored folder, so a plain ``.loopstate/`` line is rewritten in place).
An existing store file keeps its id for good (changing it would split the
team's project); ``force`` may change its store.
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
from loopstate.core.project import Project
from loopstate.core.store_file import (
    LOCAL,
    SCHEMA,
    STORE_FILE,
    StoreFile,
    check_store_url,
    encode_store_file,
    read_store_file,
)
from loopstate.core.stores import redacted as redact
from loopstate.domains.runs import records
from loopstate.domains.runs.config import CONFIG_PATH, default_config

IGNORE_LINE = ".loopstate/"
# Lines that already keep the folder out of git (with or without the anchor and the slash).
IGNORES = {".loopstate", ".loopstate/", "/.loopstate", "/.loopstate/", ".loopstate/*", "/.loopstate/*"}
# A team's: the state ignored, the committed store file not.
FOLDER_LINES = {".loopstate": ".loopstate/*", ".loopstate/": ".loopstate/*", "/.loopstate": "/.loopstate/*",
                "/.loopstate/": "/.loopstate/*"}
KEEP_LINE = "!" + STORE_FILE


def init_project(root: str, *, force: bool = False, store: str | None = None, share_id: bool = False) -> dict[str, Any]:
    """Write the default config, the ignore line and (for a team) the store file; what was done, path by path."""
    project = Path(canonical_root(root))
    team = store is not None or share_id
    if store is not None and share_id:
        raise LoopstateError(ErrorCode.INVALID_PARAMS, "--store and --share-id are two choices: --store URL shares "
                             "the store and the id, --share-id only the id (each machine keeps its own store)")
    if store is not None:
        check_store_url(store, committed=True, where="--store")
    url = store if store is not None else LOCAL
    config_path = project / CONFIG_PATH
    existed = os.path.lexists(config_path)
    if existed and not force and not team:
        raise LoopstateError(ErrorCode.CONFLICT, f"{config_path} already exists; keep it, or pass --force to replace it "
                             "with the defaults", path=str(config_path))
    gitignore = project / ".gitignore"
    _refuse_unsafe(gitignore)  # before anything is written: a refusal leaves the project as it was
    # The id the config names: the committed one when there is one; a team's new file takes the project's id as it
    # is now (adopted or the path's), so the state kept so far stays the project's.
    committed = read_store_file(str(project))
    identity = (committed.project_id if committed is not None and committed.project_id is not None
                else Project(str(project)).project_id if team else project_id_for(str(project)))
    shared = _planned_store_file(str(project), identity, url, force=force) if team else None
    write_config = not existed or force
    if write_config:
        defaults = default_config()
        # The config's project_id is a UUIDv4; loopstate's own project id (a digest of the root) gives a stable one.
        config = {"schema_version": defaults.pop("schema_version"),
                  "project_id": derived_uuid4("runs.config-project", identity), **defaults}
        records.validate("config", config)  # never write a config the reader would refuse
        safefs.ensure_dir(config_path.parent, project)
        safefs.atomic_write(config_path, project, msgspec.json.format(msgspec.json.encode(config), indent=2) + b"\n")
    done: dict[str, Any] = {
        "root": str(project), "project_id": identity,
        "config": str(config_path), "config_replaced": existed and write_config, "config_kept": not write_config,
        "gitignore": str(gitignore),
    }
    if shared is None:
        done["gitignore_added"] = _ignore_state_folder(gitignore)
        return done
    file_path, content, action = shared
    if action != "kept":
        safefs.ensure_dir(file_path.parent, project)
        safefs.atomic_write(file_path, project, encode_store_file(content))
    local = Project(str(project))  # its streams in this machine's data dir: what `store import` would bring in
    done.update(store_file=str(file_path), store_file_action=action, store=redact(content.url),
                data_dir=str(local.data_dir), local_streams=len(local.stream_names()),
                gitignore_added=_ignore_state_keep_store_file(gitignore), store_problem=_unanswered(content.url, local))
    return done


def _unanswered(url: str, project: Project) -> str | None:
    """Why the shared store at ``url`` does not answer yet, or None (it does, or the store is each machine's
    own). The file is written either way: a team may set the store up before its server runs."""
    if url == LOCAL:
        return None
    from loopstate.core.stores import count_streams

    try:
        count_streams(url, project)
    except LoopstateError as error:
        return error.message
    return None


def _planned_store_file(root: str, identity: str, url: str, *, force: bool) -> tuple[Path, StoreFile, str]:
    """The store file to write and whether it is new ("wrote"), changed ("updated") or already so ("kept")."""
    path = Path(root) / STORE_FILE
    before = read_store_file(root)  # a bad one is refused here, with what is wrong in it
    if before is None:
        return path, StoreFile(url=url, schema_version=SCHEMA, project_id=identity), "wrote"
    kept_id = before.project_id or identity
    if before.url == url and before.project_id is not None:
        return path, before, "kept"
    if before.url != url and not force:
        raise LoopstateError(
            ErrorCode.CONFLICT,
            f"{path} already names the store {redact(before.url)}; keep it, or pass --force to make it "
            f"{redact(url)} (the project id stays as it is)", path=str(path))
    return path, StoreFile(url=url, schema_version=SCHEMA, project_id=kept_id), "updated"


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


def _ignore_state_keep_store_file(path: Path) -> bool:
    """Ignore the state folder's contents but not the store file; True when the file was changed.

    A line ignoring the folder itself is rewritten to ignore what is in it (the
    same anchoring), and the re-include line is appended once.
    """
    try:
        text = path.read_bytes().decode("utf-8", errors="replace")
        mode = stat.S_IMODE(os.lstat(path).st_mode)
    except FileNotFoundError:
        text, mode = "", 0o644
    lines = text.splitlines()
    stripped = [line.strip() for line in lines]
    changed = [FOLDER_LINES.get(line, line) if line in FOLDER_LINES else raw for raw, line in zip(lines, stripped)]
    if not any(line in IGNORES for line in stripped):
        changed.append(".loopstate/*")
    if KEEP_LINE not in stripped and "!/" + STORE_FILE not in stripped:
        changed.append(KEEP_LINE)
    if changed == lines:
        return False
    _refuse_unsafe(path)
    safefs.replace_with(path, ("\n".join(changed) + "\n").encode(), create_mode=0o600, chmod=mode)
    return True
