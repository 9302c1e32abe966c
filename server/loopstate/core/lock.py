"""Store locks: exclusive for mutations, shared for readers, bounded waits.

Built on flock(2) (on Windows, the OS's byte-range locks through
portalocker: the primitive is behind a small seam, ``core/lock_posix.py`` or
``core/lock_windows.py``, chosen at import by platform). The OS releases a dead holder's lock, so
there is no stale-lock guesswork. An exclusive holder records its pid, a random
token (one per holder) and the time in the lock file (a fixed-width record that
stays after release, rewritten only when it changes), and a waiter that times
out names who holds it: from the kernel's lock table where there is one
(readers included), else from that record. Readers never create a lock file:
with no lock file there has never been a mutation to wait for.

Nor does a writer, until it appends: one that finds no lock file takes the
project's founding lock (``core/founding.py``) and makes the lock file, already
locked, only when it has something to write (``publish``), so a refused
command leaves no store behind.

A reader opens the lock file read-only (a shared flock needs no more). One
that cannot open it at all (a store restored read-only or owned by another
user, whose folder it may not enter) reads without the lock: every record it
folds is verified by the chain, and a torn tail from a writer it could not wait
for is treated as it is after a crash, left out and never repaired by a read.
It says so on stderr once per process (``unlocked_read``).
"""

from __future__ import annotations

import datetime as _dt
import os
import time
from pathlib import Path
from types import TracebackType
from typing import TYPE_CHECKING, Callable

from loopstate.core import canonical, flock_wait, safefs
from loopstate.core.clock import format_time
from loopstate.core.flock_wait import DEFAULT_TIMEOUT as DEFAULT_TIMEOUT
from loopstate.core.flock_wait import EXCLUSIVE, wait_for_flock

if TYPE_CHECKING:
    from loopstate.core.founding import FoundingLock


RECORD_WIDTH = 128  # pid, a 32-hex token and an RFC 3339 time fit with room to spare


_unlocked_said = False


def unlocked_read(path: Path, why: str) -> None:
    """Say once per process, on stderr, that reads go without their lock, and why."""
    global _unlocked_said
    if not _unlocked_said:
        _unlocked_said = True
        import sys

        sys.stderr.write(f"loopstate: note: reading without the store lock ({path}: {why}); every record read is "
                         "still verified by the hash chain, but an append another process makes meanwhile may be "
                         "left out\n")


