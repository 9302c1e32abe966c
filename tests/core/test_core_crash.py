"""Crash safety with real processes killed by SIGKILL, and torn tails written by hand.

After every kill: every append the child acknowledged (printed after the call
returned) is in the stream with its content, the chain verifies from byte 0,
and the next mutation quarantines a torn tail by length and SHA-256 only, cuts
it, and appends after it.
"""

from __future__ import annotations

import random
import signal
import time

import pytest

from corekit import event, read_all, sealed_lines, sha256, spawn, write_stream
from loopstate.core import canonical, quarantine, safefs
from loopstate.core.chain import ChainError
from loopstate.core.ledger import Ledger
from loopstate_protocol.errors import ErrorCode

from corekit import TEST_LAYOUT

QUARANTINE_KEYS = {"stream", "offset", "length", "sha256", "reason", "at"}
KILLS = 200


def _run_then_kill(child, rng: random.Random) -> list[tuple[int, str, int]]:
    """Let the child run a random moment (usually past its first ack), SIGKILL it, collect its acks."""
    early = []
    if rng.random() < 0.8:
        early.append(child.stdout.readline())
    time.sleep(rng.uniform(0, 0.03))
    child.send_signal(signal.SIGKILL)
    out, _ = child.communicate()
    assert child.returncode == -signal.SIGKILL
    return [(int(s), w, int(i)) for s, w, i in (line.split() for line in early + out.splitlines() if line.strip())]


@pytest.mark.slow
def test_every_acknowledged_append_survives_sigkill_and_torn_tails_are_quarantined(core_project, data_dir):
    rng = random.Random(20261129)
    acked: dict[int, tuple[str, int]] = {}
    torn_seen = 0
    parent = Ledger(core_project, "core", TEST_LAYOUT)
    for round_ in range(KILLS):
        # Large events (up to ~360 KB) make a kill in the middle of write() likely.
        pad = rng.choice([0, 40, 4000, 60000])
        child = spawn(data_dir, "append", core_project.root, "core", f"w{round_}", "100000", str(pad))
        for seq, writer, i in _run_then_kill(child, rng):
            acked[seq] = (writer, i)

        events, stream = read_all(core_project, "core", TEST_LAYOUT)  # raises if the chain broke
        by_seq = {e["sequence"]: e for e in events}
        for seq, (writer, i) in acked.items():
            assert (by_seq[seq].get("writer"), by_seq[seq].get("i")) == (writer, i), f"acknowledged sequence {seq} lost"

        before = quarantine.entries(core_project.dir, "core")
        torn = stream.torn
        torn_bytes = None
        if torn is not None:
            torn_seen += 1
            with open(stream.path, "rb") as fh:
                fh.seek(torn.offset)
                torn_bytes = fh.read()
        with parent.mutation() as tx:
            (record,) = tx.append([{"schema_version": 1, "event_type": "parent", "round": round_}])
        acked[record.event["sequence"]] = (None, None)
        after = quarantine.entries(core_project.dir, "core")
        if torn is None:
            assert after == before
        else:
            (entry,) = after[len(before):]
            assert set(entry) == QUARANTINE_KEYS
            assert (entry["offset"], entry["length"], entry["sha256"]) == (torn.offset, len(torn_bytes), sha256(torn_bytes))
            assert record.start == torn.offset
    final, stream = read_all(core_project, "core", TEST_LAYOUT)
    assert stream.torn is None
    assert [e["sequence"] for e in final] == list(range(1, len(final) + 1))
    assert len(acked) == len({(w, i) for w, i in acked.values() if w is not None}) + KILLS
    # Torn tails from a real SIGKILL are rare (a write of a few KB is nearly
    # atomic in the page cache); the hand-written tails below make them certain.
    print(f"{KILLS} kills, {len(final)} events, {torn_seen} torn tails quarantined")


@pytest.mark.slow
def test_group_commit_acknowledges_only_durable_appends_across_sigkills(core_project, data_dir):
    """Four threads in a child share fsyncs through Ledger.submit; kill it 50 times."""
    rng = random.Random(7)
    acked: dict[int, tuple[str, int]] = {}
    for round_ in range(50):
        child = spawn(data_dir, "group", core_project.root, "core", f"g{round_}", "4")
        for seq, writer, i in _run_then_kill(child, rng):
            assert seq not in acked, f"sequence {seq} acknowledged twice"
            acked[seq] = (writer, i)
        events, _ = read_all(core_project, "core", TEST_LAYOUT)
        by_seq = {e["sequence"]: (e["writer"], e["i"]) for e in events}
        assert all(by_seq.get(seq) == who for seq, who in acked.items()), "an acknowledged grouped append was lost"
    assert len(acked) > 50
    print(f"50 kills, {len(acked)} grouped appends acknowledged, {len(events)} events")


