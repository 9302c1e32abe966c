"""The store lock's OS primitive on POSIX: flock(2), straight from ``fcntl``.

``core/lock.py`` calls ``flock(fd, flags)`` with these flags whatever the
platform; this module is that call where the OS has it. It is what
portalocker's flock locker calls too, but portalocker itself is not
imported: importing it resolves its version through ``importlib.metadata``,
about 43 ms of a fresh process's wall, more than importing msgspec
(docs/benchmarks.md, CLI cold start), and a hook starts one process per
prompt, every read of which takes a shared lock. With ``LOCK_NB`` a busy lock
is ``BlockingIOError`` (EWOULDBLOCK); any other OSError is a failure that
waiting would not cure. Where the kernel has open-file-description byte-range
locks (Linux), it also has the three calls the waiters' queue is made of
(``byte_lock``, ``byte_unlock``, ``bytes_held``: ``core/flock_wait.py``).
"""

from __future__ import annotations

import errno
import struct
import sys
from fcntl import LOCK_EX, LOCK_NB, LOCK_SH, LOCK_UN, fcntl, flock
from os import pread, pwrite  # the owner record, read and written in place

BOUNDED_BLOCKING_WAIT = True
"""A blocked flock can be cut short by a SIGALRM timer (``flock_wait._blocking_wait``)."""

# The waiters' queue in front of the flock (``flock_wait``) is made of open-file-description
# byte-range locks: Linux's F_OFD_SETLK/F_OFD_SETLKW, owned by the open file (as a flock is),
# released by the kernel when it is closed (a killed process's included), and independent of
# flock on a local file system. The ``struct flock`` is packed as 64-bit Linux lays it out.
_FLOCK = struct.Struct("@hhqqi4x")
OFD_QUEUE = sys.platform.startswith("linux") and _FLOCK.size == 32
"""Whether this platform has the waiters' queue (else a busy lock is a plain blocking flock)."""

if OFD_QUEUE:
    from fcntl import F_OFD_GETLK, F_OFD_SETLK, F_OFD_SETLKW, F_UNLCK, F_WRLCK

    def byte_lock(fd: int, start: int, *, wait: bool) -> bool:
        """Lock byte ``start`` of ``fd``'s file exclusively. ``wait``: block until granted
        (a signal handler that raises cuts it short); else False when another holds it."""
        try:
            fcntl(fd, F_OFD_SETLKW if wait else F_OFD_SETLK, _FLOCK.pack(F_WRLCK, 0, start, 1, 0))
        except OSError as exc:
            if not wait and exc.errno in (errno.EAGAIN, errno.EACCES):
                return False
            raise
        return True

    def byte_unlock(fd: int, start: int) -> None:
        """Let go of byte ``start`` (nothing happens if this open file does not hold it)."""
        fcntl(fd, F_OFD_SETLK, _FLOCK.pack(F_UNLCK, 0, start, 1, 0))

    def bytes_held(fd: int, start: int, length: int) -> bool:
        """Whether another open file holds a lock on any byte of ``[start, start + length)``."""
        kind = _FLOCK.unpack(fcntl(fd, F_OFD_GETLK, _FLOCK.pack(F_WRLCK, 0, start, length, 0)))[0]
        return bool(kind != F_UNLCK)

__all__ = ["BOUNDED_BLOCKING_WAIT", "LOCK_EX", "LOCK_NB", "LOCK_SH", "LOCK_UN", "OFD_QUEUE", "flock", "pread", "pwrite"]
