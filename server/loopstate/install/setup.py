"""`loopstate setup`: the file effects of plan, apply and uninstall.

A host's config is read and written without following links (a symlinked file
or folder on the way is refused: a dotfiles checkout is edited by hand, not
through a link), written atomically (a sibling temp file, fsync, rename, fsync
of the folder) with the file's own permissions kept. Receipts and the bytes a
receipt replaced live in the data dir under ``installs/``, never in the host's
folders. Apply writes the receipt (result ``partial``) before it touches the
host's file and marks it ``complete`` after, so a crash in between leaves a
receipt that uninstall can still act on (each step compares digests first).
Uninstall works out the final state of every receipt's file first and refuses
before writing anything when one step cannot be undone safely.
"""

from __future__ import annotations

import difflib
import os
import shutil
import stat
import sys
import uuid
from dataclasses import dataclass
from pathlib import Path
from typing import Any, overload

from loopstate_protocol.errors import ErrorCode

from loopstate import __version__
from loopstate.core import safefs
from loopstate.core.clock import format_time, system_clock
from loopstate.core.errors import LoopstateError
from loopstate.install import receipts as rc
from loopstate.install.hosts import Host, Target, mcp_entry, registration
from loopstate.install.registration import ConfigShapeError, merge, unmerge
from loopstate.service.run_records import parse_json, to_dict, validate


@dataclass(frozen=True)
class Places:
    """Where things are for one command: the user's home, Codex's home, the project, the data dir."""

    home: str
    codex_home: str | None
    project: str | None
    data_dir: Path
    claude_config_dir: str | None = None  # Claude Code's user folder when set (it replaces ~/.claude)

    @staticmethod
    def from_environment(project: str | None, environ: dict[str, str] | None = None) -> "Places":
        from loopstate.core.paths import resolve_data_dir

        env = os.environ if environ is None else environ
        home = env.get("HOME") or ""
        if not os.path.isabs(home) or not os.path.isdir(home):
            raise LoopstateError(ErrorCode.INVALID_ROOT, f"HOME={home!r} is not an existing absolute directory; set HOME")
        codex_home = env.get("CODEX_HOME") or None
        if codex_home is not None and (not os.path.isabs(codex_home) or not os.path.isdir(codex_home)):
            raise LoopstateError(ErrorCode.INVALID_ROOT, f"CODEX_HOME={codex_home!r} is not an existing absolute "
                                 "directory; create it or unset CODEX_HOME")
        return Places(os.path.realpath(home), codex_home and os.path.realpath(codex_home), project,
                      resolve_data_dir(dict(env)), _claude_config_dir(env))

    def targets(self, host: Host, scope: str) -> list[Target]:
        from loopstate.install.hosts import targets

        return targets(host, scope, home=self.home, codex_home=self.codex_home, project=self.project,
                       claude_config_dir=self.claude_config_dir)


def _claude_config_dir(env) -> str | None:
    """``CLAUDE_CONFIG_DIR`` as Claude Code reads it (an absolute folder; setup creates its parts below)."""
    value = env.get("CLAUDE_CONFIG_DIR") or None
    if value is not None and not os.path.isabs(value):
        raise LoopstateError(ErrorCode.INVALID_ROOT, f"CLAUDE_CONFIG_DIR={value!r} is not an absolute path; set it "
                             "to the absolute folder Claude Code uses, or unset it")
    if value is not None and not os.path.isdir(value):
        raise LoopstateError(ErrorCode.INVALID_ROOT, f"CLAUDE_CONFIG_DIR={value!r} is not an existing directory; "
                             "create it (Claude Code does on its first start) or unset it")
    return value and os.path.realpath(value)


def default_executable() -> str:
    """This loopstate's console script: argv[0] when that is it, else beside this Python, else on PATH."""
    argv0 = sys.argv[0] if sys.argv else ""
    if os.path.basename(argv0) == "loopstate" and os.access(argv0, os.X_OK):
        return os.path.abspath(argv0)
    beside = os.path.join(os.path.dirname(sys.executable), "loopstate")
    if os.access(beside, os.X_OK):
        return beside
    found = shutil.which("loopstate")
    if found:
        return os.path.abspath(found)
    raise LoopstateError(ErrorCode.NOT_FOUND, "cannot find the loopstate executable (not beside this Python, not on "
                         "PATH): pass --executable with its absolute path")


