"""Which project a command means: found from a directory upward, the way git finds a repository.

A command run in ``src/sub/`` of a project must reach that project's store, or
a kill switch set from there would silently miss the runs it is meant to halt.
Without an explicit root, the root is, walking up from the starting directory:

1. the nearest ancestor that is already a loopstate project: its store folder
   exists in the data dir, or it holds a team's committed store file
   (``.loopstate/store.json``, core/store_file.py), which a fresh clone on a new
   machine has before this data dir knows the project; else
2. the top of the git work tree (the nearest ancestor holding ``.git``, a
   folder or a worktree's file; git itself is not started, for speed), else
3. the starting directory itself.

An explicit root is taken as given when absolute (the root checks then
refuse ``..`` and the rest); a relative one is resolved against the starting
directory the way the kernel resolves it (symlinks first, then ``..``), since
a person typing ``--root ../proj`` means the folder their shell would open.

The walk costs one SHA-256 and two ``stat`` calls per ancestor: no process, no
lock, nothing written.
"""

from __future__ import annotations

import os
from pathlib import Path

import msgspec

from loopstate.core.adopted import is_known
from loopstate.core.paths import project_id_for, resolve_data_dir
from loopstate.core.store_file import STORE_FILE

EXPLICIT = "explicit"
PROJECT = "project"
GIT = "git"
CWD = "cwd"

REASONS = {
    EXPLICIT: "given explicitly",
    PROJECT: "the nearest loopstate project above the current directory",
    GIT: "the top of the git work tree",
    CWD: "the current directory",
}


class ProjectRoot(msgspec.Struct, frozen=True):
    """A resolved project root and how it was chosen (one of EXPLICIT, PROJECT, GIT, CWD)."""

    root: str
    how: str

    @property
    def reason(self) -> str:
        return REASONS[self.how]


def _ancestors(start: str) -> list[str]:
    """``start`` and each parent up to the filesystem root, nearest first."""
    chain = [start]
    while True:
        parent = os.path.dirname(chain[-1])
        if parent == chain[-1]:
            return chain
        chain.append(parent)


def discover_root(start: str, data_dir: Path | None = None) -> ProjectRoot:
    """The project that ``start`` (an absolute directory) lies in, by the order above."""
    # A physical path: ancestors of a symlink-free path are symlink-free, so each
    # one is already canonical and its project id can be computed directly.
    here = os.path.realpath(start)
    chain = _ancestors(here)
    projects = (resolve_data_dir() if data_dir is None else Path(data_dir)) / "projects"
    for folder in chain:
        if _is_project(projects, folder):
            return ProjectRoot(folder, PROJECT)
    for folder in chain:
        if os.path.lexists(os.path.join(folder, ".git")):
            return ProjectRoot(folder, GIT)
    return ProjectRoot(here, CWD)


def enclosing_projects(root: str, data_dir: Path | None = None) -> list[str]:
    """The loopstate projects above ``root`` (as ``discover_root`` tells them), nearest first.

    What the kill switch reaches beyond the project itself: a project nested in
    another must not cut the enclosing one's runs off from a stop given inside it.
    """
    projects = (resolve_data_dir() if data_dir is None else Path(data_dir)) / "projects"
    return [folder for folder in _ancestors(os.path.realpath(root))[1:] if _is_project(projects, folder)]


def _is_project(projects: Path, folder: str) -> bool:
    """A loopstate project: its own store in the data dir, one it adopted (core/adopted.py), or a
    team's store file committed in it."""
    return is_known(projects, project_id_for(folder)) or os.path.isfile(os.path.join(folder, STORE_FILE))


def resolve_root(explicit: str | os.PathLike[str] | None = None, *, cwd: str | None = None,
                 data_dir: Path | None = None) -> ProjectRoot:
    """The project root a front door should use: ``explicit`` if given, else discovered from ``cwd``.

    ``cwd`` defaults to this process's current directory; a hook passes the
    directory its host reports.
    """
    start = os.getcwd() if cwd is None else os.fspath(cwd)
    if explicit is None:
        return discover_root(start, data_dir)
    text = os.fspath(explicit)
    if not text or os.path.isabs(text) or "\0" in text:
        return ProjectRoot(text, EXPLICIT)  # the root checks say what is wrong with it
    return ProjectRoot(os.path.realpath(os.path.join(start, text)), EXPLICIT)
