"""A run's projection files, kept equal to its log by writing only what an event changed.

``runs/<run_id>/run.json``, ``lease.json``, ``issues.json`` and
``evidence/<evidence_id>.json`` are what the runs contract keeps beside the
log. They are never read back as truth: after any crash the log decides, and
the next mutation of the run (the boundary, under the run stream's exclusive
lock) rewrites whatever is missing or stale. Each file is replaced atomically
(a private temp file renamed over it), so a reader sees the old bytes or the
new ones, never a mix.

What makes this cheap per event, where rewriting everything was most of a run
event's time (a read-back of every file, a rename over every file, a listing
of the whole evidence folder, the issue ledger sorted and encoded again):

* this process remembers, per run folder, the bytes it last wrote to each file
  and the file's identity right after (inode, size, ctime, mtime). A file
  whose identity is unchanged holds those bytes: one ``lstat`` instead of a
  read, and no write unless the log's bytes differ. Any other writer (a
  person, a tool, a restored backup) changes the identity (a rename gives a
  new inode, an in-place write a new ctime, which no user can set back), and
  then the file is read and compared as a cold process does. (The kernel's
  file times move in clock ticks of a few milliseconds: an in-place write of
  the same size within the tick of this process's own write goes unseen until
  the file next changes or a cold process compares it; the log is never
  affected);
* the issue ledger is encoded only when the fold's issue map is a new object
  (the fold builds a new map only on issue events), one issue at a time;
* a file this process wrote before is written into its spare, the file it was
  exchanged with last time (its previous bytes, under a temp name of this
  process), and exchanged in (``_patch_spare``): no file is created or removed,
  where a temp file made and an old one unlinked per file and event were most
  of what a heartbeat cost beyond its append on a fast disk (run.json and
  lease.json: a heartbeat 0.93-1.04 against 1.25-1.49 ms p50 at 10,000 events,
  `tests/bench/bench_run_events.py`); a
  big issues.json (``SPARE_FROM``) is patched there only from the first byte
  that differs, not written whole;
* evidence records never change: each is written once, when its event is
  folded; the folder is listed only when its identity (inode, mtime) differs
  from the one this process last saw, i.e. in a cold process or after
  someone else changed it;
* a grant's file (``write_grant``), which every run command bound to the
  grant passes, is one ``lstat`` while the fold holds the record this process
  last wrote or found there and the file's identity is the one it left;
* a cold process (a CLI call) reads and compares, as before, and first
  removes the temp files a killed writer left in the run's folders (under the
  run stream's exclusive lock, which every writer of these files holds).

Writes go to the page cache without fsync (as before): durability is the
log's, and a projection a power cut lost (or left empty) is rewritten at the
next boundary. A file that exists is replaced by exchanging it with the
finished temp file (``renameat2(RENAME_EXCHANGE)``, then the temp name, now
holding the old bytes, is removed): on ext4 a plain rename over an existing
file starts the new file's writeback inside the rename (its ``auto_da_alloc``
safeguard for programs that never fsync), which was most of a heartbeat's
time (two renames, 60-700 us each, against the log's one fsync); the
exchange is as atomic for readers and takes a few microseconds. Where the
call is missing (not Linux, an old C library, a file system without it) the
plain rename is used.
"""

from __future__ import annotations

import bisect
import errno
import os
import stat
import sys
import threading
from collections import OrderedDict
from pathlib import Path
from typing import Any, NamedTuple

from loopstate.core import canonical, safefs
from loopstate.core.clock import parse_time
from loopstate.core.project import Project
from loopstate.domains.runs.state import RECORD_FIELD, RunState

MUTABLE = ("run.json", "lease.json", "issues.json")
SPARE_FROM = 64 * 1024  # an issues.json at least this big is patched into its spare from the first change, not written whole
REMEMBERED_RUNS = 256  # run folders remembered per process (a sidecar may serve many runs)

Identity = tuple[int, int, int, int]