# Reading and writing a host's file ----------------------------------------------------


def _refuse(path: str, why: str) -> LoopstateError:
    return LoopstateError(ErrorCode.UNSAFE_PATH, f"refusing to touch {path}: {why}; loopstate does not write through "
                          "links or into special files: edit it by hand or replace it with a plain file",
                          path=path, reason=why)


def _check_path(t: Target) -> os.stat_result | None:
    """The target's lstat (None when absent), after checking every folder below the root is a real folder."""
    current = t.root
    for part in t.relative.split("/")[:-1]:
        current = os.path.join(current, part)
        try:
            info = os.lstat(current)
        except FileNotFoundError:
            return None
        if not stat.S_ISDIR(info.st_mode):
            raise _refuse(current, "it is a symlink or not a folder")
    try:
        info = os.lstat(t.path)
    except FileNotFoundError:
        return None
    if not stat.S_ISREG(info.st_mode):
        raise _refuse(t.path, "it is a symlink or not a regular file")
    if info.st_nlink != 1:
        raise _refuse(t.path, f"it has {info.st_nlink} hard links")
    return info


def read_regular(path: str, *, follow: bool) -> bytes | None:
    """A regular file's bytes (None when absent); a FIFO or device is refused, not waited on. With ``follow``
    false a symlink at ``path`` itself is refused too."""
    flags = os.O_RDONLY | os.O_NONBLOCK | os.O_CLOEXEC | (0 if follow else os.O_NOFOLLOW)
    try:
        fd = os.open(path, flags)
    except FileNotFoundError:
        return None
    except OSError as exc:
        raise _refuse(path, os.strerror(exc.errno or 0)) from None
    with open(fd, "rb", closefd=True) as file:
        if not stat.S_ISREG(os.fstat(fd).st_mode):
            raise _refuse(path, "it is not a regular file")
        return file.read()


def read_target(t: Target) -> bytes | None:
    return None if _check_path(t) is None else read_regular(t.path, follow=False)


def missing_folders(t: Target) -> list[str]:
    """The folders below the root that writing the target would create (relative, outermost first)."""
    missing, parts = [], t.relative.split("/")[:-1]
    for depth in range(1, len(parts) + 1):
        relative = "/".join(parts[:depth])
        if not os.path.lexists(os.path.join(t.root, relative)):
            missing.append(relative)
    return missing


def write_target(t: Target, data: bytes) -> None:
    """Atomically replace (or create) the target, keeping an existing file's permission bits."""
    for relative in missing_folders(t):
        folder = os.path.join(t.root, relative)
        os.mkdir(folder, 0o777)  # the umask decides, as for any folder the user creates
        safefs.fsync_dir(os.path.dirname(folder))
    info = _check_path(t)
    # A new file as any the user makes (the umask decides); a replaced one keeps its own bits.
    safefs.replace_with(Path(t.path), data, create_mode=0o666,
                        chmod=None if info is None else stat.S_IMODE(info.st_mode))


def remove_target(t: Target) -> None:
    if _check_path(t) is not None:
        os.unlink(t.path)
        safefs.fsync_dir(Path(t.path).parent)


# Receipts -----------------------------------------------------------------------------


def _installs(places: Places) -> Path:
    return places.data_dir / "installs"


def _receipt_path(places: Places, receipt_id: str) -> Path:
    return _installs(places) / f"{receipt_id}.json"


def _backup_path(places: Places, receipt_id: str, index: int) -> Path:
    return _installs(places) / f"{receipt_id}.{index}.before"


def _ensure_installs(places: Places) -> Path:
    safefs.ensure_base(places.data_dir)
    safefs.ensure_dir(_installs(places), places.data_dir)
    return _installs(places)


def _store(places: Places, path: Path, data: bytes) -> None:
    _ensure_installs(places)
    safefs.atomic_write(path, places.data_dir, data)


def installs_lock(places: Places):
    """The exclusive lock every apply and uninstall holds from reading the receipts to writing the last one,
    so two setups at once cannot both plan from the same state (a waiter is refused after a bounded wait,
    naming the holder)."""
    from loopstate.core.lock import StoreLock

    return StoreLock(_ensure_installs(places) / ".lock", places.data_dir).exclusive()


