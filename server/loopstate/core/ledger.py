"""A stream with everything a mutation needs: lock, tail repair, catch-up, idempotency.

The owner (the service, or a CLI command) hands in two callbacks: ``on_record``
folds each newly verified event into its projection, ``on_reset`` drops that
projection when the file was replaced by a re-chaining command. The ledger
calls them for every event exactly once, in order, whether the event came from
this process or another.
"""

from __future__ import annotations

import os
from contextlib import contextmanager
from typing import Any, Callable, Iterator

from loopstate.core import checkpoint, quarantine, safefs
from loopstate.core.chain import REQUEST_FINGERPRINT, REQUEST_ID, ChainLayout
from loopstate.core.clock import format_time, system_clock
from loopstate.core.idempotency import Applied, RequestIndex
from loopstate.core.project import Project, check_stream_name
from loopstate.core.stream import ProgressFn, Record, Stream

RecordFn = Callable[[Record], None]


class Ledger:
    def __init__(
        self,
        project: Project,
        name: str,
        layout: ChainLayout,
        *,
        on_record: RecordFn | None = None,
        on_reset: Callable[[], None] | None = None,
        keep_requests: bool = True,
    ) -> None:
        self.project = project
        self.name = check_stream_name(name)
        self.stream = Stream(project.dir, name, layout)
        self.on_record = on_record
        self.on_reset = on_reset
        self.requests = RequestIndex() if keep_requests else None
        self._opened = False
        self._checkpoint_offset = 0
        self._last_line_start = 0

    @property
    def head(self) -> tuple[int, str | None]:
        return self.stream.position.sequence, self.stream.position.hash

    def _catch_up(self, progress: ProgressFn | None = None) -> list[Record]:
        trusted = 0
        if not self._opened:
            saved = checkpoint.load(self.stream)
            if saved is not None:
                trusted = checkpoint.validate(self.stream, saved)
                self._checkpoint_offset = trusted
            self._opened = True
        resets = self.stream.resets
        fresh: list[Record] = []
        for record in self.stream.read_new(verify_hash_until=trusted, progress=progress):
            if self.stream.resets != resets:
                resets = self.stream.resets
                self._restart()
            self._fold(record)
            fresh.append(record)
        if self.stream.resets != resets:
            self._restart()
        return fresh

    def _restart(self) -> None:
        if self.requests is not None:
            self.requests.clear()
        self._checkpoint_offset = 0
        if self.on_reset is not None:
            self.on_reset()

    def _fold(self, record: Record) -> None:
        event = record.event
        self._last_line_start = record.start
        if self.requests is not None and REQUEST_ID in event:
            self.requests.note(
                event[REQUEST_ID], event.get(REQUEST_FINGERPRINT, ""),
                event[self.stream.layout.sequence_field], record.start, record.end,
            )
        if self.on_record is not None:
            self.on_record(record)

    def refresh(self, progress: ProgressFn | None = None) -> list[Record]:
        """Read and verify what others appended, under a shared lock."""
        with self.project.lock(self.name).shared():
            return self._catch_up(progress)

    def records_of(self, applied: Applied) -> list[Record]:
        """Re-read the events of an earlier request (for an idempotent retry)."""
        data = self.stream.read_line_at(applied.start, applied.end)
        from loopstate.core import canonical

        out = []
        offset = applied.start
        for line in data.split(b"\n")[:-1]:
            out.append(Record(canonical.decode(line), offset, offset + len(line) + 1))
            offset += len(line) + 1
        return out

    @contextmanager
    def mutation(self) -> Iterator["Mutation"]:
        """Exclusive lock; catch up; quarantine and cut a torn tail; remove our orphans."""
        self.project.ensure()
        with self.project.lock(self.name).exclusive():
            self._catch_up()
            torn = self.stream.torn
            if torn is not None:
                quarantine.record(self.project.dir, self.name, {
                    "offset": torn.offset, "length": torn.length, "sha256": torn.sha256,
                    "reason": "partial final line", "at": format_time(system_clock()),
                })
                self.stream.cut_torn_tail()
            for folder in (self.stream.path.parent, self.project.dir / "checkpoints"):
                safefs.remove_orphan_temps(folder)
            yield Mutation(self)


class Mutation:
    """What a caller may do while holding a ledger's exclusive lock."""

    def __init__(self, ledger: Ledger) -> None:
        self.ledger = ledger

    def earlier(self, request_id: str, fp: str) -> list[Record] | None:
        """The events of an exact earlier request; raises REQUEST_ID_REUSED on a changed one."""
        assert self.ledger.requests is not None
        applied = self.ledger.requests.lookup(request_id, fp)
        return None if applied is None else self.ledger.records_of(applied)

    def append(self, events: list[dict[str, Any]], *, request_id: str | None = None, fp: str | None = None) -> list[Record]:
        if request_id is not None:
            events = [{**e, REQUEST_ID: request_id, REQUEST_FINGERPRINT: fp} for e in events]
        records = self.ledger.stream.append(events)
        for record in records:
            self.ledger._fold(record)
        stream = self.ledger.stream
        if stream.position.offset - self.ledger._checkpoint_offset >= checkpoint.CHECKPOINT_EVERY:
            checkpoint.save(stream, self.ledger._last_line_start)
            self.ledger._checkpoint_offset = stream.position.offset
        return records
