"""The store lock's OS primitive on Windows: LockFileEx through portalocker, called like flock.

``core/lock.py`` speaks flock: ``flock(fd, LOCK_EX | LOCK_NB)``, a busy lock
raised as ``BlockingIOError``, ``LOCK_UN`` to let go while keeping the
descriptor. This module gives it that call on Windows, where portalocker
locks the file's first 64 KiB: an exclusive lock with ``msvcrt.locking``, a
shared one with ``LockFileEx`` (pywin32, portalocker's ``win32`` extra, a
Windows-only dependency of loopstate). As with flock, the OS releases a
dead process's locks, so there is no stale-lock guesswork.

Two differences from flock the caller allows for. A Windows lock cannot be
converted or taken twice through one descriptor, which ``core/lock.py``
never asks for (a lock is taken on a descriptor that holds none). And no
timer can interrupt a blocked wait there (no SIGALRM), so a busy lock is
waited for by polling (``BOUNDED_BLOCKING_WAIT`` False). Windows locks are
mandatory: while a writer holds the lock, another process cannot read its
owner record, and a waiter that times out names no holder.

Imported only on Windows (and by its tests, which run this same code on
Linux, where portalocker calls flock): POSIX starts never import portalocker.
"""

from __future__ import annotations

import errno
import os

import portalocker
from portalocker import LockFlags

# flock's values, so the caller's flags mean the same on both platforms.
LOCK_SH, LOCK_EX, LOCK_NB, LOCK_UN = 1, 2, 4, 8

BOUNDED_BLOCKING_WAIT = False
"""No timer can cut a blocked lock short here: waits poll (``flock_wait.wait_for_flock``)."""


def flock(fd: int, flags: int) -> None:
    """flock(2)'s contract on portalocker: lock, try to lock (``LOCK_NB``), or unlock ``fd``."""
    if flags & LOCK_UN:
        try:
            portalocker.unlock(fd)
        except portalocker.LockException as exc:
            raise _os_error(exc, "cannot unlock") from exc
        return
    if bool(flags & LOCK_EX) == bool(flags & LOCK_SH):
        raise ValueError(f"flock flags {flags:#x}: ask for exactly one of LOCK_EX and LOCK_SH")
    mode = LockFlags.EXCLUSIVE if flags & LOCK_EX else LockFlags.SHARED
    if flags & LOCK_NB:
        mode |= LockFlags.NON_BLOCKING
    try:
        portalocker.lock(fd, mode)
    except portalocker.AlreadyLocked as exc:
        raise BlockingIOError(errno.EWOULDBLOCK, "the lock is held by another process") from exc
    except portalocker.LockException as exc:
        raise _os_error(exc, "cannot lock") from exc


def pread(fd: int, length: int, offset: int) -> bytes:
    """``os.pread`` where Windows' Python has none: seek, then read (the descriptor is this holder's own)."""
    os.lseek(fd, offset, os.SEEK_SET)
    return os.read(fd, length)


def pwrite(fd: int, data: bytes, offset: int) -> int:
    """``os.pwrite`` where Windows' Python has none: seek, then write all of ``data``."""
    os.lseek(fd, offset, os.SEEK_SET)
    view, written = memoryview(data), 0
    while written < len(view):
        written += os.write(fd, view[written:])
    return written


def _os_error(exc: Exception, what: str) -> OSError:
    """The OSError under portalocker's exception (what the caller reports), or one that says it."""
    cause = exc.__cause__
    if isinstance(cause, OSError):
        return cause
    return OSError(errno.EIO, f"{what} the file: {exc}")


__all__ = ["BOUNDED_BLOCKING_WAIT", "LOCK_EX", "LOCK_NB", "LOCK_SH", "LOCK_UN", "flock", "pread", "pwrite"]
