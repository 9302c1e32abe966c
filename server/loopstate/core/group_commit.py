"""Group commit: the threads of one process share writes and fsyncs on one stream.

Threads that want to mutate the same stream queue their work (``submit``).
One of them, the leader, runs every queued work under the stream's exclusive
lock and writes all their events with one write. It then hands the lead to the
oldest queued thread *before* its own fsync: the next group's work and write
run while this group's fsync waits on the disk (an fsync releases the GIL, the
work needs it), so the disk is kept busy and the work is not serialized behind
it. Groups are acknowledged strictly in the order they were written, each only
after its own fsync returned and every earlier group was acknowledged: a caller
is answered only when its events, and every event before them, are durable.

The exclusive lock is taken by the first group and held while groups are in
flight; it is let go when the pipeline drains (nothing queued, written or
syncing) and after at most ``HOLD_GROUPS`` groups, so other processes get their
turn. A failed write or fsync fails its group and every group written after
it (Linux reports a writeback error to one fsync only, so a later fsync that
succeeds proves nothing about the bytes before it); once the pipeline has
drained, the file is cut back to the last acknowledged byte and the ledger
rebuilds its state from the file.
"""

from __future__ import annotations

import threading
from typing import TYPE_CHECKING, Any, Callable, Generic, TypeVar

from loopstate.core.chain import Position

if TYPE_CHECKING:
    from loopstate.core.ledger import Ledger, Mutation

T = TypeVar("T")

# Groups written under one hold of the exclusive lock before it is let go.
HOLD_GROUPS = 16


class Job(Generic[T]):
    """One caller's work in a group commit, and what came of it."""

    __slots__ = ("work", "done", "wake", "result", "error")

    def __init__(self, work: Callable[["Mutation"], T]) -> None:
        self.work = work
        self.done = False
        self.wake = threading.Event()  # set once: made durable, or to lead the next group
        self.result: T | None = None
        self.error: BaseException | None = None

    def outcome(self) -> T:
        if self.error is not None:
            raise self.error
        return self.result  # type: ignore[return-value]


class GroupCommit:
    """The queue, the lead and the in-flight groups of one ledger."""

    def __init__(self, ledger: "Ledger") -> None:
        self.ledger = ledger
        self._mutex = threading.Lock()
        self._acked_cond = threading.Condition(self._mutex)
        self.queue: list[Job[Any]] = []
        self.leading = False
        self._scope: Any = None  # the ledger's mutation scope while the pipeline holds the lock
        self._tx: "Mutation | None" = None
        self._held = 0  # groups written under this hold of the lock
        self._issued = 0  # tickets: the order in which groups were written
        self._acked = 0  # groups acknowledged (or failed), in ticket order
        self._failed: BaseException | None = None

    def submit(self, work: Callable[["Mutation"], T]) -> T:
        job: Job[T] = Job(work)
        with self._mutex:
            self.queue.append(job)
            leading = not self.leading
            self.leading = True
        if not leading:
            job.wake.wait()
            if job.done:
                return job.outcome()
        self._lead(job)
        return job.outcome()

    # the leader ---------------------------------------------------------------------

    def _lead(self, own: Job[Any]) -> None:
        """Run, write and hand on one group, then sync it and acknowledge it in order."""
        stream = self.ledger.stream
        with self._mutex:
            batch, self.queue = self.queue, []
            ticket = self._issued
            self._issued += 1
        head: Position | None = None
        error: BaseException | None = self._failed  # never write on top of a failed group
        # A failure once this group's work has begun poisons the pipeline: the ledger
        # folded what may never be durable. Failing to take the lock folds nothing.
        poisons = False
        if error is None:
            try:
                self._open()
                poisons = True
                self._run(batch)
                head = stream.write_staged()
                self._held += 1
            except BaseException as exc:
                error = exc
        handed_on = error is None and self._held < HOLD_GROUPS
        if handed_on:
            self._pass_lead()
        if error is None and head is not None:
            try:
                stream.sync()
            except BaseException as exc:
                error = exc
        with self._acked_cond:
            while self._acked != ticket:
                self._acked_cond.wait()
            if error is None and self._failed is not None:
                error = self._failed  # an earlier group failed: these bytes follow its
            elif error is not None and poisons and self._failed is None:
                self._failed = error
            if error is None and head is not None:
                stream.mark_durable(head)
            self._acked += 1
            self._acked_cond.notify_all()
            # The last group in flight with nobody leading closes the pipeline (taking
            # the lead so that no new group starts meanwhile).
            closing = not handed_on or (self._acked == self._issued and not self.leading)
            if handed_on and closing:
                self.leading = True
        for job in batch:
            if error is not None:
                job.error = error
            job.done = True
            if job is not own:
                job.wake.set()
        if closing:
            try:
                self._close()  # its error (a checkpoint that cannot be saved) reaches this caller
            finally:
                self._pass_lead()
        if error is not None and not isinstance(error, Exception) and own in batch:
            raise error  # an interrupt reaches the thread it happened in, after everyone is answered

    def _open(self) -> None:
        """Take the exclusive lock (and catch up) for the pipeline, unless it holds it."""
        if self._tx is None:
            scope = self.ledger.mutation()
            tx = scope.__enter__()
            tx.grouped = True
            self._scope, self._tx, self._held = scope, tx, 0

    def _run(self, batch: list[Job[Any]]) -> None:
        """Every job's work, plus the work queued while it ran: one write for them all."""
        ran = 0
        while ran < len(batch):
            for job in batch[ran:]:
                try:
                    job.result = job.work(self._tx)
                except Exception as exc:
                    job.error = exc
            ran = len(batch)
            with self._mutex:
                batch += self.queue
                self.queue = []

    def _pass_lead(self) -> None:
        with self._mutex:
            successor = self.queue[0] if self.queue else None
            self.leading = successor is not None
        if successor is not None:
            successor.wake.set()

    def _close(self) -> None:
        """Every group is acknowledged and this thread leads: let go of the lock.

        After a failure the file is first cut back to the last acknowledged byte
        and the ledger forgets what it folded, to rebuild it from the file.
        """
        ledger, scope = self.ledger, self._scope
        self._scope = self._tx = None
        try:
            if self._failed is not None:
                self._failed = None
                try:
                    ledger.stream.cut_back()
                finally:
                    ledger._forget_unwritten()
            elif scope is not None:
                ledger.stream.settle()
                ledger._save_checkpoint_if_due()
        finally:
            if scope is not None:
                scope.__exit__(None, None, None)