def save_receipt(places: Places, receipt: dict[str, Any]) -> None:
    """Checked by the record validator before it is written (a receipt uninstall cannot trust is never kept)."""
    import json

    validate("install_receipt", receipt)
    _store(places, _receipt_path(places, receipt["receipt_id"]),
           (json.dumps(receipt, indent=2, sort_keys=True) + "\n").encode())


def load_receipts(places: Places) -> list[dict[str, Any]]:
    """Every receipt in the data dir, checked by the record validator, oldest first."""
    folder = _installs(places)
    if not folder.is_dir():
        return []
    found = []
    for path in sorted(folder.glob("*.json")):
        data = safefs.read_file(path, places.data_dir)
        if data is None:
            continue
        try:
            record = to_dict(validate("install_receipt", parse_json(data.decode("utf-8", "replace"), str(path))))
        except LoopstateError as exc:
            raise LoopstateError(ErrorCode.VALIDATION_FAILED, f"install receipt {path} is not valid: {exc.message}; "
                                 "move it aside (setup and uninstall trust only valid receipts)", path=str(path)) from None
        found.append(record)
    return sorted(found, key=lambda r: (r["created_at"], r["receipt_id"]))


def receipts_for(places: Places, t: Target) -> list[dict[str, Any]]:
    return [r for r in load_receipts(places) if rc.concerns(r, t.host.harness, t.root, t.relative)]


# Plan and apply -----------------------------------------------------------------------


@dataclass
class FilePlan:
    """One file of a plan: its bytes before and after, the folders writing it creates, and the receipt whose
    write it no longer matches (None when it does, or when no receipt wrote it)."""

    target: Target
    before: bytes | None
    after: bytes
    source: str
    folders: list[str]
    changed_since: dict[str, Any] | None

    @property
    def noop(self) -> bool:
        return self.before == self.after

    def diff(self) -> str:
        before = [] if self.before is None else self.before.decode("utf-8").splitlines(keepends=True)
        after = self.after.decode("utf-8").splitlines(keepends=True)
        lines = difflib.unified_diff(before, after, "/dev/null" if self.before is None else self.target.path,
                                     self.target.path)
        return "".join(line if line.endswith("\n") else line + "\n\\ No newline at end of file\n" for line in lines)

    def to_dict(self) -> dict[str, Any]:
        return {"path": self.target.path, "exists": self.before is not None, "noop": self.noop,
                "hooks": self.target.hooks, "mcp": self.target.mcp, "create_folders": self.folders,
                "diff": self.diff(),
                "changed_since_receipt": None if self.changed_since is None else self.changed_since["receipt_id"]}


@dataclass
class Plan:
    host: Host
    scope: str
    files: list[FilePlan]

    @property
    def noop(self) -> bool:
        return all(f.noop for f in self.files)

    def diff(self) -> str:
        return "".join(f.diff() for f in self.files)

    def to_dict(self) -> dict[str, Any]:
        return {"host": self.host.name, "scope": self.scope, "noop": self.noop, "diff": self.diff(),
                "files": [f.to_dict() for f in self.files]}


@overload
def _text(data: bytes, path: str) -> str: ...


@overload
def _text(data: None, path: str) -> None: ...


def _text(data: bytes | None, path: str) -> str | None:
    if data is None:
        return None
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise LoopstateError(ErrorCode.VALIDATION_FAILED, f"{path} is not UTF-8 text (byte {exc.start}); fix it or "
                             "move it aside", path=path) from None


def _shape_error(path: str, exc: ConfigShapeError) -> LoopstateError:
    return LoopstateError(ErrorCode.VALIDATION_FAILED, f"{path}: {exc}", path=path)


def check_executable(path: str) -> str:
    """The program a registration runs: an absolute path to an executable file, since the host runs it from a
    directory and PATH of its own."""
    if not os.path.isabs(path):
        raise LoopstateError(ErrorCode.INVALID_PARAMS, f"--executable {path!r} is not an absolute path; pass the "
                             "absolute path of the loopstate executable (e.g. from `command -v loopstate`)")
    if not (os.path.isfile(path) and os.access(path, os.X_OK)):
        raise LoopstateError(ErrorCode.NOT_FOUND, f"--executable {path} is not an executable file; pass the absolute "
                             "path of the loopstate executable")
    return path


