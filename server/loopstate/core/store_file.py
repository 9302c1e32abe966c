"""The store file a team commits: one store and one project id for every clone on every machine.

``<work tree>/.loopstate/store.json`` names the project's store (``url``, read
by core/stores.py) and, written by ``loopstate init --store URL``, the
project's id:

    {"schema_version": 1, "project_id": "<64 hex digits>", "url": "postgresql://host/db"}

A project's id is otherwise a digest of its local path (core/paths.project_id_for),
so two clones would be two projects; with ``project_id`` every clone is the one
project, on any machine. ``url`` is ``jsonl:`` for a team that shares the
identity but keeps a local store per machine (``init --share-id``). It never
carries a password: that comes from the machine (libpq's ~/.pgpass or the file
PGPASSFILE names, or ``LOOPSTATE_STORE``, which is not committed), as may the
user name (PGUSER) when the URL leaves it out. A file that is present is refused whole when anything in it is
wrong, never read past: silently falling back to the path-derived id or the
local store would split the team's project in two again.

Reading it costs one failed ``open`` for a project that has none.
"""

from __future__ import annotations

import errno
import os
import re
import stat
from urllib.parse import parse_qsl, urlsplit

import msgspec

from loopstate_protocol.errors import ErrorCode

from loopstate.core.errors import LoopstateError
from loopstate.core.store_url import SECRET_PARAMETERS
from loopstate.core.store_url import redacted as redact

STORE_FILE = ".loopstate/store.json"  # core/stores.STORE_FILE: the same file
SCHEMA = 1
STORE_SCHEMES = ("postgresql", "postgres")
LOCAL = "jsonl:"  # each machine's own data dir
MAX_BYTES = 64 * 1024
_ID = re.compile(r"^[0-9a-f]{64}$")


class StoreFile(msgspec.Struct, forbid_unknown_fields=True):
    """What the committed store file holds (``project_id`` None: the path-derived id, as without the file)."""

    url: str
    schema_version: int = SCHEMA
    project_id: str | None = None


def file_path(root: str) -> str:
    return os.path.join(root, STORE_FILE)


def _refused(path: str, why: str, fix: str) -> LoopstateError:
    return LoopstateError(ErrorCode.INVALID_ROOT, f"the store file {path} {why}; {fix}", path=path, reason=why)


FIX = ("restore the committed version (`git checkout -- .loopstate/store.json`), or write it again with "
       "`loopstate init --store URL`")


def read_store_file(root: str) -> StoreFile | None:
    """The store file of the canonical root ``root``; None when it has none (the local store, the path's id)."""
    path = file_path(root)
    try:
        fd = os.open(path, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC)
    except (FileNotFoundError, NotADirectoryError):
        return None
    except OSError as exc:
        if exc.errno == errno.ELOOP:
            raise _refused(path, "is a symlink", "make it a plain file committed in the repository") from None
        raise _refused(path, f"cannot be read ({exc.strerror or exc})", "check its permissions") from None
    try:
        info = os.fstat(fd)
        if not stat.S_ISREG(info.st_mode):
            raise _refused(path, "is not a regular file", FIX)
        data = os.read(fd, MAX_BYTES + 1)
    finally:
        os.close(fd)
    if len(data) > MAX_BYTES:
        raise _refused(path, f"is larger than {MAX_BYTES} bytes", FIX)
    return parse_store_file(data, path)


def parse_store_file(data: bytes, path: str) -> StoreFile:
    try:
        found = msgspec.json.decode(data, type=StoreFile)
    except msgspec.ValidationError as exc:
        raise _refused(path, f"is not a loopstate store file ({exc})", FIX) from None
    except msgspec.DecodeError as exc:
        raise _refused(path, f"is not valid JSON ({exc})", FIX) from None
    if found.schema_version > SCHEMA:
        raise LoopstateError(ErrorCode.FUTURE_SCHEMA, f"the store file {path} has schema_version "
                             f"{found.schema_version}, newer than this loopstate reads ({SCHEMA}); upgrade loopstate",
                             path=path)
    if found.schema_version < SCHEMA:
        raise _refused(path, f"has schema_version {found.schema_version}, which no loopstate wrote", FIX)
    if found.project_id is not None and not _ID.match(found.project_id):
        raise _refused(path, f"has project_id {found.project_id!r}, not 64 lowercase hex digits", FIX)
    if found.url != LOCAL:
        check_store_url(found.url, committed=True, where=f"the store file {path}")
    return found


def check_store_url(url: str, *, committed: bool, where: str) -> str:
    """A store URL loopstate can open: ``postgresql://[host][:port]/database[?params]``.

    In the committed file (``committed``) it may carry no password (a user name is no secret: a team may
    share a role, or leave it to each machine's PGUSER); ``LOOPSTATE_STORE``, which stays on one machine, may.
    """
    try:
        parts = urlsplit(url)
        parts.port  # noqa: B018 (raises ValueError on a port that is not a number)
    except ValueError as exc:
        raise LoopstateError(ErrorCode.INVALID_PARAMS, f"{where}: the store URL {redact(url)!r} cannot be parsed "
                             f"({exc}); write it as postgresql://HOST[:PORT]/DATABASE") from None
    if parts.scheme not in STORE_SCHEMES:
        raise LoopstateError(ErrorCode.INVALID_PARAMS, f"{where}: the store URL {redact(url)!r} is not a PostgreSQL "
                             "URL; write it as postgresql://HOST[:PORT]/DATABASE (without a URL, the store is "
                             "the local data dir, jsonl:)", url=redact(url))
    if not parts.path.strip("/"):
        raise LoopstateError(ErrorCode.INVALID_PARAMS, f"{where}: the store URL {redact(url)!r} names no database; "
                             "write it as postgresql://HOST[:PORT]/DATABASE", url=redact(url))
    if committed:
        secrets = [name for name, _ in parse_qsl(parts.query) if name in SECRET_PARAMETERS]
        if parts.password is not None or secrets:
            raise LoopstateError(
                ErrorCode.INVALID_PARAMS,
                f"{where}: the store URL {redact(url)!r} carries a password, and this file is committed; leave "
                "it out and give it on each machine (in ~/.pgpass or the file PGPASSFILE names, which libpq "
                "reads; or the whole URL in LOOPSTATE_STORE, which is not committed)", url=redact(url))
    return url


def encode_store_file(found: StoreFile) -> bytes:
    return msgspec.json.format(msgspec.json.encode(found), indent=2) + b"\n"
