"""Checkpoints of the verified head, and reads that never create or repair anything."""

from __future__ import annotations

import hashlib
import json
import os

import pytest

from corekit import event, line_starts, read_all, sealed_lines, snapshot, write_stream
from loopstate.core import checkpoint
from loopstate.core.chain import ChainError
from loopstate.core.ledger import Ledger
from loopstate.core.stream import Stream
from loopstate_protocol.errors import ErrorCode

from corekit import TEST_LAYOUT


@pytest.fixture
def checkpointed(core_project, monkeypatch):
    """A stream of 20 events written through Ledger with a checkpoint saved on the way."""
    monkeypatch.setattr(checkpoint, "CHECKPOINT_EVERY", 1000)
    ledger = Ledger(core_project, "core", TEST_LAYOUT)
    for i in range(20):
        with ledger.mutation() as tx:
            tx.append([event(i, pad="p" * 50)])
    saved = checkpoint.load(ledger.stream)
    assert saved is not None and saved.sequence > 1
    return ledger, saved


def test_appends_write_a_checkpoint_that_a_new_reader_trusts(checkpointed, core_project):
    ledger, saved = checkpointed
    path = ledger.stream.path
    assert (saved.dev, saved.ino) == (os.stat(path).st_dev, os.stat(path).st_ino)
    assert saved.prefix_sha256 == hashlib.sha256(path.read_bytes()[:saved.offset]).hexdigest()
    fresh = Ledger(core_project, "core", TEST_LAYOUT)
    assert len(fresh.refresh()) == 20
    assert fresh.head == ledger.head


def test_an_edited_checkpoint_hash_is_corrupt_ledger(checkpointed, core_project):
    ledger, saved = checkpointed
    target = checkpoint.path_for(ledger.stream)
    record = json.loads(target.read_bytes())
    record["hash"] = "0" * 64
    target.write_text(json.dumps(record))
    with pytest.raises(ChainError) as info:
        Ledger(core_project, "core", TEST_LAYOUT).refresh()
    assert info.value.code is ErrorCode.CORRUPT_LEDGER
    assert info.value.offset == saved.line_start and "hash changed" in info.value.reason


def test_a_stream_truncated_below_its_checkpoint_is_corrupt_ledger(checkpointed, core_project):
    ledger, saved = checkpointed
    os.truncate(ledger.stream.path, saved.line_start)  # whole lines gone: valid-looking on its own
    assert len(read_all(core_project, "core", TEST_LAYOUT)[0]) == saved.sequence - 1
    for attempt in (lambda: Ledger(core_project, "core", TEST_LAYOUT).refresh(),
                    lambda: Ledger(core_project, "core", TEST_LAYOUT).mutation().__enter__()):
        with pytest.raises(ChainError) as info:
            attempt()
        assert info.value.code is ErrorCode.CORRUPT_LEDGER
        assert "acknowledged events are gone" in info.value.reason


def test_a_payload_byte_changed_before_the_checkpoint_is_caught_at_its_record(checkpointed, core_project):
    """Links alone miss this (the edited line keeps its old, now wrong, hash); the prefix digest does not."""
    ledger, saved = checkpointed
    events, stream = read_all(core_project, "core", TEST_LAYOUT)
    data = ledger.stream.path.read_bytes()
    starts = [0] + [i + 1 for i, byte in enumerate(data) if byte == ord("\n")][:-1]
    assert saved.prefix_sha256 is not None and starts[3] < saved.line_start
    edited = data[:starts[3]] + data[starts[3]:].replace(b'"n":3', b'"n":8', 1)
    ledger.stream.path.write_bytes(edited)
    with pytest.raises(ChainError) as info:
        Ledger(core_project, "core", TEST_LAYOUT).refresh()
    assert info.value.code is ErrorCode.CORRUPT_LEDGER
    assert (info.value.offset, info.value.sequence) == (starts[3], 4)


def test_an_edited_prefix_digest_is_corrupt_ledger_and_nothing_folded_from_the_prefix_is_kept(checkpointed, core_project):
    """The prefix digest is checked while the scan folds the prefix (in a thread): when it
    fails, the projection built from the unproven bytes is dropped, and every later open
    fails the same way (the file itself verifies; the checkpoint's digest does not)."""
    ledger, saved = checkpointed
    target = checkpoint.path_for(ledger.stream)
    record = json.loads(target.read_bytes())
    record["prefix_sha256"] = "0" * 64
    target.write_text(json.dumps(record))
    folded: list[int] = []
    resets: list[int] = []
    reader = Ledger(core_project, "core", TEST_LAYOUT, on_record=lambda r: folded.append(r.event["n"]),
                    on_reset=lambda: (resets.append(len(folded)), folded.clear()))
    for _ in range(2):
        with pytest.raises(checkpoint.PrefixChanged) as info:
            reader.refresh()
        assert info.value.code is ErrorCode.CORRUPT_LEDGER
        assert f"before the checkpoint at byte {saved.offset} changed" in info.value.reason
        # The events before the checkpointed one were folded while the digest was computed, then dropped.
        assert resets[-1] == saved.sequence - 1 and folded == []
        assert reader.head == (0, None)
    target.unlink()  # the checkpoint is only a cache: without it, the full verify passes
    reader.refresh()
    assert folded == list(range(20))


def test_a_checkpoint_without_a_prefix_digest_is_still_honoured(checkpointed, core_project):
    ledger, saved = checkpointed
    target = checkpoint.path_for(ledger.stream)
    record = json.loads(target.read_bytes())
    del record["prefix_sha256"]  # as written before the digest existed
    target.write_text(json.dumps(record))
    fresh = Ledger(core_project, "core", TEST_LAYOUT)
    assert len(fresh.refresh()) == 20 and fresh.head == ledger.head