def _identity(info: os.stat_result) -> Identity:
    return (info.st_ino, info.st_size, info.st_ctime_ns, info.st_mtime_ns)


def _lstat(path: str) -> os.stat_result | None:
    try:
        return os.lstat(path)
    except FileNotFoundError:
        return None


_EXCHANGE = 2  # RENAME_EXCHANGE (linux/fs.h)
_renameat2: Any = None  # looked up on first use: ctypes is imported only by a process that replaces a projection


def _exchange(tmp: str, path: str) -> bool:
    """Swap the two names atomically; False where this system cannot (the caller renames instead)."""
    global _renameat2
    if _renameat2 is None:
        _renameat2 = False
        if sys.platform.startswith("linux"):
            import ctypes

            try:
                function = ctypes.CDLL(None, use_errno=True).renameat2
            except (AttributeError, OSError):
                pass
            else:
                function.argtypes = (ctypes.c_int, ctypes.c_char_p, ctypes.c_int, ctypes.c_char_p, ctypes.c_uint)
                function.restype = ctypes.c_int
                _renameat2 = function
    if _renameat2 is False:
        return False
    at_cwd = -100  # AT_FDCWD: both paths are absolute
    if _renameat2(at_cwd, os.fsencode(tmp), at_cwd, os.fsencode(path), _EXCHANGE) == 0:
        return True
    import ctypes

    error = ctypes.get_errno()
    if error in (errno.EINVAL, errno.ENOSYS, errno.EOPNOTSUPP, errno.ENOENT):
        return False  # no exchange here (or the target went away meanwhile): rename
    raise OSError(error, os.strerror(error), path)


def _replace(path: Path, base: Path, data: bytes, existing: os.stat_result | None) -> None:
    """``data`` at ``path`` atomically: a 0600 temp file, then exchanged with (or renamed to) ``path``.

    The target must be a safe regular file (never a link followed or replaced),
    as ``safefs.atomic_write`` refuses.
    """
    safefs.check_inside(path, base)
    if existing is not None and (not stat.S_ISREG(existing.st_mode) or existing.st_nlink != 1):
        safefs.atomic_write(path, base, data, durable=False)  # refuses it with the store's own message
        return
    tmp = os.fspath(safefs.temp_name(path))
    fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW | os.O_CLOEXEC, safefs.FILE_MODE)
    try:
        safefs.write_all(fd, data)
    except BaseException:
        os.close(fd)
        os.unlink(tmp)
        raise
    os.close(fd)
    if existing is not None and _exchange(tmp, os.fspath(path)):
        os.unlink(tmp)  # the old bytes (a crash before this leaves a temp file: removed by the next cold writer)
    else:
        os.replace(tmp, path)


def _drop(path: str) -> None:
    try:
        os.unlink(path)
    except FileNotFoundError:
        pass


