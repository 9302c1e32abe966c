"""A repository that moved or was cloned afresh keeps its state: detect it, and adopt the old project.

The project id is a digest of the root path, so ``mv repo repo2`` or a new
``git clone`` elsewhere would silently show an empty project. Two things
identify a project beyond its path:

- its ``.loopstate/config.json`` (moved along with the folder by ``mv``): the
  config's ``project_id`` is derived from the project's own id
  (service/project_init.py), so it names the project it was written for;
- its git history: the root commit(s) of the work tree, recorded for a
  project the first time the CLI works in it as a git work tree
  (``<data dir>/identities/<project id>``), so a clone elsewhere, with the
  same first commit, is recognised even after the old clone is gone.

``look_alike`` finds known projects that match a root that has no state yet;
``adopt`` makes that root carry one of them (core/adopted.py), refusing
whatever would hide or mix state: a root that has its own state already, an
old project that does not exist, or (without ``share``) an old root that
still exists and would then share its state with the new one.
"""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any

from loopstate_protocol.errors import ErrorCode

from loopstate.core import safefs
from loopstate.core.adopted import ADOPTED, adopted_id, alias_path
from loopstate.core.errors import LoopstateError
from loopstate.core.ids import derived_uuid4
from loopstate.core.paths import project_id_for, resolve_data_dir
from loopstate.core.store_file import STORE_FILE, read_store_file

IDENTITIES = "identities"


def git_roots(root: str) -> list[str]:
    """The root commit ids of the git work tree at ``root`` (sorted), or [] when it is none or has no commit."""
    if not os.path.lexists(os.path.join(root, ".git")):
        return []
    import subprocess  # here: a hook that only asks ``has_state`` does not pay its import

    try:
        done = subprocess.run(["git", "-C", root, "rev-list", "--max-parents=0", "HEAD"], capture_output=True,
                              text=True, timeout=10, stdin=subprocess.DEVNULL)
    except (OSError, subprocess.TimeoutExpired):
        return []
    return sorted(line for line in done.stdout.split() if len(line) in (40, 64)) if done.returncode == 0 else []


def remember_identity(data_dir: Path, project_id: str, root: str) -> None:
    """Record the git history of a project that has a store, once (best effort: never fails a command)."""
    path = data_dir / IDENTITIES / project_id
    if os.path.lexists(path) or not os.path.lexists(os.path.join(root, ".git")):
        return
    commits = git_roots(root)
    if not commits:
        return
    try:
        _write_identity(data_dir, project_id, {"git_roots": commits, "roots": [root]})
    except (OSError, LoopstateError):
        pass


def _describe(data_dir: Path, project_id: str) -> dict[str, Any] | None:
    """A known project: its id and where it lives now (the newest root that adopted it and still exists, else
    where it was founded), or None when it has no store."""
    try:
        with open(data_dir / "projects" / project_id / "project.json", encoding="utf-8") as handle:
            record = json.load(handle)
    except (OSError, ValueError):
        return None
    lives = [r for r in _identity(data_dir, project_id).get("roots", []) if os.path.isdir(r)]
    return {"project_id": project_id, "root": lives[-1] if lives else record.get("root")}


def _listdir(folder: Path) -> list[str]:
    try:
        return os.listdir(folder)
    except OSError:
        return []


def _identity(data_dir: Path, project_id: str) -> dict[str, Any]:
    try:
        with open(data_dir / IDENTITIES / project_id, encoding="utf-8") as handle:
            value = json.load(handle)
    except (OSError, ValueError):
        return {}
    return value if isinstance(value, dict) else {}


def _write_identity(data_dir: Path, project_id: str, identity: dict[str, Any]) -> None:
    path = data_dir / IDENTITIES / project_id
    safefs.ensure_dir(path.parent, data_dir)
    safefs.atomic_write(path, path.parent, json.dumps(identity, sort_keys=True).encode(), durable=False)


def _config_project(root: str) -> str | None:
    try:
        with open(os.path.join(root, ".loopstate", "config.json"), encoding="utf-8") as handle:
            value = json.load(handle).get("project_id")
    except (OSError, ValueError, AttributeError):
        return None
    return value if isinstance(value, str) else None


def look_alike(root: str, data_dir: Path | None = None) -> list[dict[str, Any]]:
    """Known projects at other paths that ``root`` (which has no state yet) looks like: [{root, project_id, why}].

    Cheap when nothing can match (a command in a new folder pays for it): no config and no .git is no
    look at all; a config is compared with the project ids (folder names, no file read); the git history
    is asked of git only when some project recorded one.
    """
    data_dir = resolve_data_dir() if data_dir is None else Path(data_dir)
    try:
        committed = read_store_file(root)
    except LoopstateError:
        committed = None  # a bad store file: the command itself refuses it, with what is wrong
    if committed is not None and committed.project_id is not None:
        return []  # a team's clone is the project its committed store file names, wherever it is
    found: dict[str, str] = {}
    config_id = _config_project(root)
    if config_id is not None:
        for name in _listdir(data_dir / "projects"):
            if config_id == derived_uuid4("runs.config-project", name):
                found[name] = "its .loopstate/config.json was written for that project"
    recorded = _listdir(data_dir / IDENTITIES) if os.path.lexists(os.path.join(root, ".git")) else []
    if recorded:
        commits = set(git_roots(root))
        for name in recorded if commits else []:
            if name not in found and commits & set(_identity(data_dir, name).get("git_roots", [])):
                found[name] = "the same first git commit"
    out = []
    for name, why in found.items():
        known = _describe(data_dir, name)
        if known is not None and known["root"] != root:
            out.append({**known, "why": why})
    return out