class StoreLock:
    """One lock file; use as a context manager via ``exclusive()`` or ``shared()``."""

    def __init__(self, path: Path, base: Path, *, timeout: float = DEFAULT_TIMEOUT, keep_open: bool = False,
                 founding: str | None = None) -> None:
        """With ``keep_open`` the exclusive lock's descriptor stays open after release
        (unlocked) and is re-checked, not re-opened, when the lock is taken again:
        what a Ledger that mutates one stream many times uses.

        With ``founding`` (the canonical project root, whose founding lock is taken: see
        ``core/founding.py``) an exclusive holder that finds no lock file makes none until
        ``publish``; without it the file is made at once."""
        self.path = path
        self.base = base
        self.timeout = timeout
        self._fd: int | None = None
        self._record: tuple[int, int, bytes] = (0, -1, b"")  # (pid, second, padded record)
        self._token = ""
        self._kept = safefs.HeldDescriptor() if keep_open else None
        self._path_str = os.fspath(path)
        # Called before the path is opened afresh (not when a kept descriptor still
        # checks out): Project.check_existing, which checks the project folder if there is one.
        self.before_open: Callable[[], None] | None = None
        # Called before the lock file is made: Project.ensure, which makes the project folder.
        self.before_create: Callable[[], None] | None = None
        self.founding_root = founding
        self._founding: FoundingLock | None = None  # held while founding: the lock file not made yet

    def exclusive(self, *, defer_create: bool = False) -> "StoreLock":
        """Take the exclusive lock. With ``defer_create`` and no lock file yet, hold the
        project's founding lock instead and make nothing: the caller calls ``publish``
        before its first write (a Ledger's mutation, which may be refused)."""
        if self._fd is not None or self._founding is not None:
            raise RuntimeError(f"{self.path.name} is already held through this StoreLock")
        try:
            return self._exclusive(defer_create)
        except OSError as exc:
            if exc.errno in safefs.WRITE_REFUSED:
                raise safefs.write_refused(exc, self.path) from None
            raise

    def _exclusive(self, defer_create: bool) -> "StoreLock":
        fd, size = self._kept_descriptor()
        if fd is None:
            if self.before_open is not None:
                self.before_open()
            fd = safefs.open_rw(self.path, self.base, create=False)
            if fd is None:
                if self.founding_root is not None:
                    return self._found(defer_create)
                if self.before_create is not None:
                    self.before_create()
                safefs.ensure_dir(self.path.parent, self.base)
                fd = safefs.open_rw(self.path, self.base, create=True)
                assert fd is not None
            info = os.fstat(fd)
            size = info.st_size
            if self._kept is not None:
                self._kept.hold(fd, info)
        self._acquire(fd, exclusive=True)
        self._write_record(fd, size)
        return self

    def _found(self, defer_create: bool) -> "StoreLock":
        """No lock file: take the founding lock, and look again (a first writer that held
        it before us has made the file); still none, hold the founding lock."""
        from loopstate.core.founding import founding_lock  # only a first writer needs it

        assert self.founding_root is not None  # only called with a founding root (``_exclusive``)
        founding = founding_lock(self.founding_root)
        founding.acquire(self.path.name, self.timeout)
        try:
            fd = safefs.open_rw(self.path, self.base, create=False)
        except BaseException:
            founding.release(self.path.name)
            raise
        if fd is not None:
            founding.release(self.path.name)
            info = os.fstat(fd)
            if self._kept is not None:
                self._kept.hold(fd, info)
            self._acquire(fd, exclusive=True)
            self._write_record(fd, info.st_size)
            return self
        self._founding = founding
        if not defer_create:
            try:
                self.publish()
            except BaseException:
                self.release()
                raise
        return self

    @property
    def founded(self) -> bool:
        """Whether this holder holds the founding lock and has made no lock file yet."""
        return self._founding is not None

    def publish(self) -> None:
        """Make the lock file of a store this holder is founding, already locked and
        carrying its owner record when its name appears (made under a temporary name
        and renamed into place), then let go of the founding lock: from here on the
        lock file excludes the other writers. A no-op when the lock is held the usual way."""
        founding = self._founding
        if founding is None:
            return

        def lock_and_record(fd: int) -> None:
            flock_wait.primitive.flock(fd, EXCLUSIVE)  # a file nobody else can open yet: never busy
            flock_wait.primitive.pwrite(fd, self._owner_record(), 0)

        try:
            if self.before_create is not None:
                self.before_create()
            safefs.ensure_dir(self.path.parent, self.base)
            fd = safefs.create_published(self.path, self.base, lock_and_record)
        except OSError as exc:
            if exc.errno in safefs.WRITE_REFUSED:
                raise safefs.write_refused(exc, self.path) from None
            raise
        if self._kept is not None:
            self._kept.hold(fd, os.fstat(fd))
        self._fd = fd
        self._founding = None
        founding.release(self.path.name)

    def _write_record(self, fd: int, size: int) -> None:
        # Fixed width, padded with JSON whitespace: the file keeps one size. The record
        # stays after release (it names the last exclusive holder) and is written only
        # when it is not already ours for this second: a read costs the journal nothing,
        # while each write would put the lock file's inode into the next fsync's commit.
        # A failed record write (a full disk) lets go of the lock it took.
        try:
            record = self._owner_record()
            if flock_wait.primitive.pread(fd, RECORD_WIDTH + 1, 0) != record:
                flock_wait.primitive.pwrite(fd, record, 0)
                if size > RECORD_WIDTH:  # written by an older layout
                    os.ftruncate(fd, RECORD_WIDTH)
        except BaseException:
            self.release()
            raise

    def _owner_record(self) -> bytes:
        """pid, a random token and the time to the second, padded to RECORD_WIDTH.

        The token is drawn once per holder (this StoreLock in this process, drawn
        again after a fork), so it tells apart two processes that had the same pid;
        the record is encoded again only when the second or the pid changes, not
        on every acquisition of a lock taken thousands of times a second.
        """
        pid, second = os.getpid(), int(time.time())
        cached_pid, cached_second, record = self._record
        if (pid, second) != (cached_pid, cached_second):
            if pid != cached_pid:
                self._token = os.urandom(16).hex()
            moment = format_time(_dt.datetime.fromtimestamp(second, _dt.timezone.utc))
            record = canonical.encode({"pid": pid, "token": self._token, "acquired_at": moment}).ljust(RECORD_WIDTH)
            self._record = (pid, second, record)
        return record

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
        """Take the shared lock; none when there is no lock file (never a mutation to wait
        for) or when this process cannot open it (then once on stderr: ``unlocked_read``)."""
        try:
            fd = safefs.open_read(self.path, self.base)
        except PermissionError as exc:
            unlocked_read(self.path, exc.strerror or "permission denied")
            return self
        if fd is not None:
            self._acquire(fd, exclusive=False)
        return self

    def _acquire(self, fd: int, *, exclusive: bool) -> None:
        """Lock ``fd`` (which this call then owns) or close it and raise."""
        try:
            wait_for_flock(fd, exclusive=exclusive, timeout=self.timeout, what=self.path.name, path=self._path_str)
        except BaseException:
            if self._kept is not None and self._kept.fd == fd:
                self._kept.close()
            else:
                os.close(fd)
            raise
        self._fd = fd

    def release(self) -> None:
        """Closing the descriptor (or unlocking a kept one) releases the lock."""
        founding = self._founding
        if founding is not None:
            self._founding = None
            founding.release(self.path.name)
        fd = self._fd
        if fd is not None:
            self._fd = None
            if self._kept is not None and self._kept.fd == fd:
                try:
                    flock_wait.primitive.flock(fd, flock_wait.primitive.LOCK_UN)
                except Exception:  # cannot unlock: closing the descriptor releases it for sure
                    self._kept.close()
            else:
                os.close(fd)

    def __enter__(self) -> "StoreLock":
        return self

    def __exit__(self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None) -> None:
        self.release()