def _patch_spare(project: Project, path: Path, data: bytes, current: bytes, info: os.stat_result,
                 spare: _Spare | None, same_until: int) -> tuple[bool, _Spare | None]:
    """Put ``data`` at ``path`` (a projection file this process last wrote, holding ``current``) by
    patching the spare file from byte ``same_until`` at most (0: all of it) where it first differs, and
    exchanging the two names. Returns whether ``data`` is at ``path`` now (False: the caller writes it
    whole) and the new spare (the old file, holding ``current``; None where there is none: no exchange
    here, or it changed). Without a spare yet, one is made (a temp file, as a whole write makes).

    An issue event changes one issue and the frame's tail (usually the end of the file), where the whole
    issues.json is ~0.4 MB at 1,200 issues: the patch writes a few hundred bytes into pages that are
    already allocated; run.json and lease.json are small and written whole into theirs. The spare is this
    process's own temp file (the store's temp mark: a cold writer removes it, as it removes a killed
    writer's temp files), trusted only while its identity is the one this process left; a kill during the
    patch leaves a torn spare and the file untouched, as a kill during a whole write leaves a torn temp
    file. Readers see the old bytes or the new, never a mix: the patched file reaches the name only
    through the atomic exchange.
    """
    if not stat.S_ISREG(info.st_mode) or info.st_nlink != 1:
        if spare is not None:
            _drop(spare.path)
        return False, None  # the whole write refuses it with the store's own message
    safefs.check_inside(path, project.dir)
    start = 0
    fd = -1
    if spare is not None:
        seen = _lstat(spare.path)
        if seen is not None and stat.S_ISREG(seen.st_mode) and seen.st_nlink == 1 and _identity(seen) == spare.identity:
            start = min(spare.same_until, same_until, len(data), len(spare.data))
            if not data.startswith(memoryview(spare.data)[:start]):  # a memcmp, no copy
                start = 0  # never trusted blindly: the prefix is compared (~25 us for 0.5 MB)
            try:
                fd = os.open(spare.path, os.O_WRONLY | os.O_NOFOLLOW | os.O_CLOEXEC)
            except OSError:
                fd = -1
            if fd >= 0 and _identity(os.fstat(fd)) != spare.identity:
                os.close(fd)
                fd = -1
        if fd < 0:
            _drop(spare.path)
    reused = fd >= 0 and spare is not None
    spare_path = spare.path if reused and spare is not None else os.fspath(safefs.temp_name(path))
    if not reused:
        start = 0
        fd = os.open(spare_path, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW | os.O_CLOEXEC, safefs.FILE_MODE)
    try:
        view, offset = memoryview(data)[start:], start
        while view:
            written = os.pwrite(fd, view, offset)
            view, offset = view[written:], offset + written
        if reused and spare is not None and len(data) < len(spare.data):
            os.ftruncate(fd, len(data))
    except BaseException:
        os.close(fd)
        _drop(spare_path)
        raise
    os.close(fd)
    if not _exchange(spare_path, os.fspath(path)):
        os.replace(spare_path, path)  # no exchange here: a plain rename, and no spare
        return True, None
    after = _lstat(spare_path)
    if after is None or not stat.S_ISREG(after.st_mode) or after.st_nlink != 1 or after.st_size != len(current):
        _drop(spare_path)
        return True, None
    return True, _Spare(spare_path, current, _identity(after), same_until)


