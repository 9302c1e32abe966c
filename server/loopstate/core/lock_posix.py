"""The store lock's OS primitive on POSIX: flock(2), straight from ``fcntl``.

``core/lock.py`` calls ``flock(fd, flags)`` with these flags whatever the
platform; this module is that call where the OS has it. It is what
portalocker's flock locker calls too, but portalocker itself is not
imported: importing it resolves its version through ``importlib.metadata``,
about 43 ms of a fresh process's wall, more than importing msgspec
(docs/benchmarks.md, CLI cold start), and a hook starts one process per
prompt, every read of which takes a shared lock. With ``LOCK_NB`` a busy lock
is ``BlockingIOError`` (EWOULDBLOCK); any other OSError is a failure that
waiting would not cure.
"""

from __future__ import annotations

from fcntl import LOCK_EX, LOCK_NB, LOCK_SH, LOCK_UN, flock
from os import pread, pwrite  # the owner record, read and written in place

BOUNDED_BLOCKING_WAIT = True
"""A blocked flock can be cut short by a SIGALRM timer (``flock_wait._blocking_wait``)."""

__all__ = ["BOUNDED_BLOCKING_WAIT", "LOCK_EX", "LOCK_NB", "LOCK_SH", "LOCK_UN", "flock", "pread", "pwrite"]
