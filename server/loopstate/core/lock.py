"""Store locks: exclusive for mutations, shared for readers, bounded waits.

Built on portalocker (flock on POSIX). The OS releases a dead holder's lock, so
there is no stale-lock guesswork. An exclusive holder writes its pid, a random
token and the time into the lock file (a fixed-width record, blanked on
release), so a waiter that times out can name who holds it. Readers never
create a lock file: with no lock file there has never been a mutation to wait
for.
"""

from __future__ import annotations

import os
import secrets
import time
from pathlib import Path
from types import TracebackType
from typing import Any, Callable

from loopstate_protocol.errors import ErrorCode

from loopstate.core import canonical, safefs
from loopstate.core.clock import format_time, system_clock
from loopstate.core.errors import LoopstateError

DEFAULT_TIMEOUT = 10.0
RECORD_WIDTH = 128  # pid, a 32-hex token and an RFC 3339 time fit with room to spare
_BLANK = b" " * RECORD_WIDTH
_locker_cache: Any = None


def _locker() -> Any:
    """portalocker and the two flag sets we use, imported on the first lock taken.

    Importing portalocker costs tens of milliseconds (its version lookup goes
    through importlib.metadata); code that opens a project and never locks
    (no lock file yet, listing streams) should not pay it. The flags are
    combined once: enum arithmetic on every acquire showed up in append profiles.
    """
    global _locker_cache
    if _locker_cache is None:
        import portalocker

        flags = portalocker.LockFlags
        _locker_cache = (portalocker, flags.EXCLUSIVE | flags.NON_BLOCKING, flags.SHARED | flags.NON_BLOCKING)
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
            size = os.fstat(fd).st_size
            if self._kept is not None:
                self._kept.hold(fd)
        self._acquire(fd, exclusive=True)
        self.token = secrets.token_hex(16)
        record = canonical.encode({"pid": os.getpid(), "token": self.token, "acquired_at": format_time(system_clock())})
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
        if kept is None or kept.fd is None:
            return None, 0
        try:
            return kept.fd, safefs.recheck_descriptor(kept.fd, self._path_str).st_size
        except (LoopstateError, OSError):
            kept.close()
            return None, 0

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
        portalocker, exclusive_flags, shared_flags = _locker()
        flags = exclusive_flags if exclusive else shared_flags
        deadline = time.monotonic() + self.timeout
        pause = 0.0005
        try:
            while True:
                try:
                    portalocker.lock(fd, flags)
                    break
                except portalocker.exceptions.LockException:
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
