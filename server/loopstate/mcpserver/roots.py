"""Which project an MCP call means, decided before the store is touched.

In order: the sandbox cwd Codex sends with each tool call (``_meta`` key
``codex/sandbox-state-meta``, field ``sandboxCwd``, because this server
advertises that experimental capability); else the client's one file root
(MCP roots); else the server's ``--root``; else the server's current
directory, with the CLI's discovery (``resolve_root``). A host's directory is
resolved with the same discovery, so a sandbox cwd inside a project means that
project.

When the host names a project and ``--root`` names another, the call is
refused with INVALID_ROOT: the server was configured for one project and the
host is working in a different one, and writing to either would be a guess.
Malformed host metadata is refused too, never ignored.
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from typing import Any, Mapping
from urllib.parse import unquote, urlsplit

from loopstate_protocol.errors import ErrorCode

from loopstate.core.errors import LoopstateError
from loopstate.service.front import resolve_root

SANDBOX_META = "codex/sandbox-state-meta"


@dataclass(frozen=True)
class Choice:
    """A project root and where it came from: sandbox, mcp_root, explicit, or the discovery's reason."""

    root: str
    source: str


def _invalid(message: str, **details: Any) -> LoopstateError:
    return LoopstateError(ErrorCode.INVALID_ROOT, message, **details)


def local_path(value: str, what: str) -> str:
    """An absolute local directory from a ``file://`` URI or a plain absolute path."""
    if value.startswith("file:"):
        parts = urlsplit(value)
        if parts.netloc not in ("", "localhost"):
            raise _invalid(f"{what}: {value!r} is on host {parts.netloc!r}; only local file roots are served", value=value)
        path = unquote(parts.path)
    else:
        path = value
    if not path or "\0" in path or not os.path.isabs(path):
        raise _invalid(f"{what}: {value!r} is not an absolute local path or file:// URI", value=value)
    if not os.path.isdir(path):
        raise _invalid(f"{what}: {path} is not an existing directory", value=value)
    return path


def sandbox_cwd(meta: Mapping[str, Any] | None) -> str | None:
    """The sandbox cwd of a Codex tool call, None when the call carries no sandbox state."""
    if not meta or SANDBOX_META not in meta:
        return None
    state = meta[SANDBOX_META]
    cwd = state.get("sandboxCwd") if isinstance(state, dict) else None
    if not isinstance(cwd, str):
        raise _invalid(f"malformed {SANDBOX_META}: expected an object with a string sandboxCwd, got {state!r}")
    return local_path(cwd, f"{SANDBOX_META}.sandboxCwd")


def single_file_root(uris: list[str] | None) -> str | None:
    """The client's one ``file://`` root, None when it offers none or several."""
    files = [uri for uri in uris or () if uri.startswith("file:")]
    return local_path(files[0], "the client's root") if len(files) == 1 else None


def choose(*, sandbox: str | None, client_root: str | None, explicit: str | None, cwd: str) -> Choice:
    """The project of one call (module docstring), or INVALID_ROOT when the host and ``--root`` disagree."""
    host, source = (sandbox, "sandbox") if sandbox is not None else (client_root, "mcp_root")
    if host is None:
        chosen = resolve_root(explicit, cwd=cwd)
        return Choice(chosen.root, "explicit" if explicit is not None else chosen.reason)
    project = resolve_root(cwd=host).root
    if explicit is not None:
        configured = os.path.realpath(resolve_root(explicit, cwd=cwd).root)
        if configured != os.path.realpath(project):
            raise _invalid(
                f"the host works in {project} ({'its sandbox cwd' if source == 'sandbox' else 'its only root'}) "
                f"but this server was started with --root {configured}; drop --root so the host decides, "
                "or point it at the host's project",
                host_root=project, configured_root=configured,
            )
    return Choice(project, source)
