"""Where a project's store lives, and which project roots are acceptable.

The data dir is resolved explicitly (``LOOPSTATE_DATA_DIR``, then
``$CODEX_HOME/plugin-data/loopstate/v1``, then ``$PLUGIN_DATA``, then the XDG
state dir) and never falls back to the user's workspace. A project is named by a
SHA-256 over a domain-separated prefix and its canonical root, so user path
segments never become storage path segments.
"""

from __future__ import annotations

import hashlib
import os
import stat
from pathlib import Path

from loopstate_protocol.errors import ErrorCode

from loopstate.core.errors import LoopstateError

PROJECT_ID_PREFIX = "loopstate-project-v1\0"


def resolve_data_dir(environ: dict[str, str] | None = None) -> Path:
    """The data dir, by the documented order; every candidate must be absolute."""
    env = os.environ if environ is None else environ
    for name, suffix in (
        ("LOOPSTATE_DATA_DIR", ()),
        ("CODEX_HOME", ("plugin-data", "loopstate", "v1")),
        ("PLUGIN_DATA", ()),
    ):
        value = env.get(name)
        if value:
            base = Path(value)
            if not base.is_absolute():
                raise LoopstateError(
                    ErrorCode.INVALID_ROOT,
                    f"{name}={value!r} is not an absolute path; set it to an absolute directory",
                    variable=name,
                )
            return base.joinpath(*suffix)
    state_home = env.get("XDG_STATE_HOME") or ""
    if not state_home or not Path(state_home).is_absolute():
        home = env.get("HOME") or os.path.expanduser("~")
        if not home or not Path(home).is_absolute():
            raise LoopstateError(
                ErrorCode.INVALID_ROOT,
                "cannot resolve a data dir: set LOOPSTATE_DATA_DIR to an absolute directory",
            )
        state_home = os.path.join(home, ".local", "state")
    return Path(state_home) / "loopstate" / "v1"


def _refuse_special_forms(raw: str) -> None:
    """UNC and device namespaces are refused before any filesystem call."""
    lowered = raw.replace("/", "\\")
    if lowered.startswith("\\\\") or lowered.startswith("\\??\\"):
        raise LoopstateError(
            ErrorCode.INVALID_ROOT,
            f"project root {raw!r} is a UNC or device path; pass a local directory",
            root=raw,
        )
    if "\0" in raw:
        raise LoopstateError(ErrorCode.INVALID_ROOT, "project root contains a NUL byte", root=raw)


def canonical_root(raw: str | os.PathLike[str]) -> str:
    """Validate a project root and return its canonical absolute form.

    The root must be absolute, free of ``..`` segments, an existing directory on
    this machine. Symlinks in the root are resolved so that two spellings of one
    directory name one project.
    """
    text = os.fspath(raw)
    if not isinstance(text, str) or not text:
        raise LoopstateError(ErrorCode.INVALID_ROOT, "project root is empty; pass an absolute directory path")
    _refuse_special_forms(text)
    if not os.path.isabs(text):
        raise LoopstateError(
            ErrorCode.INVALID_ROOT, f"project root {text!r} is not absolute; pass an absolute directory path", root=text
        )
    if ".." in Path(text).parts:
        raise LoopstateError(
            ErrorCode.INVALID_ROOT, f"project root {text!r} contains '..'; pass the directory's plain absolute path", root=text
        )
    try:
        info = os.stat(text)
    except FileNotFoundError:
        raise LoopstateError(ErrorCode.INVALID_ROOT, f"project root {text!r} does not exist", root=text) from None
    except OSError as exc:
        raise LoopstateError(ErrorCode.INVALID_ROOT, f"project root {text!r} cannot be read: {exc.strerror}", root=text) from None
    if not stat.S_ISDIR(info.st_mode):
        raise LoopstateError(ErrorCode.INVALID_ROOT, f"project root {text!r} is not a directory", root=text)
    return os.path.realpath(text)


def project_id_for(root: str) -> str:
    """SHA-256 of the domain-separated canonical root."""
    return hashlib.sha256((PROJECT_ID_PREFIX + root).encode("utf-8")).hexdigest()
