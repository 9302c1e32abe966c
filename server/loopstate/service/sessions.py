"""Which intent task (and run, and goal) a host session is bound to, kept beside the store.

A harness hook is a fresh process per event, so what ties one host session's
events together lives in a small file per session:
``<project>/hook-sessions/<host_session_hash>.json``. It holds

* ``host_session_hash``: a domain-separated SHA-256 of the host's session id
  (the id itself is never stored), which also names the file;
* ``epoch`` and ``task_id``: the session's intent task, a UUIDv5 of the
  project, the hash and the epoch (``domains.harness.session_task_id``), so
  two hooks racing to start it start the same task and the second is a replay.
  SessionStart with source ``clear`` moves to the next epoch: a new task;
  ``resume`` and ``compact`` keep it;
* ``run_id`` and ``goal_id``: what the session's tool and stop rules look at
  (from ``LOOPSTATE_RUN`` / ``LOOPSTATE_GOAL`` in the hook's environment, as a
  harness launcher sets them, or the project's hooks config goal);
* ``injected``: a digest of the last context injected in this session,
  ``state_key``: a digest of the identities (inode, size, mtime) of the files
  that context was computed from, so an unchanged store is known without
  reading it, and ``reinject``: set at a compaction, so the next prompt
  injects again.

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
from loopstate.domains.harness import session_task_id

FOLDER = "hook-sessions"
SCHEMA_VERSION = 1


class Binding(msgspec.Struct, kw_only=True):
    host_session_hash: str
    task_id: str
    epoch: int = 0
    run_id: str | None = None
    goal_id: str | None = None
    injected: str | None = None
    state_key: str | None = None
    reinject: bool = False
    updated_at: str = ""

    def record(self, project_id: str) -> dict[str, Any]:
        return {"schema_version": SCHEMA_VERSION, "project_id": project_id, **msgspec.structs.asdict(self)}


FIELDS = {"schema_version", "project_id", *Binding.__struct_fields__}


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
    if not isinstance(record, dict) or set(record) != FIELDS or record["schema_version"] != SCHEMA_VERSION \
            or record["project_id"] != project.project_id or record["host_session_hash"] != session:
        return None
    return Binding(**{k: v for k, v in record.items() if k not in ("schema_version", "project_id")})


def new(project: Project, session: str, epoch: int = 0) -> Binding:
    return Binding(host_session_hash=session, epoch=epoch, task_id=session_task_id(project.project_id, session, epoch))


def write(project: Project, binding: Binding, *, durable: bool) -> None:
    """Replace the session's file; durable when it names a new task, a page-cache write for injection marks."""
    project.ensure()
    safefs.ensure_dir(project.dir / FOLDER, project.dir)
    safefs.atomic_write(path_for(project, binding.host_session_hash), project.dir,
                        canonical.encode(binding.record(project.project_id)), durable=durable)


def context_digest(session: str, text: str) -> str:
    return canonical.sha256_hex(("loopstate-hook-context-v1\0" + session + "\0" + text).encode("utf-8"))


def state_digest(session: str, parts: list[str]) -> str:
    """The state key: file identities and ids only, salted with the session hash."""
    return canonical.sha256_hex(("loopstate-hook-state-v1\0" + session + "\0" + "\0".join(parts)).encode("utf-8"))
