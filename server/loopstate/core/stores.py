"""Which store holds a project's streams: the store URL, and the store made from it.

The URL comes from ``LOOPSTATE_STORE`` when it is set (and not empty), else from
the project's store file, ``<root>/.loopstate/store.json`` (``{"url": ...}``, a
file a team commits so every clone and machine uses one store), else there is
none: the local JSONL store below the data dir, as loopstate has always kept
it. A URL's scheme names the store's module in ``SCHEMES``; the module is
imported only when a URL names it, so the default path never loads another
store's client library, and a module that is missing (its extra not installed)
is a clear error naming the URL.

Each scheme's module provides ``open_store(url: str, project: Project) -> Store``
(``core/backend.py``). ``open_store`` here caches one store per project object,
so every stream of a project shares its store's connections.
"""

from __future__ import annotations

import importlib
import os
import threading
import weakref
from typing import TYPE_CHECKING, Callable

import msgspec

from loopstate_protocol.errors import ErrorCode

from loopstate.core.errors import LoopstateError
from loopstate.core.store_url import redacted as redacted

if TYPE_CHECKING:
    from loopstate.core.backend import Store
    from loopstate.core.project import Project

STORE_ENV = "LOOPSTATE_STORE"
STORE_FILE = ".loopstate/store.json"
JSONL = "jsonl"

# scheme -> "module:function" of its opener. "jsonl" is the local store (also spelled
# "file"; a URL without a scheme is refused, so a typo never falls back silently).
SCHEMES: dict[str, str] = {
    JSONL: "loopstate.core.jsonl_store:open_store",
    "file": "loopstate.core.jsonl_store:open_store",
    "postgresql": "loopstate.core.postgres:open_store",
    "postgres": "loopstate.core.postgres:open_store",
}

Opener = Callable[[str, "Project"], "Store"]
_opened: "weakref.WeakKeyDictionary[Project, Store]" = weakref.WeakKeyDictionary()
_opening = threading.Lock()


def register_scheme(scheme: str, target: str) -> None:
    """Map ``scheme`` to ``"module:function"``, an opener (a plug-in store, or a test's)."""
    if ":" not in target:
        raise ValueError(f"a store opener is named 'module:function', not {target!r}")
    SCHEMES[scheme.lower()] = target


def configured_url(root: str, environ: "os._Environ[str] | dict[str, str] | None" = None) -> str | None:
    """The store URL for project ``root``: ``LOOPSTATE_STORE``, else its store file's ``url``, else None.

    A store file that cannot be read or is not ``{"url": "..."}`` is refused with what to fix:
    guessing the local store instead would split a team's history across two stores."""
    env = os.environ if environ is None else environ
    url = env.get(STORE_ENV, "").strip()
    if url:
        return url
    path = os.path.join(root, STORE_FILE)
    try:
        raw = _read_small(path)
    except FileNotFoundError:
        return None
    except OSError as exc:
        raise LoopstateError(
            ErrorCode.STORE_IO_ERROR, f"cannot read the store file {path}: {exc.strerror or exc}", path=path,
        ) from None
    try:
        data = msgspec.json.decode(raw)
    except msgspec.DecodeError as exc:
        raise LoopstateError(
            ErrorCode.INVALID_PARAMS, f"the store file {path} is not valid JSON ({exc}); it should hold "
            '{"url": "postgresql://..."}, or be removed to use the local store', path=path,
        ) from None
    found = data.get("url") if isinstance(data, dict) else None
    if not isinstance(found, str) or not found.strip():
        raise LoopstateError(
            ErrorCode.INVALID_PARAMS, f'the store file {path} has no "url" string; it should hold '
            '{"url": "postgresql://..."}, or be removed to use the local store', path=path,
        )
    return found.strip()


def _read_small(path: str, limit: int = 1 << 16) -> bytes:
    with open(path, "rb") as handle:
        data = handle.read(limit + 1)
    if len(data) > limit:
        raise OSError(0, f"larger than {limit} bytes")
    return data


def opener_for(url: str) -> Opener:
    """The opener of ``url``'s scheme, its module imported now."""
    scheme = url.split(":", 1)[0].lower() if ":" in url else ""
    target = SCHEMES.get(scheme)
    if target is None:
        raise LoopstateError(
            ErrorCode.INVALID_PARAMS,
            f"store URL {redacted(url)!r} has no known scheme; use one of "
            + ", ".join(f"{name}:" for name in sorted(SCHEMES)) + f" (or unset {STORE_ENV} for the local store)",
            url=redacted(url),
        )
    module_name, function = target.split(":", 1)
    try:
        module = importlib.import_module(module_name)
    except ImportError as exc:
        raise LoopstateError(
            ErrorCode.STORE_IO_ERROR,
            f"the store for {redacted(url)!r} needs {module_name}, which cannot be imported ({exc}); "
            "install the extra that provides it (pip install 'loopstate[postgres]' for PostgreSQL)",
            url=redacted(url),
        ) from None
    opener: Opener = getattr(module, function)
    return opener


def count_streams(url: str, project: Project) -> int:
    """How many streams of ``project`` the store at ``url`` holds, asked through a store of its own (closed
    after): the cheapest question every store answers, so whether it answers at all (a LoopstateError
    naming the URL, without its password, when it does not)."""
    store = opener_for(url)(url, project)
    try:
        return len(store.stream_names())
    finally:
        store.close()


def open_store(project: Project, url: str | None = None) -> Store:
    """The store of ``project``: at ``url`` if given, else the configured one (``configured_url``),
    else the local JSONL store. One per project object, made on first use."""
    with _opening:
        store = _opened.get(project)
        if store is not None and (url is None or store.url == redacted(url)):
            return store
        chosen = url if url is not None else configured_url(project.root)
        store = opener_for(chosen if chosen is not None else f"{JSONL}:")(chosen or f"{JSONL}:", project)
        _opened[project] = store
        return store


def close_opened() -> None:
    """Close every store ``open_store`` has made that is still in use, and forget them: for a
    process (a test session's fixtures among them) that is done with all of its projects, so
    a shared store's connections end now rather than when the objects are collected."""
    with _opening:
        opened = list(_opened.values())
        _opened.clear()
    for store in opened:
        store.close()
