"""A writer's catch-up over what another writer appended, where that writer's verified mark
vouches for it (core/ledger.py ``_vouched_head``, core/stream.py ``read_new``): the lines are
decoded, linked and folded without being re-hashed, the last one is hashed, and the read must
end at the mark's head. These are the bad paths: bytes changed under a mark, marks that do not
match the file, marks that lie. Two real ledgers on one real file, as two writer processes are."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from corekit import TEST_LAYOUT, event, read_all
from loopstate.core import verified_mark
from loopstate.core.errors import LoopstateError
from loopstate.core.ledger import Ledger
from loopstate.core.verified_mark import Mark
from loopstate_protocol.errors import ErrorCode


class Folded:
    """A ledger's owner: the events folded, and how many times the fold was dropped."""

    def __init__(self) -> None:
        self.events: list[dict] = []
        self.resets = 0

    def on_record(self, record) -> None:
        self.events.append(record.event)

    def on_reset(self) -> None:
        self.events.clear()
        self.resets += 1


def writers(project) -> tuple[Ledger, Ledger, Folded]:
    """Writer ``a`` (appends) and writer ``b`` (folds into the returned owner), both opened
    on a stream of 2 events, ``b`` caught up to them."""
    a = Ledger(project, "core", TEST_LAYOUT)
    folded = Folded()
    b = Ledger(project, "core", TEST_LAYOUT, on_record=folded.on_record, on_reset=folded.on_reset)
    for n in range(2):
        with a.mutation() as tx:
            tx.append([event(n)], request_id=f"a-{n}", fp="f" * 64)
    b.refresh()
    assert [e["n"] for e in folded.events] == [0, 1]
    return a, b, folded


def append(ledger: Ledger, numbers: range) -> None:
    for n in numbers:
        with ledger.mutation() as tx:
            tx.append([event(n)], request_id=f"x-{n}", fp="f" * 64)


def stream_path(project) -> Path:
    return project.dir / "streams" / "core.jsonl"


def edit_in_place(path: Path, old: bytes, new: bytes, *, keep_mtime: bool = True) -> None:
    """Replace the one occurrence of ``old`` by ``new`` (same length) in place, with the
    file's mtime put back: only its ctime tells."""
    data = path.read_bytes()
    assert data.count(old) == 1 and len(old) == len(new)
    before = os.stat(path)
    fd = os.open(path, os.O_WRONLY)
    try:
        os.pwrite(fd, new, data.index(old))
    finally:
        os.close(fd)
    if keep_mtime:
        os.utime(path, ns=(before.st_atime_ns, before.st_mtime_ns))


def forge_mark(ledger: Ledger, *, sequence: int, head_hash: str) -> None:
    """Write a mark that describes the stream file exactly as it is now, naming this head."""
    path = stream_path(ledger.project)
    info = os.stat(path)
    mark = Mark(info.st_dev, info.st_ino, info.st_size, info.st_mtime_ns, info.st_ctime_ns, info.st_size, sequence,
                head_hash)
    verified_mark.path_for(ledger.stream).write_bytes(verified_mark.encode("core", mark))


def test_a_catch_up_over_vouched_growth_folds_exactly_what_a_full_read_does(core_project):
    a, b, folded = writers(core_project)
    append(a, range(2, 12))
    assert verified_mark.load(b.stream).matches(os.stat(stream_path(core_project)))  # a vouched for it
    with b.mutation() as tx:  # the catch-up under the exclusive lock, then b's own append
        assert [r.event["n"] for r in tx.caught_up.records] == list(range(2, 12))
        tx.append([event(99)], request_id="b-99", fp="f" * 64)
        assert tx.earlier("x-5", "f" * 64)[0].event["n"] == 5  # every foreign request indexed
    events, _ = read_all(core_project, "core", TEST_LAYOUT)  # a fresh read re-hashes every line
    assert folded.events == events and folded.resets == 0
    # b's own append over a vouched file left a mark of its own: a cold reader may trust it.
    assert verified_mark.load(b.stream).matches(os.stat(stream_path(core_project)))


def test_growth_edited_in_place_after_its_writer_marked_it_is_corrupt_for_the_catch_up(core_project):
    a, b, _ = writers(core_project)
    append(a, range(2, 6))
    edit_in_place(stream_path(core_project), b'"n":3,', b'"n":7,')  # ctime moved: the mark no longer describes it
    with pytest.raises(LoopstateError) as caught:
        with b.mutation():
            pass
    assert caught.value.code == ErrorCode.CORRUPT_LEDGER
    assert caught.value.sequence == 4  # the edited record (event n=3 is the 4th), named