def notice(root: str, data_dir: Path | None = None) -> str | None:
    """The line a command prints for a root that has no state but looks like a known project elsewhere."""
    try:
        alike = look_alike(root, data_dir)
    except Exception:  # a hint must never fail the command it accompanies
        return None
    if not alike:
        return None
    first = alike[0]
    gone = "" if os.path.isdir(first["root"] or "") else ", which no longer exists"
    return (f"this folder has no loopstate state yet, but it looks like the project at {first['root']}{gone} "
            f"({first['why']}): to carry that project's state here, run `loopstate project adopt {first['root']}`"
            + (f" ({len(alike) - 1} more look alike: `loopstate project adopt --list`)" if len(alike) > 1 else ""))


def has_state(root: str, data_dir: Path) -> bool:
    """Whether the project ``root`` carries (its own, or the one it adopted) has any stream: state to show.

    A folder a hook or a read merely looked at may have a project folder (session bindings, a
    checkpoint) and still no state; only a stream is state, as ``adopt`` judges it too.
    """
    carried = adopted_id(data_dir, project_id_for(root))
    try:
        with os.scandir(data_dir / "projects" / carried / "streams") as entries:
            return any(entry.name.endswith(".jsonl") for entry in entries)
    except OSError:
        return False


def hint(root: str, data_dir: Path | None = None) -> str | None:
    """For a front door's first answer (CLI, hook, MCP): the adoption notice when ``root`` has no state
    but looks like a known project elsewhere; None otherwise, and None on any fault (a hint never fails
    what it accompanies)."""
    try:
        data_dir = resolve_data_dir() if data_dir is None else Path(data_dir)
        if has_state(root, data_dir):
            return None
    except Exception:
        return None
    return notice(root, data_dir)


def adopt(root: str, old: str, *, share: bool = False, data_dir: Path | None = None) -> dict[str, Any]:
    """Make ``root`` carry the state of the project at ``old`` (a path, or a project id); what was done."""
    data_dir = resolve_data_dir() if data_dir is None else Path(data_dir)
    projects = data_dir / "projects"
    committed = read_store_file(root)
    if committed is not None and committed.project_id is not None:  # the id every clone carries: no adoption
        raise LoopstateError(ErrorCode.CONFLICT, f"{root} is project {committed.project_id[:12]}... by its committed "
                             f"{STORE_FILE} on every clone and machine, so an adoption would change nothing; to "
                             "bring another store's history in, `loopstate store import --from DIR_OR_URL`", root=root)
    own_id = project_id_for(root)
    old_path = os.path.realpath(os.path.abspath(os.path.expanduser(old)))
    if len(old) == 64 and all(c in "0123456789abcdef" for c in old):
        old_id = old
    else:
        old_id = adopted_id(data_dir, project_id_for(old_path))
    if not os.path.isdir(projects / old_id):
        alike = look_alike(root, data_dir)
        hint = ("; these look like this folder: " + ", ".join(a["root"] for a in alike)) if alike else ""
        raise LoopstateError(ErrorCode.NOT_FOUND, f"no loopstate project was ever kept for {old} (project id "
                             f"{old_id[:12]}...){hint}; give the folder the repository was at before", old=old)
    try:
        with open(projects / old_id / "project.json", encoding="utf-8") as handle:
            old_root = json.load(handle).get("root") or old_path
    except (OSError, ValueError):
        old_root = old_path
    if old_id == own_id:
        raise LoopstateError(ErrorCode.INVALID_PARAMS, f"{old} is this very project ({root}); nothing to adopt",
                             old=old)
    current = adopted_id(data_dir, own_id)
    if current == old_id:
        return {"root": root, "project_id": old_id, "from": old_root, "adopted": False, "already": True}
    if os.path.isdir(projects / current) and any((projects / current / "streams").glob("*.jsonl")):
        raise LoopstateError(ErrorCode.CONFLICT, f"{root} already has its own loopstate state (project id "
                             f"{current[:12]}...); adopting would hide it. Keep it, or move it aside first: "
                             f"`loopstate intent export` what you need, then remove {projects / current}",
                             root=root, project_id=current)
    living = sorted({path for path in (old_path, old_root) if path != root and os.path.isdir(path)})
    if living and not share:
        raise LoopstateError(ErrorCode.CONFLICT, f"{living[0]} still exists, so both folders would then share one "
                             "state (one kill switch, one intent ledger); pass --share if that is what you want, "
                             "or remove the old folder first", old=living[0])
    safefs.ensure_base(data_dir)
    safefs.ensure_dir(data_dir / ADOPTED, data_dir)
    safefs.atomic_write(alias_path(data_dir, own_id), data_dir / ADOPTED, (old_id + "\n").encode())
    identity = _identity(data_dir, old_id)
    commits = identity.get("git_roots") or git_roots(root)
    try:  # where the project lives now, for the next look-alike's hint (best effort: the adoption stands)
        _write_identity(data_dir, old_id, {"git_roots": commits, "roots": [*identity.get("roots", []), root]})
    except (OSError, LoopstateError):
        pass
    shown = old_path if os.path.isdir(old_path) else old_root
    return {"root": root, "project_id": old_id, "from": shown, "adopted": True, "already": False,
            "shared": bool(living)}


def listing(root: str, data_dir: Path | None = None) -> list[dict[str, Any]]:
    return look_alike(root, data_dir)
