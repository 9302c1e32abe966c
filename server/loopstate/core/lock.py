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
import sys
import time
from pathlib import Path
from types import TracebackType
from typing import TYPE_CHECKING, Any, Callable

from loopstate_protocol.errors import ErrorCode

from loopstate.core import canonical, safefs
from loopstate.core.clock import format_time
from loopstate.core.errors import LoopstateError

if TYPE_CHECKING:
    from loopstate.core.founding import FoundingLock


DEFAULT_TIMEOUT = 10.0
RECORD_WIDTH = 128  # pid, a 32-hex token and an RFC 3339 time fit with room to spare


# The OS primitive with flock's contract (a busy ``LOCK_NB`` lock is BlockingIOError;
# any other OSError is a failure that waiting would not cure). POSIX imports only
# ``fcntl`` for it; portalocker is imported on Windows alone (``core/lock_windows.py``).
if sys.platform == "win32":
    from loopstate.core import lock_windows as _os_lock
else:
    from loopstate.core import lock_posix as _os_lock

_EXCLUSIVE = _os_lock.LOCK_EX | _os_lock.LOCK_NB
_SHARED = _os_lock.LOCK_SH | _os_lock.LOCK_NB
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


class _Expired(Exception):
    """Raised by the SIGALRM handler of a bounded blocking wait."""


def _on_alarm(signum: int, frame: object) -> None:
    raise _Expired


def _blocking_wait(fd: int, flags: int, seconds: float) -> bool | None:
    """A blocking flock bounded by ``seconds``: True locked, False timed out, None not possible here.

    The kernel wakes a blocked flock the moment its holder lets go, where a
    poll with sleeps comes back late and loses to any newcomer: with 16 CLI
    writers at once, sleeping pollers starved past the timeout. On the main
    thread the bound is a one-shot SIGALRM timer (when nothing else has the
    timer or a handler of its own); if the timer fires just after the lock was
    granted, a non-blocking retry on the same descriptor says so. Elsewhere (a
    server's service thread) the blocking flock runs in a helper thread and the
    caller waits for it with the timeout (``_waited_in_helper``).
    """
    import threading  # only on contention: an uncontended lock costs no import

    if not _os_lock.BOUNDED_BLOCKING_WAIT:
        return None
    if threading.current_thread() is not threading.main_thread():
        return _waited_in_helper(fd, flags, seconds)
    import signal

    try:
        previous = signal.getsignal(signal.SIGALRM)
        if previous not in (signal.SIG_DFL, signal.SIG_IGN, None) or signal.getitimer(signal.ITIMER_REAL)[0] > 0:
            return _waited_in_helper(fd, flags, seconds)
    except (ValueError, OSError):
        return _waited_in_helper(fd, flags, seconds)
    try:
        try:
            signal.signal(signal.SIGALRM, _on_alarm)
            signal.setitimer(signal.ITIMER_REAL, max(seconds, 0.001))
            _os_lock.flock(fd, flags & ~_os_lock.LOCK_NB)
            return True
        finally:
            signal.setitimer(signal.ITIMER_REAL, 0)
            signal.signal(signal.SIGALRM, previous)
    except _Expired:
        try:
            _os_lock.flock(fd, flags)  # granted in the instant the timer fired? (same descriptor: no-op if held)
            return True
        except BlockingIOError:
            return False


class _HelperWait:
    """One blocking flock run in a helper thread, and the caller's verdict on it (under ``decided``)."""

    __slots__ = ("decided", "done", "granted", "abandoned", "error")

    def __init__(self) -> None:
        import threading

        self.decided = threading.Lock()
        self.done = threading.Event()
        self.granted = False
        self.abandoned = False
        self.error: OSError | None = None

    def run(self, fd: int, flags: int) -> None:
        """Block on ``fd`` (a duplicate this thread owns: the same open file, so the same lock)."""
        try:
            _os_lock.flock(fd, flags & ~_os_lock.LOCK_NB)
        except OSError as exc:
            self.error = exc
            os.close(fd)
            self.done.set()
            return
        with self.decided:
            if self.abandoned:  # the caller timed out meanwhile: let go of what it no longer waits for
                _os_lock.flock(fd, _os_lock.LOCK_UN)
            else:
                self.granted = True
        os.close(fd)  # the lock stays with the open file, which the caller's descriptor still holds
        self.done.set()


def _waited_in_helper(fd: int, flags: int, seconds: float) -> bool:
    """A blocking flock in a helper thread, waited for by the calling thread for at most ``seconds``.

    The helper blocks on a duplicate of ``fd``: a flock belongs to the open
    file, so the lock it is granted is the caller's. Should the wait time out
    first, the caller marks it abandoned and the helper, once granted, unlocks
    through its own duplicate (never through a descriptor number the caller
    may have closed and reused) and closes it. Raises the OSError of a lock
    the file system refuses.
    """
    import threading

    wait = _HelperWait()
    helper_fd = os.dup(fd)
    try:
        threading.Thread(target=wait.run, args=(helper_fd, flags), name="loopstate-lock-wait", daemon=True).start()
    except BaseException:
        os.close(helper_fd)
        raise
    wait.done.wait(max(seconds, 0.0))
    with wait.decided:
        if not wait.granted and wait.error is None:
            wait.abandoned = True
            return False
    if wait.error is not None:
        raise wait.error
    return True