class _IssueLedger:
    """issues.json's bytes, kept up to date from the fold's issue map by encoding only the issues that changed.

    The same bytes as ``canonical.encode(issue_ledger(state))`` (the domain's
    definition; a test holds the two equal): the issues in (created_at, issue_id)
    order, and the ledger's updated_at the latest of theirs (the run's creation
    time when there are none). Each issue's encoding is kept, so an issue event
    costs one issue's encode and a join, not a sort, a parse of every time and an
    encode of the whole ledger.
    """

    __slots__ = ("of", "sequence", "run_id", "created_at", "records", "order", "parts", "latest", "data", "same_until")

    def __init__(self) -> None:
        self._reset()

    def _reset(self) -> None:
        self.of: object = None  # the issue map ``data`` was built from (the fold makes a new one per issue event)
        self.sequence = -1  # the fold's sequence when ``of`` was seen
        self.run_id: str | None = None
        self.created_at: str | None = None
        self.records: dict[str, dict[str, Any]] = {}
        self.order: list[tuple[str, str]] = []  # (created_at, issue_id), sorted
        self.parts: list[bytes] = []  # each issue's encoding, in ``order``
        self.latest: tuple[Any, str, str] | None = None  # (time, its text, issue_id) of the latest updated_at
        self.data: bytes | None = None
        # How many leading bytes ``data`` shares with the bytes before it (0: nothing known): where a
        # patch of the previous bytes must start (the new issue and the frame's tail, usually).
        self.same_until = 0

    def _changed(self, state: RunState, run: dict[str, Any]) -> list[tuple[str, dict[str, Any]]]:
        """The issues whose record differs from the one encoded: from the last event when the fold moved
        by one event, else by comparing every record (a catch-up, a cold start)."""
        issues = state.issues
        if state.sequence == self.sequence + 1 and state.last is not None:
            record = state.last.get(RECORD_FIELD)
            if isinstance(record, dict) and issues.get(str(record.get("issue_id"))) is record:
                if len(issues) - len(self.records) == (record["issue_id"] not in self.records):
                    return [(record["issue_id"], record)]
        if (self.run_id, self.created_at) != (state.run_id, run["created_at"]) or any(
                issue_id not in issues for issue_id in self.records):
            self._reset()  # another run, or an issue gone: start over (never happens in one run's fold)
            self.run_id, self.created_at = state.run_id, run["created_at"]
        return [(issue_id, record) for issue_id, record in issues.items() if self.records.get(issue_id) is not record]

    def bytes_of(self, state: RunState) -> bytes:
        """issues.json's bytes for ``state`` (a run that exists)."""
        run = state.run
        assert run is not None
        issues = state.issues
        if issues is self.of and self.data is not None:
            self.sequence = state.sequence
            return self.data
        previous = self.data
        changed = self._changed(state, run)
        first = len(self.order) if previous is not None else 0  # the first part that moved or changed
        for issue_id, record in changed:
            before = self.records.get(issue_id)
            key = (record["created_at"], issue_id)
            if before is not None:
                at = bisect.bisect_left(self.order, (before["created_at"], issue_id))
                del self.order[at], self.parts[at]
                first = min(first, at)
            at = bisect.bisect_left(self.order, key)
            first = min(first, at)
            self.order.insert(at, key)
            self.parts.insert(at, canonical.encode(record))
            self.records[issue_id] = record
            if self.latest is not None and self.latest[2] == issue_id:
                moment = parse_time(record["updated_at"])
                if moment >= self.latest[0] and before is not None and before["created_at"] == record["created_at"]:
                    self.latest = (moment, record["updated_at"], issue_id)  # still the latest, still first among ties
                else:
                    self.latest = None  # it moved back: look at every issue again below
        if self.latest is None:
            changed = list(self.records.items())
        for issue_id, record in changed:
            moment = parse_time(record["updated_at"])
            if self.latest is None or moment > self.latest[0] or (moment == self.latest[0] and key_before(
                    (record["created_at"], issue_id), self.records[self.latest[2]], self.latest[2])):
                self.latest = (moment, record["updated_at"], issue_id)
        updated_at = run["created_at"] if self.latest is None else self.latest[1]
        frame = canonical.encode({"issues": [], "run_id": state.run_id, "schema_version": "1.0", "updated_at": updated_at})
        cut = frame.index(b'"issues":[]') + len(b'"issues":[')
        head, tail, parts = frame[:cut], frame[cut:], self.parts
        if len(parts) > 1:  # one copy of the ~0.4 MB at 1,000 issues, not a join and a join again
            self.data = b",".join([head + parts[0], *parts[1:-1], parts[-1] + tail])
        else:
            self.data = head + b"".join(parts) + tail
        # The bytes up to the end of the part before ``first`` (its comma is new when a part was appended).
        self.same_until = 0 if previous is None else cut + sum(map(len, self.parts[:first])) + max(first - 1, 0)
        self.of, self.sequence = issues, state.sequence
        return self.data


def key_before(key: tuple[str, str], holder: dict[str, Any], holder_id: str) -> bool:
    """Of two issues with the same latest time, the one first in the ledger's order names it (as ``max`` does)."""
    return key < (holder["created_at"], holder_id)


class _Spare(NamedTuple):
    """The file issues.json was exchanged out of place with: its path, its bytes, its identity, and how
    many leading bytes the bytes now at issues.json share with it (where its next patch starts at the latest)."""

    path: str
    data: bytes
    identity: Identity
    same_until: int


