"""Who creates a stream's lock file: the first writer, excluded by a lock on the project root.

A stream's lock file excludes its writers, so it has to exist before a writer
decides anything; yet a command that is refused (an unknown task, a run that
does not exist) must leave the data dir as it found it: no project folder, no
``project.json``, no lock file. A store that exists only because a refusal
made it would also turn the folder it was refused in into a loopstate project
for discovery (``core/discovery.py``).

So a writer that finds no lock file takes this lock instead: an exclusive
flock on the project root folder itself, which exists already (the root must
be an existing folder) and which the lock leaves untouched. Holding it, the
writer looks for the lock file again (another first writer may have made it
meanwhile); if there is still none, it decides with only this lock, and the
store is made at its first append (``StoreLock.publish``), the lock file
already locked when its name appears. Every process that finds no lock file
comes here first, so two first writers take turns and the second finds the
first's store.

One lock per root per process, re-entrant for another stream: a first command
may found a second stream on its way (a run's create records its default grant
first), and a second flock on a new descriptor of the same folder would wait
for the first. The same stream twice is refused (LOCK_TIMEOUT), as its lock
file would refuse it once made: the holder is this very thread.
"""

from __future__ import annotations

import os
import threading

from loopstate_protocol.errors import ErrorCode

from loopstate.core.errors import LoopstateError
from loopstate.core.flock_wait import DEFAULT_TIMEOUT, wait_for_flock

_OPEN_FLAGS = os.O_RDONLY | os.O_DIRECTORY | os.O_CLOEXEC


class FoundingLock:
    """The exclusive flock on one project root, shared by this process's threads through an RLock."""

    def __init__(self, root: str) -> None:
        self.root = root
        self._thread_lock = threading.RLock()
        self._depth = 0
        self._fd: int | None = None
        self._streams: set[str] = set()  # the streams being founded under this lock

    def acquire(self, stream: str, timeout: float = DEFAULT_TIMEOUT) -> None:
        if not self._thread_lock.acquire(timeout=timeout):
            raise LoopstateError(
                ErrorCode.LOCK_TIMEOUT,
                f"timed out after {timeout:g}s waiting for another thread of this process to finish creating "
                f"the store of {self.root}",
                root=self.root,
            )
        try:
            if stream in self._streams:
                raise LoopstateError(
                    ErrorCode.LOCK_TIMEOUT,
                    f"stream {stream!r} of {self.root} is being created by this same thread, which would wait "
                    "for itself; take one stream's lock once at a time",
                    root=self.root, stream=stream,
                )
            if self._depth == 0:
                try:
                    fd = os.open(self.root, _OPEN_FLAGS)
                except OSError as exc:
                    raise LoopstateError(
                        ErrorCode.STORE_IO_ERROR,
                        f"cannot open the project root {self.root} to create its store: {exc.strerror}; "
                        "run loopstate as a user who can read that folder",
                        root=self.root,
                    ) from None
                try:
                    wait_for_flock(fd, exclusive=True, timeout=timeout, what=f"the project root {self.root}")
                except BaseException:
                    os.close(fd)
                    raise
                self._fd = fd
            self._depth += 1
            self._streams.add(stream)
        except BaseException:
            self._thread_lock.release()
            raise

    def release(self, stream: str) -> None:
        self._streams.discard(stream)
        self._depth -= 1
        if self._depth == 0 and self._fd is not None:
            fd, self._fd = self._fd, None
            os.close(fd)  # closing the descriptor releases the flock
        self._thread_lock.release()


_registry_lock = threading.Lock()
_by_root: dict[str, FoundingLock] = {}


def founding_lock(root: str) -> FoundingLock:
    """This process's founding lock for the canonical project ``root``."""
    with _registry_lock:
        lock = _by_root.get(root)
        if lock is None:
            lock = _by_root[root] = FoundingLock(root)
        return lock
