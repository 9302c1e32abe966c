"""The live check of verified bytes, on real ledgers and real files: what it catches,
what it must not mistake for a change, and that its own appends stay one stat."""

from __future__ import annotations

import hashlib
import os
from pathlib import Path

import pytest

from corekit import TEST_LAYOUT, event, sealed_lines
from loopstate_protocol.errors import ErrorCode

from loopstate.core.chain import ChainError
from loopstate.core.stream import Stream


def stream_file(ledger) -> Path:
    return ledger.stream.path


def append(ledger, *numbers: int) -> None:
    with ledger.mutation() as tx:
        tx.append([event(n) for n in numbers])


def edit_in_place(path: Path, old: bytes, new: bytes) -> None:
    at = path.read_bytes().index(old)
    with open(path, "r+b") as out:
        out.seek(at)
        out.write(new)


def test_an_own_append_leaves_the_one_stat_fast_path_in_place(new_ledger) -> None:
    ledger = new_ledger()
    append(ledger, 1)
    for n in range(2, 6):
        append(ledger, n)
        assert ledger.stream.unchanged()  # the next catch-up is one fstat, no re-read


def test_an_edit_in_place_is_refused_and_stays_refused_until_the_bytes_are_back(new_ledger) -> None:
    ledger = new_ledger()
    append(ledger, 1, 2, 3)
    path = stream_file(ledger)
    original = path.read_bytes()
    edit_in_place(path, b'"n":2', b'"n":7')
    for _ in range(2):  # the same verdict while the file stays as it is
        with pytest.raises(ChainError) as refused:
            ledger.refresh()
        assert refused.value.code is ErrorCode.CORRUPT_LEDGER and refused.value.sequence == 2
    with pytest.raises(ChainError):
        append(ledger, 4)
    assert path.read_bytes().count(b"\n") == 3
    edit_in_place(path, b'"n":7', b'"n":2')
    assert path.read_bytes() == original
    ledger.refresh()
    append(ledger, 4)
    assert ledger.head[0] == 4


def test_a_changed_stat_with_the_same_bytes_is_not_a_change(new_ledger) -> None:
    ledger = new_ledger()
    append(ledger, 1, 2)
    os.chmod(stream_file(ledger), 0o600)  # ctime moves, no byte does
    assert not ledger.stream.unchanged()
    ledger.refresh()
    assert ledger.stream.unchanged()  # the new stat is the one seen now
    append(ledger, 3)
    assert ledger.head[0] == 3


def test_a_torn_tail_cut_by_another_process_is_not_a_change(new_ledger) -> None:
    watching, other = new_ledger(), new_ledger()
    append(other, 1, 2)
    with open(stream_file(other), "ab") as out:
        out.write(b'{"half a line')
    watching.refresh()
    assert watching.stream.torn is not None
    with other.mutation():
        pass  # only cuts the torn tail: the file shrinks back to the verified head
    watching.refresh()
    assert watching.stream.torn is None and watching.head[0] == 2
    append(other, 3)
    assert [r.event["n"] for r in watching.refresh()] == [3]


def test_an_edit_of_the_head_record_hidden_behind_growth_is_caught(new_ledger) -> None:
    watching, other = new_ledger(), new_ledger()
    append(other, 1, 2)
    watching.refresh()
    path = stream_file(other)
    edit_in_place(path, b'"n":2', b'"n":8')
    with open(path, "ab") as out:
        out.write(b"\n")  # growth: the new bytes alone would only be a blank line to report
    with pytest.raises(ChainError) as refused:
        watching.refresh()
    assert refused.value.sequence == 2 and "event_hash" in refused.value.reason


def test_growth_by_another_ledger_is_read_as_news(new_ledger) -> None:
    watching, other = new_ledger(), new_ledger()
    append(other, 1)
    watching.refresh()
    append(other, 2, 3)
    assert [r.event["n"] for r in watching.refresh()] == [2, 3]
    assert watching.stream.unchanged()


def test_a_consistent_same_size_rechain_written_in_place_is_still_a_change(new_ledger) -> None:
    """Every record verifies after the rewrite, so no single record is to blame: the
    prefix digest still tells, and the error says what changed."""
    ledger = new_ledger()
    for n in (1, 2, 3):  # one command each: no batch markers, so the forgery below is the same length
        append(ledger, n)
    path = stream_file(ledger)
    _, lines = sealed_lines([event(1), event(7), event(3)], TEST_LAYOUT)  # a valid chain, same length
    forged = b"".join(lines)
    assert len(forged) == path.stat().st_size and forged != path.read_bytes()
    with open(path, "r+b") as out:
        out.write(forged)
    with pytest.raises(ChainError) as refused:
        ledger.refresh()
    assert "not the ones that were verified" in refused.value.reason


def test_a_head_without_a_digest_verifies_the_chain_again_when_the_file_is_written_in_place(new_ledger, core_project) -> None:
    """A stream started from a snapshot the verified mark vouched for keeps no digest of
    the bytes before its head: a stat change without growth re-verifies every record from
    byte 0. A chmod (ctime moves, no byte does) is no change, and the digest that verify
    computed is the stream's from then on; a consistent same-size re-chain is one."""
    ledger = new_ledger()
    for n in (1, 2, 3):
        append(ledger, n)
    by_hand = Stream(core_project.dir, ledger.name, TEST_LAYOUT)  # as a reader starting from a marked snapshot does
    by_hand.position, by_hand.identity = ledger.stream.position, ledger.stream.identity
    assert list(by_hand.read_new()) == [] and by_hand.prefix_digest() is None
    path = stream_file(ledger)
    os.chmod(path, 0o600)
    assert list(by_hand.read_new()) == []
    assert by_hand.prefix_digest() == hashlib.sha256(path.read_bytes()).hexdigest()
    by_hand.digest, by_hand._digest_at = None, -1  # without one again
    _, lines = sealed_lines([event(1), event(7), event(3)], TEST_LAYOUT)  # a valid chain, same length
    forged = b"".join(lines)
    assert len(forged) == path.stat().st_size and forged != path.read_bytes()
    with open(path, "r+b") as out:
        out.write(forged)
    with pytest.raises(ChainError) as refused:
        list(by_hand.read_new())
    assert "not the ones that were verified" in refused.value.reason
