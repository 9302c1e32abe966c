"""The append descriptor a long-lived ledger keeps between appends, against real files."""

from __future__ import annotations

import os

import pytest

from corekit import TEST_LAYOUT, event, read_all
from loopstate.core.ledger import Ledger


def _open_targets() -> list[str]:
    """What this process's descriptors point at (Linux /proc)."""
    out = []
    for fd in os.listdir("/proc/self/fd"):
        try:
            out.append(os.readlink(f"/proc/self/fd/{fd}"))
        except OSError:
            pass
    return out


def test_appends_reuse_one_descriptor_and_a_re_chained_file_lets_the_old_one_go(core_project):
    ledger = Ledger(core_project, "core", TEST_LAYOUT)
    path = core_project.dir / "streams" / "core.jsonl"
    for n in range(3):
        with ledger.mutation() as tx:
            tx.append([event(n)])
    assert _open_targets().count(str(path)) == 1  # kept, not reopened per append

    # What a re-chaining command (recover, purge) does: a new file renamed over the path.
    other = Ledger(core_project, "core", TEST_LAYOUT)
    other.refresh()
    copy = path.with_name("core.jsonl.new")
    copy.write_bytes(path.read_bytes())
    os.chmod(copy, 0o600)
    os.replace(copy, path)

    ledger.refresh()  # the kept inode is unlinked now: the ledger reads the new file from byte 0
    assert not any(target.endswith("core.jsonl (deleted)") for target in _open_targets())
    with ledger.mutation() as tx:
        (record,) = tx.append([event(3)])
    assert record.event["sequence"] == 4
    events, _ = read_all(core_project, "core", TEST_LAYOUT)
    assert [e["n"] for e in events] == [0, 1, 2, 3]
    assert _open_targets().count(str(path)) == 1


def test_closing_a_ledger_closes_its_kept_descriptors(core_project):
    ledger = Ledger(core_project, "core", TEST_LAYOUT)
    with ledger.mutation() as tx:
        tx.append([event(0)])
    stream = str(core_project.dir / "streams" / "core.jsonl")
    lock = str(core_project.dir / "locks" / "core.lock")
    assert stream in _open_targets() and lock in _open_targets()
    ledger.close()
    assert stream not in _open_targets() and lock not in _open_targets()
    with ledger.mutation() as tx:  # they reopen, checked, on the next mutation
        (record,) = tx.append([event(1)])
    assert record.event["sequence"] == 2


def test_a_fold_that_fails_before_the_write_keeps_nothing_and_the_ledger_carries_on_from_the_file(core_project):
    """Events are folded before they are written; a failing fold must leave neither
    bytes in the file nor folded state behind."""
    folded: list[int] = []
    resets = []

    def fold(record) -> None:
        if record.event["n"] == 2:
            raise ValueError("the projection refused event 2")
        folded.append(record.event["n"])

    ledger = Ledger(core_project, "core", TEST_LAYOUT, on_record=fold, on_reset=lambda: resets.append(len(folded)))
    with ledger.mutation() as tx:
        tx.append([event(0), event(1)])
    size = ledger.stream.path.stat().st_size
    with pytest.raises(ValueError, match="refused event 2"):
        with ledger.mutation() as tx:
            tx.append([event(2)])
    assert ledger.stream.path.stat().st_size == size  # nothing written
    assert [e["n"] for e in read_all(core_project, "core", TEST_LAYOUT)[0]] == [0, 1]
    folded.clear()
    with ledger.mutation() as tx:  # rebuilt from the file: 0 and 1 folded again, then 3
        tx.append([event(3)])
    assert resets and folded == [0, 1, 3]
    assert ledger.head[0] == 3


def test_after_a_failed_append_the_rebuild_is_not_news(core_project):
    """Rebuilding the projection after an append that failed re-reads the stream as a
    first open does: the events already there are not handed out again as caught up."""
    fail = [False]

    def fold(record) -> None:
        if fail[0]:
            raise OSError(28, "No space left on device")

    ledger = Ledger(core_project, "core", TEST_LAYOUT, on_record=fold, announce_history=False)
    with ledger.mutation() as tx:
        tx.append([event(0), event(1)])
    fail[0] = True
    with pytest.raises(OSError):
        with ledger.mutation() as tx:
            tx.append([event(2)])
    fail[0] = False
    with ledger.mutation() as tx:
        assert tx.caught_up.records == []
        (record,) = tx.append([event(3)])
    assert record.event["sequence"] == 3


@pytest.mark.parametrize("grouped", [False, True])
def test_a_batch_with_an_event_that_cannot_be_encoded_appends_none_of_it(core_project, grouped):
    """Sealing stops at the bad event; the ones sealed before it must not be left staged
    for the next write (they would go out with a sequence the next event also takes)."""
    ledger = Ledger(core_project, "core", TEST_LAYOUT)
    with ledger.mutation() as tx:
        tx.append([event(0)])
    batch = [event(1), {**event(2), "payload": object()}]
    if grouped:
        with pytest.raises(TypeError):
            ledger.submit(lambda tx: tx.append(batch))
        ledger.submit(lambda tx: tx.append([event(3)]))
    else:
        with pytest.raises(TypeError):
            with ledger.mutation() as tx:
                tx.append(batch)
        with ledger.mutation() as tx:
            tx.append([event(3)])
    events, _ = read_all(core_project, "core", TEST_LAYOUT)
    assert [(e["n"], e["sequence"]) for e in events] == [(0, 1), (3, 2)]