def test_an_edit_before_the_reader_s_head_hidden_behind_vouched_growth_is_not_vouched(core_project):
    """An edit of bytes b verified, then growth by a writer that must verify the file first:
    that writer refuses (its cold open hashes the edited prefix), so no mark vouches for it,
    and b's catch-up, finding no mark that describes the file, checks its head line and
    hashes the growth as it always did."""
    a, b, _ = writers(core_project)
    edit_in_place(stream_path(core_project), b'"n":0,', b'"n":9,')
    fresh = Ledger(core_project, "core", TEST_LAYOUT)
    with pytest.raises(LoopstateError) as caught:
        with fresh.mutation() as tx:
            tx.append([event(2)])
    assert caught.value.code == ErrorCode.CORRUPT_LEDGER
    with pytest.raises(LoopstateError) as caught:
        b.refresh()
    assert caught.value.code == ErrorCode.CORRUPT_LEDGER


def test_a_mark_naming_another_head_is_caught_and_the_stream_read_again_from_byte_0(core_project):
    a, b, folded = writers(core_project)
    append(a, range(2, 6))
    sequence, head_hash = a.head
    forge_mark(a, sequence=sequence + 1, head_hash=head_hash)  # describes the file, lies about its head
    b.refresh()
    # Nothing folded from the read the mark vouched for was kept: the fold was dropped once
    # and rebuilt from byte 0, every line hashed.
    events, _ = read_all(core_project, "core", TEST_LAYOUT)
    assert folded.resets == 1 and folded.events == events and b.head == (sequence, head_hash)
    with b.mutation() as tx:
        tx.append([event(6)], request_id="b-6", fp="f" * 64)
    assert read_all(core_project, "core", TEST_LAYOUT)[0][-1]["n"] == 6


def test_a_mark_forged_over_an_edited_last_line_is_corrupt(core_project):
    """The line ending at the mark's head is always hashed: a mark forged to describe the
    edited file (its stat, the old head) does not carry an edit of that line."""
    a, b, _ = writers(core_project)
    append(a, range(2, 6))
    sequence, head_hash = a.head
    edit_in_place(stream_path(core_project), b'"n":5,', b'"n":8,')
    forge_mark(a, sequence=sequence, head_hash=head_hash)
    with pytest.raises(LoopstateError) as caught:
        b.refresh()
    assert caught.value.code == ErrorCode.CORRUPT_LEDGER and caught.value.sequence == sequence


def test_a_forged_mark_is_believed_for_the_lines_before_its_head_and_verify_still_refuses(core_project):
    """The trust boundary, as docs/storage.md states it: whoever can write the store can
    forge a mark describing an edit of a line before the head, as they can re-chain the
    stream. The catch-up believes such a mark for those lines (it skips their hashes: the
    point of the mark), and a full verify, which never uses marks, still names the record."""
    a, b, folded = writers(core_project)
    append(a, range(2, 6))
    sequence, head_hash = a.head
    edit_in_place(stream_path(core_project), b'"n":3,', b'"n":7,')
    forge_mark(a, sequence=sequence, head_hash=head_hash)
    b.refresh()
    assert [e["n"] for e in folded.events] == [0, 1, 2, 7, 4, 5]
    with pytest.raises(LoopstateError) as caught:
        read_all(core_project, "core", TEST_LAYOUT)
    assert caught.value.code == ErrorCode.CORRUPT_LEDGER and caught.value.sequence == 4


def test_a_mark_short_of_the_file_s_end_vouches_for_nothing(core_project):
    """Growth by a process that left no mark (killed between its fsync and its mark, or one
    that takes no lock): the mark describes an older stat, so the growth is hashed line by
    line, and an edit in it is corrupt even with the mark's bytes intact."""
    a, b, _ = writers(core_project)
    append(a, range(2, 4))
    marked = verified_mark.path_for(a.stream).read_bytes()
    append(a, range(4, 6))
    verified_mark.path_for(a.stream).write_bytes(marked)  # as if the last two appends had left no mark
    edit_in_place(stream_path(core_project), b'"n":4,', b'"n":6,')
    with pytest.raises(LoopstateError) as caught:
        b.refresh()
    assert caught.value.code == ErrorCode.CORRUPT_LEDGER and caught.value.sequence == 5
