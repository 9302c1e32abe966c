"""Store locks: exclusive for mutations, shared for readers, bounded waits.

Built on portalocker (flock on POSIX). The OS releases a dead holder's lock, so
there is no stale-lock guesswork. An exclusive holder writes its pid, a random
token and the time into the lock file (a fixed-width record, blanked on
release), so a waiter that times out can name who holds it. Readers never
create a lock file: with no lock file there has never been a mutation to wait
for.
"""

from __future__ import annotations

import datetime as _dt
import os
import time
from pathlib import Path
from types import TracebackType
from typing import Any, Callable

from loopstate_protocol.errors import ErrorCode

from loopstate.core import canonical, safefs
from loopstate.core.clock import format_time
from loopstate.core.errors import LoopstateError

DEFAULT_TIMEOUT = 10.0
RECORD_WIDTH = 128  # pid, a 32-hex token and an RFC 3339 time fit with room to spare
_BLANK = b" " * RECORD_WIDTH
_locker_cache: Any = None


def _locker() -> Any:
    """portalocker's flock locker, its lock error and our two flag sets, imported on
    the first lock taken.

    Importing portalocker costs tens of milliseconds (its version lookup goes
    through importlib.metadata); code that opens a project and never locks
    (no lock file yet, listing streams) should not pay it. ``FlockLocker`` is
    portalocker's flock(2) locker without the module-level flag validation
    (our two flag sets are fixed and valid, combined once here): that
    validation's enum arithmetic was half the cost of a lock and unlock in
    append profiles.
    """
    global _locker_cache
    if _locker_cache is None:
        import portalocker
        from portalocker.portalocker import FlockLocker

        flags = portalocker.LockFlags
        _locker_cache = (
            FlockLocker(), portalocker.exceptions.LockException,
            flags.EXCLUSIVE | flags.NON_BLOCKING, flags.SHARED | flags.NON_BLOCKING,
        )
    return _locker_cache


class StoreLock:
    """One lock file; use as a context manager via ``exclusive()`` or ``shared()``."""

    def __init__(self, path: Path, base: Path, *, timeout: float = DEFAULT_TIMEOUT, keep_open: bool = False) -> None:
        """With ``keep_open`` the exclusive lock's descriptor stays open after release
        (unlocked) and is re-checked, not re-opened, when the lock is taken again:
        what a Ledger that mutates one stream many times uses."""
        self.path = path
        self.base = base
        self.timeout = timeout
        self._fd: int | None = None
        self.token: str | None = None
        self._kept = safefs.HeldDescriptor() if keep_open else None
        self._path_str = os.fspath(path)
        # Called before the path is opened afresh (not when a kept descriptor still
        # checks out): a Ledger passes Project.ensure, which checks the project folder.
        self.before_open: Callable[[], None] | None = None

    def exclusive(self) -> "StoreLock":
        if self._fd is not None:
            raise RuntimeError(f"{self.path.name} is already held through this StoreLock")
        fd, size = self._kept_descriptor()
        if fd is None:
            if self.before_open is not None:
                self.before_open()
            fd = safefs.open_rw(self.path, self.base, create=True)
            if fd is None:  # the locks folder does not exist yet
                safefs.ensure_dir(self.path.parent, self.base)
                fd = safefs.open_rw(self.path, self.base, create=True)
            info = os.fstat(fd)
            size = info.st_size
            if self._kept is not None:
                self._kept.hold(fd, info)
        self._acquire(fd, exclusive=True)
        self.token = os.urandom(16).hex()
        record = canonical.encode({"pid": os.getpid(), "token": self.token, "acquired_at": _now_text()})
        # Fixed width, padded with JSON whitespace: the file keeps one size, so taking
        # and releasing the lock is one pwrite each and no truncation.
        os.pwrite(fd, record.ljust(RECORD_WIDTH), 0)
        if size > RECORD_WIDTH:  # written by an older layout
            os.ftruncate(fd, RECORD_WIDTH)
        return self

    def _kept_descriptor(self) -> tuple[int | None, int]:
        """The kept descriptor and its size, if it still passes every check a fresh open
        makes; otherwise it is closed and (None, 0) returned, and the caller opens the
        path again the safe way (which refuses a link or special file by name)."""
        kept = self._kept
        if kept is None:
            return None, 0
        info = kept.still_at(self._path_str)
        return (None, 0) if info is None else (kept.fd, info.st_size)

    def close(self) -> None:
        """Close a kept descriptor (the lock must not be held)."""
        if self._kept is not None and self._fd is None:
            self._kept.close()

    def shared(self) -> "StoreLock":
        fd = safefs.open_rw(self.path, self.base, create=False)
        if fd is not None:
            self._acquire(fd, exclusive=False)
        return self

    def _acquire(self, fd: int, *, exclusive: bool) -> None:
        """Lock ``fd`` (which this call then owns) or close it and raise."""
        locker, busy, exclusive_flags, shared_flags = _locker()
        flags = exclusive_flags if exclusive else shared_flags
        deadline = 0.0
        pause = 0.0005
        try:
            while True:
                try:
                    locker.lock(fd, flags)
                    break
                except busy:
                    if not deadline:  # the clock is read only when the lock is busy
                        deadline = time.monotonic() + self.timeout
                    if time.monotonic() >= deadline:
                        holder = _read_holder(fd)
                        raise LoopstateError(
                            ErrorCode.LOCK_TIMEOUT,
                            f"timed out after {self.timeout:g}s waiting for {self.path.name}: held by "
                            f"{holder['describe']}; wait for it to finish or stop that process",
                            lock=os.fspath(self.path),
                            holder=holder,
                        ) from None
                    time.sleep(pause)
                    pause = min(pause * 2, 0.02)
        except BaseException:
            if self._kept is not None and self._kept.fd == fd:
                self._kept.close()
            else:
                os.close(fd)
            raise
        self._fd = fd

    def release(self) -> None:
        """Closing the descriptor (or unlocking a kept one) releases the lock."""
        fd = self._fd
        if fd is not None:
            self._fd = None
            if self.token is not None:
                try:  # forget the owner record so a later waiter does not blame us
                    os.pwrite(fd, _BLANK, 0)
                except OSError:
                    pass
                self.token = None
            if self._kept is not None and self._kept.fd == fd:
                try:
                    _locker()[0].unlock(fd)
                except Exception:  # cannot unlock: closing the descriptor releases it for sure
                    self._kept.close()
            else:
                os.close(fd)

    def __enter__(self) -> "StoreLock":
        return self

    def __exit__(self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None) -> None:
        self.release()


_now_cache: tuple[int, str] = (-1, "")


def _now_text() -> str:
    """The owner record's time, to the second (RFC 3339, ``Z``), formatted once a second."""
    global _now_cache
    second = int(time.time())
    if _now_cache[0] != second:
        _now_cache = (second, format_time(_dt.datetime.fromtimestamp(second, _dt.timezone.utc)))
    return _now_cache[1]


def _read_holder(fd: int) -> dict:
    try:
        data = os.pread(fd, 4096, 0).strip()
        record = canonical.decode(data) if data else {}
    except Exception:
        record = {}
    if isinstance(record, dict) and "pid" in record:
        describe = f"pid {record['pid']} (token {str(record.get('token'))[:8]}..., since {record.get('acquired_at')})"
        return {**record, "describe": describe}
    return {"describe": "a reader or a process that has not recorded itself yet"}
