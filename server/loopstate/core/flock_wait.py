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


RECORD_WIDTH = 128
"""The owner record at the start of a stream's lock file (``core/lock.py``), read back here
to name the holder. The queue's ticket counter follows it (``TICKET_AT``)."""

# The waiters' queue in front of a stream lock's flock. Byte-range locks far past the owner
# record (a lock may lie beyond the end of a file; nothing is written there): the join byte,
# then one place per ticket, a ring of QUEUE_PLACES. The ticket counter follows the record,
# written only by a waiter joining the queue: 32 bits as 16 JSON whitespace characters (two
# bits each), so the lock file stays one JSON document (the record, then whitespace).
TICKET_AT = RECORD_WIDTH
TICKET_BYTES = 16
QUEUE_JOIN = 1 << 20
QUEUE_PLACES = 4096  # divides 2**32: the ring stays in step when the counter wraps
_DIGITS = b" \t\r\n"
_VALUE = {digit: value for value, digit in enumerate(_DIGITS)}


def _ticket(raw: bytes) -> int:
    """The counter in ``raw`` (0 for anything else: none written yet, or an older layout's bytes)."""
    if len(raw) != TICKET_BYTES:
        return 0
    number = 0
    for byte in raw:
        value = _VALUE.get(byte)
        if value is None:
            return 0
        number = number << 2 | value
    return number


def _ticket_bytes(number: int) -> bytes:
    number &= (1 << 2 * TICKET_BYTES) - 1
    return bytes(_DIGITS[number >> 2 * (TICKET_BYTES - 1 - k) & 3] for k in range(TICKET_BYTES))


class _Expired(Exception):
    """Raised by the SIGALRM handler of a bounded blocking wait."""


def _on_alarm(signum: int, frame: object) -> None:
    raise _Expired


def queue_busy(fd: int) -> bool:
    """Whether any waiter is queued for (or holds, having queued) this lock: then a newcomer
    queues behind them instead of taking a lock that happens to be free for a moment."""
    return bool(primitive.bytes_held(fd, QUEUE_JOIN, 1 + QUEUE_PLACES))


def _queued_flock(fd: int, flags: int) -> int | None:
    """Wait for the flock in the queue, blocking (the caller bounds it); the place held, if any.

    Join (under the join byte, held for a pread and a pwrite): take the next ticket and
    lock its place. Then block on the place before it, which its holder keeps from joining
    until it lets go of the flock: one waiter blocks on each place, so a release wakes one
    process, the next in line, where a flock's release wakes every waiter. Then the flock,
    which stays the mutual exclusion (a waiter killed in the queue drops its place with its
    descriptor, and the one behind it goes straight to the flock). A place already taken
    (more waiters than places) means no place: straight to the flock. On any exception
    nothing of the queue stays held.
    """
    place = None
    try:
        primitive.byte_lock(fd, QUEUE_JOIN, wait=True)
        try:
            ticket = _ticket(primitive.pread(fd, TICKET_BYTES, TICKET_AT))
            primitive.pwrite(fd, _ticket_bytes(ticket + 1), TICKET_AT)
            if primitive.byte_lock(fd, QUEUE_JOIN + 1 + ticket % QUEUE_PLACES, wait=False):
                place = ticket % QUEUE_PLACES
        finally:
            primitive.byte_unlock(fd, QUEUE_JOIN)
        if place is not None:
            before = QUEUE_JOIN + 1 + (ticket - 1) % QUEUE_PLACES
            primitive.byte_lock(fd, before, wait=True)
            primitive.byte_unlock(fd, before)
        primitive.flock(fd, flags & ~primitive.LOCK_NB)
    except BaseException:
        if place is not None:
            leave_queue(fd, place)
        raise
    return place


def leave_queue(fd: int, place: int | None) -> None:
    """Let go of a place in the queue (after the flock it was held with): the next waiter wakes."""
    if place is not None:
        primitive.byte_unlock(fd, QUEUE_JOIN + 1 + place)


def _block(fd: int, flags: int, queued: bool) -> int | None:
    """The blocking wait itself: in the queue, or on the flock alone."""
    if queued:
        return _queued_flock(fd, flags)
    primitive.flock(fd, flags & ~primitive.LOCK_NB)
    return None


def _blocking_wait(fd: int, flags: int, seconds: float, queued: bool) -> tuple[bool, int | None] | None:
    """A blocking wait bounded by ``seconds``: (True, place) locked, (False, None) timed out,
    None not possible here.

    The kernel wakes a blocked lock the moment its holder lets go, where a
    poll with sleeps comes back late and loses to any newcomer: with 16 CLI
    writers at once, sleeping pollers starved past the timeout. On the main
    thread the bound is a one-shot SIGALRM timer (when nothing else has the
    timer or a handler of its own), over the queue and the flock alike; if the
    timer fires just after the lock was granted, a non-blocking retry on the same
    descriptor says so. Elsewhere (a server's service thread) the wait runs in a
    helper thread and the caller waits for it with the timeout (``_waited_in_helper``).
    """
    import threading  # only on contention: an uncontended lock costs no import

    if not primitive.BOUNDED_BLOCKING_WAIT:
        return None
    if threading.current_thread() is not threading.main_thread():
        return _waited_in_helper(fd, flags, seconds, queued)
    import signal

    try:
        previous = signal.getsignal(signal.SIGALRM)
        if previous not in (signal.SIG_DFL, signal.SIG_IGN, None) or signal.getitimer(signal.ITIMER_REAL)[0] > 0:
            return _waited_in_helper(fd, flags, seconds, queued)
    except (ValueError, OSError):
        return _waited_in_helper(fd, flags, seconds, queued)
    try:
        try:
            signal.signal(signal.SIGALRM, _on_alarm)
            signal.setitimer(signal.ITIMER_REAL, max(seconds, 0.001))
            return True, _block(fd, flags, queued)
        finally:
            signal.setitimer(signal.ITIMER_REAL, 0)
            signal.signal(signal.SIGALRM, previous)
    except _Expired:
        try:
            primitive.flock(fd, flags)  # granted in the instant the timer fired? (same descriptor: no-op if held)
            return True, None
        except BlockingIOError:
            return False, None


