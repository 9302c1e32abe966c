"""The OS lock primitive and the bounded wait on it, shared by every lock in core.

A stream's lock (``core/lock.py``) and a project's founding lock
(``core/founding.py``) both wait for a flock the same way: in the kernel's queue,
bounded by the caller's timeout, and on a timeout they name the holder. The
wait lives here, below both, so that neither lock imports the other.

``primitive`` is the module with flock's contract for this platform (a busy
``LOCK_NB`` lock is BlockingIOError; any other OSError is a failure that waiting
would not cure): ``core/lock_posix.py`` (fcntl) on POSIX, ``core/lock_windows.py``
(portalocker, imported on Windows alone) there.
"""

from __future__ import annotations

import os
import sys
import time
from typing import Any

from loopstate_protocol.errors import ErrorCode

from loopstate.core import canonical
from loopstate.core.errors import LoopstateError

DEFAULT_TIMEOUT = 10.0

if sys.platform == "win32":
    from loopstate.core import lock_windows as _platform
else:
    from loopstate.core import lock_posix as _platform
primitive = _platform  # a module attribute, read at each call: a test may put the other platform's in place

EXCLUSIVE = primitive.LOCK_EX | primitive.LOCK_NB
SHARED = primitive.LOCK_SH | primitive.LOCK_NB


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

    if not primitive.BOUNDED_BLOCKING_WAIT:
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
            primitive.flock(fd, flags & ~primitive.LOCK_NB)
            return True
        finally:
            signal.setitimer(signal.ITIMER_REAL, 0)
            signal.signal(signal.SIGALRM, previous)
    except _Expired:
        try:
            primitive.flock(fd, flags)  # granted in the instant the timer fired? (same descriptor: no-op if held)
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
            primitive.flock(fd, flags & ~primitive.LOCK_NB)
        except OSError as exc:
            self.error = exc
            os.close(fd)
            self.done.set()
            return
        with self.decided:
            if self.abandoned:  # the caller timed out meanwhile: let go of what it no longer waits for
                primitive.flock(fd, primitive.LOCK_UN)
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
    flags = EXCLUSIVE if exclusive else SHARED
    deadline = 0.0
    pause = 0.0005
    detail = {} if path is None else {"lock": path}
    blocked = False  # the blocking wait has been tried (it is tried once, for the whole timeout)
    while True:
        try:
            primitive.flock(fd, flags)
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
            holder = read_holder(fd)
            raise LoopstateError(
                ErrorCode.LOCK_TIMEOUT,
                f"timed out after {timeout:g}s waiting for {what}: held by "
                f"{holder['describe']}; wait for it to finish or stop that process",
                **detail,
                holder=holder,
            ) from None
        time.sleep(pause)
        pause = min(pause * 2, 0.02)


def read_holder(fd: int) -> dict[str, Any]:
    """Who holds the lock on ``fd``'s file, for a waiter that timed out.

    The kernel's table (/proc/locks, Linux) is the truth: the pid and mode of
    every current holder, readers included. The owner record in the file names
    the last exclusive holder with its token and time; it completes the
    kernel's answer when the pids agree, and stands alone (said to be the last
    recorded holder) where there is no such table.
    """
    try:
        data = primitive.pread(fd, 4096, 0).strip()
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
