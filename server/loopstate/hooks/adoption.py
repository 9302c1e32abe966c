"""A hook in a moved or re-cloned repository says so, instead of injecting an empty project.

The project id is a digest of the root path, so after ``mv repo repo2`` or a new
``git clone`` the hook would see a project with no state and inject nothing
about the user's intent. When the root has no state but looks like a known
project at another path (service/adopt.py: its ``.loopstate/config.json``, or
the same first git commit), SessionStart's context and systemMessage carry
the notice with the command that carries the state over (``loopstate project
adopt OLD_PATH``); UserPromptSubmit carries it once per session, for a host
that did not run SessionStart.

Cheap where it must be: a root that has state costs one open and one directory
listing (no import of the adoption module, which loads json and may ask git);
a prompt in a session that was told already costs one lstat more. Any fault
here yields no hint: the hook answers as it would without one.
"""

from __future__ import annotations

import os

TYPE_CHECKING = False
if TYPE_CHECKING:
    from loopstate.service.hook_decisions import HookAnswer

CONTEXT_EVENTS = ("SessionStart", "UserPromptSubmit")
TOLD = "adoption-told"  # in loopstate's temp folder: which sessions were told about which root


def _has_state(root: str) -> bool:
    """``service.adopt.has_state`` for the hook's hot path: the root's carried project has a stream."""
    from loopstate.core.adopted import adopted_id
    from loopstate.core.paths import project_id_for, resolve_data_dir
    from loopstate.service.shared_stop import on_shared_store

    if on_shared_store(root):  # no files here: the store lists the project's streams (one query)
        from loopstate.core.project import Project
        from loopstate.core.stores import open_store

        return bool(open_store(Project(root)).stream_names())
    data_dir = resolve_data_dir()
    streams = data_dir / "projects" / adopted_id(data_dir, project_id_for(root)) / "streams"
    try:
        with os.scandir(streams) as entries:
            return any(entry.name.endswith(".jsonl") for entry in entries)
    except OSError:
        return False


def _mark(session_id: str, root: str) -> str:
    import hashlib
    import tempfile

    folder = os.path.join(tempfile.gettempdir(), f"loopstate-{os.getuid() if hasattr(os, 'getuid') else 'user'}", TOLD)
    return os.path.join(folder, hashlib.sha256(f"{session_id}\0{root}".encode()).hexdigest()[:32])


def _told(mark: str) -> bool:
    """Whether this session was told about this root already; marks it told. A mark that cannot be kept
    means telling again, never staying silent."""
    if os.path.lexists(mark):
        return True
    try:
        os.makedirs(os.path.dirname(mark), mode=0o700, exist_ok=True)
        os.close(os.open(mark, os.O_WRONLY | os.O_CREAT | os.O_EXCL | getattr(os, "O_NOFOLLOW", 0), 0o600))
    except OSError:
        pass
    return False


def adoption_hint(root: str, event: str, session_id: str | None) -> str | None:
    """The notice for this event, or None (most events, a root with state, a session told already)."""
    if event not in CONTEXT_EVENTS:
        return None
    try:
        if _has_state(root):
            return None
        told = _told(_mark(session_id or "", root))
        if event != "SessionStart" and told:
            return None
        from loopstate.service.adopt import hint

        return hint(root)
    except Exception:  # a hint never fails the hook it rides on
        return None


def with_hint(answer: HookAnswer, event: str, said: str) -> None:
    """Put the notice where this answer is seen: after an ``/intent`` receipt; else in front of the context
    (the agent passes it on) and, on SessionStart, in the notice too (the user's systemMessage)."""
    line = f"loopstate: {said}"
    if answer.receipt:
        answer.receipt = f"{answer.receipt}\n{line}"
        return
    ask = f"{line}\nTell the user this once, with the command."
    answer.context = f"{ask}\n\n{answer.context}" if answer.context else ask
    if event == "SessionStart":
        answer.notice = f"{answer.notice}\n{line}" if answer.notice else line