class _HelperWait:
    """One blocking wait run in a helper thread, and the caller's verdict on it (under ``decided``)."""

    __slots__ = ("decided", "done", "granted", "abandoned", "error", "place")

    def __init__(self) -> None:
        import threading

        self.decided = threading.Lock()
        self.done = threading.Event()
        self.granted = False
        self.abandoned = False
        self.error: OSError | None = None
        self.place: int | None = None

    def run(self, fd: int, flags: int, queued: bool) -> None:
        """Block on ``fd`` (a duplicate this thread owns: the same open file, so the same locks)."""
        try:
            place = _block(fd, flags, queued)
        except OSError as exc:
            self.error = exc
            os.close(fd)
            self.done.set()
            return
        with self.decided:
            if self.abandoned:  # the caller timed out meanwhile: let go of what it no longer waits for
                primitive.flock(fd, primitive.LOCK_UN)
                leave_queue(fd, place)
            else:
                self.granted, self.place = True, place
        os.close(fd)  # the locks stay with the open file, which the caller's descriptor still holds
        self.done.set()


def _waited_in_helper(fd: int, flags: int, seconds: float, queued: bool) -> tuple[bool, int | None]:
    """A blocking wait in a helper thread, waited for by the calling thread for at most ``seconds``.

    The helper blocks on a duplicate of ``fd``: a flock and an open-file-description
    lock belong to the open file, so the locks it is granted are the caller's. Should
    the wait time out first, the caller marks it abandoned and the helper, once
    granted, unlocks through its own duplicate (never through a descriptor number the
    caller may have closed and reused) and closes it. Raises the OSError of a lock
    the file system refuses.
    """
    import threading

    wait = _HelperWait()
    helper_fd = os.dup(fd)
    try:
        threading.Thread(target=wait.run, args=(helper_fd, flags, queued), name="loopstate-lock-wait",
                         daemon=True).start()
    except BaseException:
        os.close(helper_fd)
        raise
    wait.done.wait(max(seconds, 0.0))
    with wait.decided:
        if not wait.granted and wait.error is None:
            wait.abandoned = True
            return False, None
    if wait.error is not None:
        raise wait.error
    return True, wait.place


def wait_for_flock(fd: int, *, exclusive: bool, timeout: float, what: str, path: str | None = None,
                   queued: bool = False) -> int | None:
    """flock ``fd`` within ``timeout`` seconds, or raise: LOCK_TIMEOUT naming the holder,
    STORE_IO_ERROR when the file system refuses the lock (waiting would not help).

    ``queued`` (an exclusive stream lock, on a descriptor open for writing): where the
    platform has the waiters' queue (``primitive.OFD_QUEUE``), a busy lock, or one
    with waiters queued, is waited for in the queue (``_queued_flock``), first come,
    first served; the place it held is returned, for ``leave_queue`` after the flock's
    release (closing the descriptor lets go of it too). Else a busy lock is waited for
    in the kernel's queue where the process can bound that wait (``_blocking_wait``),
    else by polling with short sleeps. Returns None when no place is held."""
    flags = EXCLUSIVE if exclusive else SHARED
    queued = queued and exclusive and primitive.OFD_QUEUE
    busy = False
    if queued:
        try:
            busy = queue_busy(fd)
        except OSError:  # a file system without byte-range locks: the flock alone
            queued = busy = False
    deadline = 0.0
    pause = 0.0005
    detail = {} if path is None else {"lock": path}
    blocked = False  # the blocking wait has been tried (it is tried once, for the whole timeout)
    while True:
        try:
            if not busy:
                primitive.flock(fd, flags)
                return None
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
            blocked, busy = True, False  # from here on (no blocking wait here) the flock is polled
            try:
                outcome = _blocking_wait(fd, flags, deadline - time.monotonic(), queued)
            except OSError as exc:
                raise LoopstateError(
                    ErrorCode.STORE_IO_ERROR,
                    f"cannot lock {what}: {exc}; keep the store on a local "
                    "file system that supports flock (set LOOPSTATE_DATA_DIR)",
                    **detail,
                ) from exc
            if outcome is not None:
                granted, place = outcome
                if granted:
                    return place
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
        data = primitive.pread(fd, RECORD_WIDTH, 0).strip()
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