def mcp_available() -> bool:
    """Whether `loopstate mcp` can serve from this environment (its SDK is an optional extra)."""
    import importlib.util

    return importlib.util.find_spec("mcp") is not None


SHARED_PROGRAM = "loopstate"  # what a project's shared files run: found on each teammate's PATH


def program_for(host: Host, scope: str, executable: str | None) -> str:
    """The program our registration runs: this loopstate's absolute path (``--executable`` or this one), except
    in a project scope, whose files a team commits: there it is ``loopstate`` from the PATH the host runs hooks
    and MCP servers with (both hosts keep the user's PATH), so no path of this machine lands in a shared file."""
    if scope == "project":
        if executable is not None:
            files = ".claude/settings.json and .mcp.json" if host.name == "claude" else ".codex/config.toml"
            raise LoopstateError(ErrorCode.INVALID_PARAMS, f"--executable with --scope project would write this "
                                 f"machine's path into {files}, which a team commits: "
                                 "leave --executable out (the project's hooks run `loopstate` from each one's PATH), "
                                 "or use --scope user")
        return SHARED_PROGRAM
    return executable or default_executable()


def shared_files(plan: "Plan") -> list[str]:
    """The files of a plan that are meant to be committed with the project (a project scope's)."""
    return [f.target.path for f in plan.files if plan.scope == "project"]


def trust_source(t: Target, trust: bool) -> str | None:
    """Where Codex's trust of the target's hooks goes when the user consented (``trust``): the target itself
    for the user scope, whose path is the trust key's source. Codex reads trust from the user's config only,
    so a project's hooks are trusted in Codex's /hooks (setup says so)."""
    return t.path if trust and t.host.name == "codex" and t.hooks and t.scope == "user" else None


def make_plan(places: Places, host: Host, scope: str, executable: str, *, mcp: bool, trust: bool = False) -> Plan:
    if executable != SHARED_PROGRAM:
        check_executable(executable)
    groups, server = registration(executable, host), mcp_entry(executable, host)
    files, folders_seen = [], set()
    for t in places.targets(host, scope):
        if t.mcp and not mcp and not t.hooks:
            continue
        wanted_groups, wanted_server = (groups if t.hooks else None), (server if t.mcp and mcp else None)
        before = read_target(t)
        try:
            after = merge(t.file_format, _text(before, t.path), host, wanted_groups, wanted_server,
                          trust_source=trust_source(t, trust)).encode("utf-8")
        except ConfigShapeError as exc:
            raise _shape_error(t.path, exc) from None
        mine = receipts_for(places, t)
        changed = None
        if mine:
            _, op = rc.file_op(mine[-1], t.relative)
            if (None if before is None else rc.digest(before)) != op["resulting_digest"]:
                changed = mine[-1]
        folders = [f for f in missing_folders(t) if f not in folders_seen]
        folders_seen.update(folders)
        wanted: dict[str, Any] = {"hooks": wanted_groups, "mcp_server": wanted_server}
        if t.file_format == "command":
            wanted["command"] = after.decode("utf-8")
        source = rc.source_digest(wanted)
        files.append(FilePlan(t, before, after, source, folders, changed))
    return Plan(host, scope, files)


def apply(places: Places, plan: Plan, *, approve: bool) -> dict[str, Any] | None:
    """Write the plan; returns the receipt, or None when there was nothing to change."""
    if plan.noop:
        return None
    for f in plan.files:
        if not f.noop and f.changed_since is not None and not approve:
            raise LoopstateError(
                ErrorCode.CONFLICT,
                f"{f.target.path} changed since loopstate wrote it (receipt {f.changed_since['receipt_id']}); see "
                f"what apply would write with `loopstate setup plan --host {plan.host.name} --scope {plan.scope}`, "
                "then re-run with --approve", path=f.target.path, receipt_id=f.changed_since["receipt_id"])
    receipt_id = str(uuid.uuid4())
    operations, backups = [], []
    for f in plan.files:
        if f.noop:  # the-loop's skip rule: looked at, left as it was, nothing to undo
            operations.append({**rc.file_operation(f.target.relative, f.source, f.before, f.after),
                               "action": "skip", "rollback_action": "none"})
            continue
        operations += [rc.mkdir_operation(folder) for folder in f.folders]
        operations.append(rc.file_operation(f.target.relative, f.source, f.before, f.after))
        if f.before is not None:
            backups.append((len(operations) - 1, f.before))
    created_at = format_time(system_clock())

    def receipt(result: str) -> dict[str, Any]:
        return rc.receipt(receipt_id=receipt_id, created_at=created_at, source_version=__version__,
                          target_root=plan.files[0].target.root, harness=plan.host.harness, operations=operations,
                          result=result)

    for index, data in backups:
        _store(places, _backup_path(places, receipt_id, index), data)
    save_receipt(places, receipt("partial"))
    for f in plan.files:
        if not f.noop:
            write_target(f.target, f.after)
    done = receipt("complete")
    save_receipt(places, done)
    return done


