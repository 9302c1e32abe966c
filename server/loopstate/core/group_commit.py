"""Group commit: threads of one process that mutate the same stream share one write and one fsync.

When several threads want to mutate one stream, they queue their work; the
first (the leader) runs the whole queue under one exclusive lock, work queued
meanwhile joining the same group, and makes it durable with one write and one
fsync; every caller returns only after that fsync, and if the write fails every
caller in the group gets the error and none of their events is kept. A
long-lived server is what needs it (``Ledger.submit``), so a one-command process
never imports it. It drives a ledger's mutation and flush through the public
methods ``Host`` names, and imports no ledger.

A new leader first lets the group gather: when the group before it held more
jobs than are queued now, it waits (releasing the GIL) until as many have
queued, or for at most as long as the last group's write and fsync took. The
threads of the group just made durable are then waking, making their next
event and queueing; without the wait, the first of them to queue ran a group
of one and the others' fsync waited behind it, so 16 steady writers moved in
small groups that alternated with one-job groups. A lone writer never waits
(its last group held one job).
"""

from __future__ import annotations

import threading
import time
from contextlib import AbstractContextManager
from typing import Any, Callable, Generic, Protocol, TypeVar

from loopstate.core.mutation import Mutation

T = TypeVar("T")


class Host(Protocol):
    """What a group commit asks of its ledger (``core/ledger.py``)."""

    def mutation(self) -> AbstractContextManager[Mutation]:
        """The ledger's exclusive section."""
        ...

    def flush_staged(self) -> float:
        """Inside the section: make every staged line durable with one write and one fsync, and
        return the seconds they took; on failure nothing staged or folded is kept."""
        ...

    def forget_unwritten(self) -> None:
        """Inside the section: drop what was staged and folded but never written."""
        ...


class _Job(Generic[T]):
    """One caller's work in a group commit, and what came of it.

    Its caller is woken once (its group is durable, or it is to lead the next one) through a
    lock taken at creation and released by the waker: one futex wake, where an ``Event``'s
    condition variable cost a lock, a waiter list and a notify per job (a sixth of a
    16-thread group's CPU in a profile).
    """

    __slots__ = ("work", "done", "_woken", "result", "error")

    def __init__(self, work: Callable[[Mutation], T]) -> None:
        self.work = work
        self.done = False
        self._woken = threading.Lock()
        self._woken.acquire()
        self.result: T | None = None
        self.error: BaseException | None = None

    def wake(self) -> None:
        """Wake the caller (once: each job is woken by exactly one waker)."""
        self._woken.release()

    def wait(self) -> None:
        self._woken.acquire()

    def outcome(self) -> T:
        if self.error is not None:
            raise self.error
        return self.result  # type: ignore[return-value]


class GroupCommit:
    """One ledger's queue of work from this process's threads, and whether a leader is running it."""

    def __init__(self, ledger: Host) -> None:
        self.ledger = ledger
        self._group = threading.Condition(threading.Lock())
        self._queue: list[_Job[Any]] = []
        self._leading = False
        self._last_size = 0  # jobs in the last group
        self._last_flush = 0.0  # seconds the last group's write and fsync took: the longest a leader waits

    def submit(self, work: Callable[[Mutation], T]) -> T:
        """Run ``work(tx)`` under the exclusive lock, sharing one write+fsync with other threads.

        ``work`` sees the state folded from every earlier event, including those
        of work queued before it in the same group. Returns ``work``'s result (or
        raises its exception) only after every event of the group is durable; if
        the shared write or fsync fails, every caller in the group gets that error
        and none of their events is kept. ``work`` must not call ``submit`` itself.
        """
        job: _Job[T] = _Job(work)
        with self._group:
            self._queue.append(job)
            leading = not self._leading
            self._leading = True
            if not leading and len(self._queue) >= self._last_size:
                self._group.notify()  # a gathering leader has all it waits for
        if not leading:
            # Woken once: when a group made this job durable, or to lead the next group.
            job.wait()
            if job.done:
                return job.outcome()
        batch: list[_Job[Any]] = []
        try:
            with self._group:
                if len(self._queue) < self._last_size and self._last_flush > 0:
                    deadline = time.monotonic() + self._last_flush
                    while len(self._queue) < self._last_size and (left := deadline - time.monotonic()) > 0:
                        self._group.wait(left)
                batch, self._queue = self._queue, []
            self._run_group(batch)
        finally:
            with self._group:
                successor = self._queue[0] if self._queue else None
                self._leading = successor is not None
            for done in batch:
                if done is not job:
                    done.wake()
            if successor is not None:
                successor.wake()  # leadership passes to the oldest waiter
        return job.outcome()

    def _run_group(self, batch: list[_Job[Any]]) -> None:
        ledger = self.ledger
        try:
            with ledger.mutation() as tx:
                tx.grouped = True
                try:
                    ran = 0
                    while ran < len(batch):
                        for job in batch[ran:]:
                            try:
                                job.result = job.work(tx)
                            except Exception as exc:
                                job.error = exc
                        ran = len(batch)
                        # Work queued while this group ran joins it: same write, same fsync.
                        with self._group:
                            batch += self._queue
                            self._queue = []
                except BaseException:
                    # Folded but never written (the group was interrupted): drop it all
                    # and rebuild from the file.
                    ledger.forget_unwritten()
                    raise
                # One write and one fsync for the whole group (a failed one keeps nothing).
                self._last_flush = ledger.flush_staged()
                self._last_size = len(batch)
        except BaseException as exc:
            for job in batch:
                job.error = exc
            if not isinstance(exc, Exception):
                raise
        finally:
            for job in batch:
                job.done = True