@pytest.mark.parametrize("keep", [1, 17, "all-but-newline"])
def test_next_mutation_quarantines_a_hand_written_partial_line_and_appends_after_it(core_project, keep):
    all_events, all_lines = sealed_lines([event(i) for i in range(4)], TEST_LAYOUT)
    events, lines, next_line = all_events[:3], all_lines[:3], all_lines[3]
    partial = next_line[:-1] if keep == "all-but-newline" else next_line[:keep]
    good = b"".join(lines)
    path = write_stream(core_project, "core", good + partial)

    # Reads report the tail and repair nothing.
    replayed, stream = read_all(core_project, "core", TEST_LAYOUT)
    assert replayed == events
    assert (stream.torn.offset, stream.torn.length) == (len(good), len(partial))
    Ledger(core_project, "core", TEST_LAYOUT).refresh()
    assert path.read_bytes() == good + partial
    assert quarantine.entries(core_project.dir, "core") == []

    with Ledger(core_project, "core", TEST_LAYOUT).mutation() as tx:
        (record,) = tx.append([event(99)])
    (entry,) = quarantine.entries(core_project.dir, "core")
    assert set(entry) == QUARANTINE_KEYS
    assert (entry["offset"], entry["length"], entry["sha256"]) == (len(good), len(partial), sha256(partial))
    # The summary is all the quarantine holds: the bytes themselves are never kept.
    assert (core_project.dir / "quarantine" / "core.jsonl").read_bytes() == canonical.encode(entry) + b"\n"
    assert record.event["sequence"] == 4 and record.start == len(good)
    assert [e["n"] for e in read_all(core_project, "core", TEST_LAYOUT)[0]] == [0, 1, 2, 99]


def test_orphan_temp_files_of_ours_are_removed_under_the_lock_and_others_are_kept(core_project, new_ledger):
    with new_ledger().mutation() as tx:
        tx.append([event(1)])
    streams = core_project.dir / "streams"
    ours = safefs.temp_name(streams / "core.jsonl")
    ours.write_bytes(b"half a rewrite")
    theirs = streams / "notes.txt"
    theirs.write_bytes(b"not ours")
    new_ledger().refresh()
    assert ours.exists()  # reads never repair
    with new_ledger().mutation() as tx:
        tx.append([event(2)])
    assert not ours.exists()
    assert theirs.read_bytes() == b"not ours"


def test_a_malformed_middle_record_stops_mutation_and_reads_report_it_without_repair(core_project, new_ledger):
    events, lines = sealed_lines([event(i) for i in range(4)], TEST_LAYOUT)
    lines[1] = lines[1].replace(b'"n":1', b'"n":7')
    data = b"".join(lines)
    path = write_stream(core_project, "core", data)
    for attempt in (lambda: new_ledger().refresh(), lambda: new_ledger().mutation().__enter__()):
        with pytest.raises(ChainError) as info:
            attempt()
        assert info.value.code is ErrorCode.CORRUPT_LEDGER
        assert (info.value.offset, info.value.sequence) == (len(lines[0]), 2)
        assert "loopstate verify" in info.value.message
    assert path.read_bytes() == data
    assert not (core_project.dir / "quarantine").exists()


def test_a_crash_between_summary_and_cut_does_not_summarize_twice(core_project):
    events, lines = sealed_lines([event(i) for i in range(3)], TEST_LAYOUT)
    good, partial = b"".join(lines[:2]), lines[2][:25]
    write_stream(core_project, "core", good + partial)
    # What the crashed repair left behind: the summary is durable, the tail not yet cut.
    quarantine.record(core_project.dir, "core", {
        "offset": len(good), "length": len(partial), "sha256": sha256(partial),
        "reason": "partial final line", "at": "2026-01-01T00:00:00Z",
    })
    with Ledger(core_project, "core", TEST_LAYOUT).mutation() as tx:
        tx.append([event(7)])
    assert len(quarantine.entries(core_project.dir, "core")) == 1
    assert [e["n"] for e in read_all(core_project, "core", TEST_LAYOUT)[0]] == [0, 1, 7]


def test_a_summary_cut_short_by_a_crash_does_not_swallow_the_next(core_project):
    events, lines = sealed_lines([event(i) for i in range(3)], TEST_LAYOUT)
    good, partial = b"".join(lines[:2]), lines[2][:25]
    write_stream(core_project, "core", good + partial)
    folder = core_project.dir / "quarantine"
    folder.mkdir(mode=0o700)
    (folder / "core.jsonl").write_bytes(b'{"stream":"core","offset":1,"len')  # a crash mid-summary
    with Ledger(core_project, "core", TEST_LAYOUT).mutation() as tx:
        tx.append([event(7)])
    (entry,) = quarantine.entries(core_project.dir, "core")
    assert (entry["offset"], entry["length"], entry["sha256"]) == (len(good), len(partial), sha256(partial))
    assert (folder / "core.jsonl").read_bytes().startswith(b'{"stream":"core","offset":1,"len\n')