def wait_for_flock(fd: int, *, exclusive: bool, timeout: float, what: str, path: str | None = None) -> None:
    """flock ``fd`` within ``timeout`` seconds, or raise: LOCK_TIMEOUT naming the holder,
    STORE_IO_ERROR when the file system refuses the lock (waiting would not help).

    A busy lock is waited for in the kernel's queue where the process can bound
    that wait (``_blocking_wait``), else by polling with short sleeps."""
    flags = _EXCLUSIVE if exclusive else _SHARED
    deadline = 0.0
    pause = 0.0005
    detail = {} if path is None else {"lock": path}
    blocked = False  # the blocking wait has been tried (it is tried once, for the whole timeout)
    while True:
        try:
            _os_lock.flock(fd, flags)
            return
        except BlockingIOError:
            pass
        except OSError as exc:  # not contention: waiting would not help
            raise LoopstateError(
                ErrorCode.STORE_IO_ERROR,
                f"cannot lock {what}: {exc}; keep the store on a local "
                "file system that supports flock (set LOOPSTATE_DATA_DIR)",
                **detail,
            ) from exc
        if not deadline:  # the clock is read only when the lock is busy
            deadline = time.monotonic() + timeout
        if not blocked:
            blocked = True
            try:
                granted = _blocking_wait(fd, flags, deadline - time.monotonic())
            except OSError as exc:
                raise LoopstateError(
                    ErrorCode.STORE_IO_ERROR,
                    f"cannot lock {what}: {exc}; keep the store on a local "
                    "file system that supports flock (set LOOPSTATE_DATA_DIR)",
                    **detail,
                ) from exc
            if granted:
                return
            if granted is False:
                deadline = time.monotonic()  # the whole timeout was waited: say who holds it
        if time.monotonic() >= deadline:
            holder = _read_holder(fd)
            raise LoopstateError(
                ErrorCode.LOCK_TIMEOUT,
                f"timed out after {timeout:g}s waiting for {what}: held by "
                f"{holder['describe']}; wait for it to finish or stop that process",
                **detail,
                holder=holder,
            ) from None
        time.sleep(pause)
        pause = min(pause * 2, 0.02)


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
            _os_lock.flock(fd, _EXCLUSIVE)  # a file nobody else can open yet: never busy
            _os_lock.pwrite(fd, self._owner_record(), 0)

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
            if _os_lock.pread(fd, RECORD_WIDTH + 1, 0) != record:
                _os_lock.pwrite(fd, record, 0)
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
                    _os_lock.flock(fd, _os_lock.LOCK_UN)
                except Exception:  # cannot unlock: closing the descriptor releases it for sure
                    self._kept.close()
            else:
                os.close(fd)

    def __enter__(self) -> "StoreLock":
        return self

    def __exit__(self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None) -> None:
        self.release()


def _read_holder(fd: int) -> dict[str, Any]:
    """Who holds the lock on ``fd``'s file, for a waiter that timed out.

    The kernel's table (/proc/locks, Linux) is the truth: the pid and mode of
    every current holder, readers included. The owner record in the file names
    the last exclusive holder with its token and time; it completes the
    kernel's answer when the pids agree, and stands alone (said to be the last
    recorded holder) where there is no such table.
    """
    try:
        data = _os_lock.pread(fd, 4096, 0).strip()
        record = canonical.decode(data) if data else {}
    except Exception:
        record = {}
    if not isinstance(record, dict) or "pid" not in record:
        record = {}
    recorded = f"token {str(record.get('token'))[:8]}..., since {record.get('acquired_at')}"
    holders = _kernel_holders(os.fstat(fd))
    if holders is None:
        if record:
            return {**record, "describe": f"pid {record['pid']}, the last process to record itself ({recorded})"}
        return {"describe": "a reader or a process that has not recorded itself"}
    if not holders:
        return {"describe": "no process any more (it was released as the wait ended); try again"}
    pid, mode = holders[0]
    for held_pid, held_mode in holders:
        if held_mode == "exclusive" and held_pid == record.get("pid"):
            return {**record, "mode": "exclusive", "describe": f"pid {held_pid} ({recorded})"}
    others = f" and {len(holders) - 1} more" if len(holders) > 1 else ""
    return {"pid": pid, "mode": mode, "describe": f"pid {pid} ({mode}){others}"}


def _kernel_holders(info: os.stat_result) -> list[tuple[int, str]] | None:
    """(pid, "exclusive"|"shared") of each flock on this file from /proc/locks; None without it."""
    if not hasattr(os, "major"):  # Windows: no device numbers, and no /proc/locks either
        return None
    target = f"{os.major(info.st_dev):02x}:{os.minor(info.st_dev):02x}:{info.st_ino}"
    try:
        with open("/proc/locks", encoding="ascii", errors="replace") as table:
            lines = table.read().splitlines()
    except OSError:
        return None
    holders = []
    for line in lines:
        fields = line.split()
        # "<n>: FLOCK ADVISORY WRITE <pid> <maj>:<min>:<inode> 0 EOF"; "<n>: -> ..." is a waiter.
        if len(fields) >= 6 and fields[1] == "FLOCK" and fields[5] == target and fields[4].lstrip("-").isdigit():
            holders.append((int(fields[4]), "exclusive" if fields[3] == "WRITE" else "shared"))
    return holders
