"""What a host session is bound to (a run, a goal) and what it was last told, kept beside the store.

A harness hook is a fresh process per event, so what ties one host session's
events together lives in a small file per session:
``<project>/hook-sessions/<host_session_hash>.json``. It holds

* ``host_session_hash``: a domain-separated SHA-256 of the host's session id
  (the id itself is never stored), which also names the file;
* ``task_id``: the intent task the session's last context was computed for.
  It is a record, not the binding: a session works on the project's current
  task (``intent.current``), or the task ``LOOPSTATE_TASK`` pins, or its own
  private task, whichever the store says at each event
  (``hook_decisions.HookSession.task``), so two sessions of one project share
  one task and a task started anywhere is the one every next event sees;
* ``run_id`` and ``goal_id``: what the session's tool and stop rules look at
  (from ``LOOPSTATE_RUN`` / ``LOOPSTATE_GOAL`` in the hook's environment, as a
  harness launcher sets them, the project's hooks config goal, or
  ``loopstate run create|acquire --session ID``: ``bind_run``);
* ``injected``: a digest of the last context injected in this session,
  ``state_key``: a digest of the identities (inode, size, mtime) of the files
  that context was computed from, so an unchanged store is known without
  reading it, and ``reinject``: set at a compaction, so the next prompt
  injects again.

A file written before sessions shared the current task (schema 1: a task of
its own per session, an ``epoch`` counting its clears) is still read: its
run, goal and injection marks are kept, its task is not (the session follows
the current task), and the next write makes it schema 2.

The digest is a domain-separated SHA-256, salted with the session hash, of
text that is itself only status lines and the user's claims as the ledger
already holds them (redacted statements): it holds nothing that is not at rest
already, and no digest of a prompt.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import msgspec

from loopstate.core import canonical, safefs
from loopstate.core.project import Project

FOLDER = "hook-sessions"
SCHEMA_VERSION = 2


class Binding(msgspec.Struct, kw_only=True):
    host_session_hash: str
    task_id: str | None = None
    run_id: str | None = None
    goal_id: str | None = None
    injected: str | None = None
    state_key: str | None = None
    reinject: bool = False
    updated_at: str = ""

    def record(self, project_id: str) -> dict[str, Any]:
        return {"schema_version": SCHEMA_VERSION, "project_id": project_id, **msgspec.structs.asdict(self)}


FIELDS = {"schema_version", "project_id", *Binding.__struct_fields__}
# Schema 1: one task per session and epoch (a clear moved it to the next).
FIELDS_V1 = (FIELDS - {"schema_version"}) | {"schema_version", "epoch"}


def session_hash(host_session_id: str) -> str:
    return canonical.sha256_hex(("loopstate-hook-session-v1\0" + host_session_id).encode("utf-8"))


def path_for(project: Project, session: str) -> Path:
    return project.dir / FOLDER / f"{session}.json"


def read(project: Project, session: str) -> Binding | None:
    """The session's binding; None when there is none, or when the file is not one of ours (it is rebuilt)."""
    data = safefs.read_file(path_for(project, session), project.dir) if project.exists() else None
    if data is None:
        return None
    try:
        record = canonical.decode(data)
    except Exception:
        return None
    if not isinstance(record, dict) or record.get("project_id") != project.project_id \
            or record.get("host_session_hash") != session:
        return None
    fields = {k: v for k, v in record.items() if k not in ("schema_version", "project_id", "epoch")}
    if record.get("schema_version") == 1 and set(record) == FIELDS_V1:
        # The session's own task is the old rule's: it now follows the current task, so the state key
        # (computed for that task) is dropped and the next prompt computes its context afresh.
        fields.update(task_id=None, state_key=None)
    elif record.get("schema_version") != SCHEMA_VERSION or set(record) != FIELDS:
        return None
    try:
        return msgspec.convert(fields, Binding)
    except msgspec.ValidationError:
        return None


def write(project: Project, binding: Binding, *, durable: bool) -> None:
    """Replace the session's file; durable when it binds a run or goal, a page-cache write for injection marks."""
    project.ensure()
    safefs.ensure_dir(project.dir / FOLDER, project.dir)
    safefs.atomic_write(path_for(project, binding.host_session_hash), project.dir,
                        canonical.encode(binding.record(project.project_id)), durable=durable)


def bind_run(project: Project, host_session_id: str, run_id: str, updated_at: str) -> None:
    """Bind the host session to ``run_id`` (``loopstate run create|acquire --session ID``): from its next
    event its PreToolUse enforces that run's lease and budgets, as ``LOOPSTATE_RUN`` would."""
    session = session_hash(host_session_id)
    binding = read(project, session) or Binding(host_session_hash=session)
    binding.run_id, binding.state_key, binding.updated_at = run_id, None, updated_at
    write(project, binding, durable=True)


def context_digest(session: str, text: str) -> str:
    return canonical.sha256_hex(("loopstate-hook-context-v1\0" + session + "\0" + text).encode("utf-8"))


def state_digest(session: str, parts: list[str]) -> str:
    """The state key: file identities and ids only, salted with the session hash."""
    return canonical.sha256_hex(("loopstate-hook-state-v1\0" + session + "\0" + "\0".join(parts)).encode("utf-8"))