class _Folder:
    """What this process last wrote into one run's folder, and how to recognise it untouched."""

    __slots__ = ("files", "sources", "issues", "evidence_dir", "evidence", "spares")

    def __init__(self) -> None:
        self.files: dict[str, tuple[bytes | None, Identity | None]] = {}
        self.sources: dict[str, tuple[object, bytes | None]] = {}  # the record last encoded per file, and its bytes
        self.issues = _IssueLedger()
        self.evidence_dir: Identity | None = None  # the evidence folder's identity when last listed or written
        self.evidence: set[str] = set()
        self.spares: dict[str, _Spare] = {}  # each file's previous bytes, under a temp name of this process


    def drop_spare(self) -> None:
        """Remove the spare files (this process will not write into them again)."""
        spares, self.spares = self.spares, {}
        for spare in spares.values():
            _drop(spare.path)

    def encoded(self, name: str, record: dict[str, Any] | None) -> bytes | None:
        """``record``'s canonical bytes, encoded again only when the fold holds a new record (the boundary
        before a command sees the same fold the last append left)."""
        source = self.sources.get(name)
        if source is not None and source[0] is record:
            return source[1]
        data = None if record is None else canonical.encode(record)
        self.sources[name] = (record, data)
        return data


class _Grant(NamedTuple):
    """What this process last wrote (or found) at one grant's file: the record it encoded, the bytes,
    and the file's identity right after."""

    record: object
    data: bytes
    identity: Identity