# Uninstall ----------------------------------------------------------------------------


@dataclass
class Undo:
    target: Target
    final: bytes | None
    steps: list[str]
    receipts: list[dict[str, Any]]
    folders: list[str]


def _plan_undo(places: Places, t: Target, host: Host, approve: bool) -> Undo:
    mine = receipts_for(places, t)
    current = read_target(t)
    steps, folders = [], []
    for r in reversed(mine):
        index, op = rc.file_op(r, t.relative)
        step = rc.rollback_step(op, None if current is None else rc.digest(current))
        if step == "restore":
            kept = safefs.read_file(_backup_path(places, r["receipt_id"], index), places.data_dir)
            if kept is None or rc.digest(kept) != op["pre_existing_digest"]:
                raise LoopstateError(ErrorCode.CONFLICT, f"the bytes receipt {r['receipt_id']} replaced in {t.path} are "
                                     "missing or damaged in the data dir; re-run with --approve to take out only "
                                     "loopstate's entries instead", path=t.path, receipt_id=r["receipt_id"])
            current = kept
        elif step == "remove":
            current = None
        elif step == "changed":
            if not approve:
                raise LoopstateError(
                    ErrorCode.CONFLICT,
                    f"{t.path} changed since loopstate wrote it (receipt {r['receipt_id']}), so it is not restored; "
                    "re-run with --approve to take out only loopstate's entries and keep everything else",
                    path=t.path, receipt_id=r["receipt_id"])
            assert current is not None  # "changed" is said of bytes that are there
            try:
                left = unmerge(t.file_format, _text(current, t.path), host,
                               trust_source=t.path if host.name == "codex" else None)
            except ConfigShapeError as exc:
                raise _shape_error(t.path, exc) from None
            current = None if left is None else left.encode("utf-8")
            step = "took out loopstate's entries"
        steps.append(f"{t.path}: receipt {r['receipt_id']}: {step}")
        folders += [op["destination"] for op in reversed(r["operations"]) if op["action"] == "mkdir"
                    and os.path.join(t.relative, "").startswith(os.path.join(op["destination"], ""))]
    return Undo(t, current, steps, mine, folders)


def plan_uninstall(places: Places, host: Host, scope: str, *, approve: bool) -> list[Undo]:
    """Each file's state once every active receipt of it is undone, newest first; refuses before any write."""
    return [undo for t in places.targets(host, scope) if (undo := _plan_undo(places, t, host, approve)).receipts]


def uninstall(places: Places, undos: list[Undo]) -> list[str]:
    """Carry out a planned uninstall; returns the folders kept because something else is in them now."""
    kept = []
    for undo in undos:
        t = undo.target
        if undo.final is None:
            remove_target(t)
        elif undo.final != read_target(t):
            write_target(t, undo.final)
        for relative in undo.folders:
            folder = os.path.join(t.root, relative)
            try:
                if stat.S_ISDIR(os.lstat(folder).st_mode):
                    os.rmdir(folder)
                    safefs.fsync_dir(os.path.dirname(folder))
            except FileNotFoundError:
                pass
            except OSError:
                kept.append(folder)
    done = {r["receipt_id"]: r for undo in undos for r in undo.receipts}
    for r in done.values():
        save_receipt(places, {**r, "result": "rolled_back"})
        for index in range(len(r["operations"])):
            backup = _backup_path(places, r["receipt_id"], index)
            if backup.exists():
                backup.unlink()
    return kept