def test_a_checkpoint_pointing_into_a_changed_line_is_corrupt_ledger(checkpointed, core_project):
    ledger, saved = checkpointed
    data = bytearray(ledger.stream.path.read_bytes())
    data[saved.line_start + 20] ^= 1  # inside the checkpointed record
    ledger.stream.path.write_bytes(bytes(data))
    with pytest.raises(ChainError) as info:
        Ledger(core_project, "core", TEST_LAYOUT).refresh()
    assert info.value.offset == saved.line_start


@pytest.mark.parametrize("garbage", [b"", b"not json", b'{"dev": 1}', b"[]"])
def test_a_missing_or_garbled_checkpoint_means_a_full_verify(core_project, garbage):
    events, lines = sealed_lines([event(i) for i in range(6)], TEST_LAYOUT)
    lines[2] = lines[2].replace(b'"n":2', b'"n":9')  # a change only re-hashing can see
    write_stream(core_project, "core", b"".join(lines))
    stream = Ledger(core_project, "core", TEST_LAYOUT).stream
    target = checkpoint.path_for(stream)
    target.parent.mkdir(mode=0o700)
    for content in (None, garbage):
        if content is not None:
            target.write_bytes(content)
        with pytest.raises(ChainError) as info:
            Ledger(core_project, "core", TEST_LAYOUT).refresh()
        assert info.value.offset == line_starts(lines)[2]


def test_a_checkpoint_of_a_replaced_file_is_ignored_not_trusted(checkpointed, core_project):
    ledger, saved = checkpointed
    path = ledger.stream.path
    data = path.read_bytes()
    os.unlink(path)
    path.write_bytes(data)  # same bytes, new inode: the checkpoint is someone else's
    os.chmod(path, 0o600)
    fresh = Ledger(core_project, "core", TEST_LAYOUT)
    assert len(fresh.refresh()) == 20


def test_reads_of_a_fresh_project_create_nothing(core_project, data_dir, root):
    before_root = snapshot(root)
    ledger = Ledger(core_project, "core", TEST_LAYOUT)
    assert ledger.refresh() == []
    assert core_project.stream_names() == []
    assert not core_project.exists()
    assert not data_dir.exists()
    assert snapshot(root) == before_root


def test_reads_of_an_existing_project_create_nothing_and_repair_nothing(core_project, data_dir, root):
    with Ledger(core_project, "core", TEST_LAYOUT).mutation() as tx:
        tx.append([event(1)])
    with open(core_project.dir / "streams" / "core.jsonl", "ab") as fh:
        fh.write(b'{"torn')
    before, before_root = snapshot(data_dir), snapshot(root)
    assert len(Ledger(core_project, "core", TEST_LAYOUT).refresh()) == 1
    assert Ledger(core_project, "other", TEST_LAYOUT).refresh() == []  # no lock, no folder for it
    assert Ledger(core_project, "core", TEST_LAYOUT, keep_requests=False).refresh(collect=False) == []
    read_all(core_project, "core", TEST_LAYOUT)
    assert core_project.stream_names() == ["core"]
    assert snapshot(data_dir) == before
    assert snapshot(root) == before_root


def test_a_head_moved_by_hand_writes_no_checkpoint_rather_than_one_without_a_digest(core_project, monkeypatch):
    """A head this process keeps no digest for: a checkpoint without one would let the next
    open skip re-hashing the bytes before it, so none is written."""
    monkeypatch.setattr(checkpoint, "CHECKPOINT_EVERY", 1)
    events, lines = sealed_lines([event(i) for i in range(3)], TEST_LAYOUT)
    write_stream(core_project, "core", b"".join(lines))
    ledger = Ledger(core_project, "core", TEST_LAYOUT)
    ledger.refresh()
    starts = line_starts(lines)
    ledger.stream.position = ledger.stream.position._replace(offset=starts[2], sequence=2, hash=events[1]["event_hash"])
    with ledger.mutation() as tx:
        tx.append([event(9)])
    assert checkpoint.load(ledger.stream) is None
    assert len(Ledger(core_project, "core", TEST_LAYOUT).refresh()) == 4


def test_a_file_cut_below_its_checkpoint_after_the_check_is_still_caught_by_the_scan(checkpointed, core_project):
    """The checkpoint is checked first and its prefix vouched for when the scan reaches it;
    a file that no longer reaches it by then has lost acknowledged events."""
    ledger, saved = checkpointed
    stream = Stream(core_project.dir, "core", TEST_LAYOUT)
    trusted = checkpoint.validate(stream, saved, concurrent=True)
    assert trusted == saved.offset
    with open(stream.path, "r+b") as fh:
        fh.truncate(saved.line_start)
    with pytest.raises(ChainError) as info:
        for _ in stream.read_new(verify_hash_until=trusted):
            pass
    assert "acknowledged events are gone" in info.value.reason


def test_a_prefix_changed_after_its_digest_was_checked_is_caught_where_no_line_ends_at_the_checkpoint(checkpointed, core_project):
    """Belt and braces: the digest matched the bytes it read, but the scan finds the line
    boundaries moved (a byte went in before the checkpoint after the digest was taken)."""
    ledger, saved = checkpointed
    stream = Stream(core_project.dir, "core", TEST_LAYOUT)
    trusted = checkpoint.validate(stream, saved)  # the digest is checked here, before the scan
    data = stream.path.read_bytes()
    stream.path.write_bytes(data.replace(b'"n":3', b'"n":33', 1))
    with pytest.raises(ChainError) as info:
        for _ in stream.read_new(verify_hash_until=trusted):
            pass
    assert "no line ends where the checkpoint says one does" in info.value.reason