class RunProjections:
    """The projection writer of one process (see the module docstring)."""

    def __init__(self) -> None:
        self._folders: OrderedDict[str, _Folder] = OrderedDict()
        self._grants: OrderedDict[str, _Grant] = OrderedDict()
        self._guard = threading.Lock()

    def forget(self) -> None:
        """Drop what this process remembers (the next write reads and compares like a cold process)."""
        with self._guard:
            for memo in self._folders.values():
                memo.drop_spare()
            self._folders.clear()
            self._grants.clear()

    def write_grant(self, project: Project, grant_id: str, grant: dict[str, Any]) -> bool:
        """Make ``grants/<grant_id>.json`` hold ``grant`` (the grant stream's latest fold); whether it was written.

        Every run command passes through here with its grant, which almost never changes: when the fold
        holds the very record this process last wrote or found there, and the file's identity is the one
        it left, that is one ``lstat``. Anything else (a new record, another writer, a cold process) reads
        and compares, and writes atomically only bytes that differ. Called under the grant stream's lock,
        shared by every run command bound to the grant: they all write the same bytes for the same fold.
        """
        path = project.dir / "grants" / f"{grant_id}.json"
        key = os.fspath(path)
        info = _lstat(key)
        with self._guard:
            known = self._grants.get(key)
        if known is not None and known.record is grant and info is not None and _identity(info) == known.identity:
            return False
        project.ensure()
        data = known.data if known is not None and known.record is grant else canonical.encode(grant)
        safefs.ensure_dir(path.parent, project.dir)
        written = info is None or safefs.read_file(path, project.dir) != data
        if written:
            safefs.atomic_write(path, project.dir, data, durable=False)
        after = _lstat(key)
        with self._guard:
            if after is not None and stat.S_ISREG(after.st_mode):
                self._grants[key] = _Grant(grant, data, _identity(after))
                self._grants.move_to_end(key)
                while len(self._grants) > REMEMBERED_RUNS:
                    self._grants.popitem(last=False)
            else:
                self._grants.pop(key, None)
        return written

    def _folder(self, project: Project, folder: Path) -> tuple[_Folder, bool]:
        key = os.fspath(folder)
        with self._guard:
            memo = self._folders.get(key)
            if memo is not None:
                self._folders.move_to_end(key)
                return memo, False
            memo = self._folders[key] = _Folder()
            while len(self._folders) > REMEMBERED_RUNS:
                self._folders.popitem(last=False)[1].drop_spare()
        return memo, True

    def write(self, project: Project, state: RunState) -> list[str]:
        """Make the run's projection files equal ``state`` (the log's latest fold); returns what was written.

        Called under the run stream's exclusive lock (before a decision and after an append).
        """
        if state.run is None:
            return []
        folder = project.dir / "runs" / state.run_id
        memo, cold = self._folder(project, folder)
        if cold:
            safefs.ensure_dir(folder, project.dir)
            safefs.remove_orphan_temps(folder)
            evidence = _lstat(os.fspath(folder / "evidence"))
            if evidence is not None and stat.S_ISDIR(evidence.st_mode):  # never through a link
                safefs.remove_orphan_temps(folder / "evidence")
        wanted = {
            "run.json": memo.encoded("run.json", state.run),
            "lease.json": memo.encoded("lease.json", state.lease),
            "issues.json": memo.issues.bytes_of(state),
        }
        written = []
        for name in MUTABLE:
            if self._put(project, folder, memo, name, wanted[name]):
                written.append(name)
        if state.evidence:
            written += self._evidence(project, folder, memo, state)
        return written

    def _put(self, project: Project, folder: Path, memo: _Folder, name: str, data: bytes | None) -> bool:
        path = folder / name
        info = _lstat(os.fspath(path))
        known = memo.files.get(name)
        if known is not None and (None if info is None else _identity(info)) == known[1]:
            current = known[0]  # untouched since this process wrote (or read) it
        elif info is None:
            current = None
        else:
            current = safefs.read_file(path, project.dir)  # someone else's file, or a cold process: compare
        if current == data:
            memo.files[name] = (data, None if info is None else _identity(info))
            return False
        memo.files.pop(name, None)  # until the write is done, this process knows nothing of the file
        spare = memo.spares.pop(name, None)
        if data is not None and current is not None and info is not None and known is not None \
                and current is known[0] and (name != "issues.json" or len(data) >= SPARE_FROM):
            same_until = memo.issues.same_until if name == "issues.json" else 0
            written, new_spare = _patch_spare(project, path, data, current, info, spare, same_until)
            if new_spare is not None:
                memo.spares[name] = new_spare
            if written:
                after = _lstat(os.fspath(path))
                if after is not None and stat.S_ISREG(after.st_mode):
                    memo.files[name] = (data, _identity(after))
                return True
        elif spare is not None:
            _drop(spare.path)
        if data is None:
            safefs.unlink_durably(path, project.dir)
            memo.files[name] = (None, None)
        else:
            _replace(path, project.dir, data, info)
            after = _lstat(os.fspath(path))
            if after is not None and stat.S_ISREG(after.st_mode):
                memo.files[name] = (data, _identity(after))
        return True

    def _evidence(self, project: Project, folder: Path, memo: _Folder, state: RunState) -> list[str]:
        """evidence/<evidence_id>.json for every recorded evidence record (immutable: written when missing)."""
        evidence_dir = folder / "evidence"
        info = _lstat(os.fspath(evidence_dir))
        if info is None or not stat.S_ISDIR(info.st_mode) or _identity(info) != memo.evidence_dir:
            safefs.ensure_dir(evidence_dir, project.dir)
            memo.evidence = {name for name in os.listdir(evidence_dir) if name.endswith(".json")}
            memo.evidence_dir = None
        # Untouched since this process last wrote it: every record up to then has its file, and the fold
        # keeps records in the order they were recorded, so only the newest ones can be missing.
        untouched = memo.evidence_dir is not None
        written = []
        for evidence_id, record in reversed(state.evidence.items()):
            name = f"{evidence_id}.json"
            if name in memo.evidence:
                if untouched:
                    break
                continue
            safefs.atomic_write(evidence_dir / name, project.dir, canonical.encode(record), durable=False)
            memo.evidence.add(name)
            written.append(f"evidence/{name}")
        if not written and untouched:
            return written
        after = _lstat(os.fspath(evidence_dir))
        memo.evidence_dir = None if after is None else _identity(after)
        return written


PROJECTIONS = RunProjections()
