"""What the PostgreSQL store can do beyond the contract's core: verify and recover, the kill switch."""

from __future__ import annotations

import psycopg

from loopstate.core.backend import Recovers, StopSwitch, verify_chain
from pgkit import STREAM, append, names_in, open_pg
from tests.core.corekit import TEST_LAYOUT


def test_an_edited_row_is_reported_by_verify_and_recover_keeps_the_prefix_and_sets_the_rest_aside(pg_url, root, data_dir):
    store = open_pg(pg_url, root, data_dir)
    assert isinstance(store, Recovers)
    for name in ("a", "b", "c", "d"):
        append(store, name)
    assert store.verify_stream(STREAM, TEST_LAYOUT)["ok"] is True
    with psycopg.connect(pg_url, autocommit=True) as conn:  # someone edits a stored line in place
        conn.execute("UPDATE loopstate.events SET line = convert_to(replace(convert_from(line, 'UTF8'), "
                     "'\"c\"', '\"C\"'), 'UTF8') WHERE sequence = 3")
    report = store.verify_stream(STREAM, TEST_LAYOUT)
    assert report["ok"] is False and report["error"]["sequence"] == 3 and report["sequence"] == 2
    done = store.recover_stream(STREAM, TEST_LAYOUT)
    assert (done["action"], done["events"], done["quarantined_events"]) == ("recovered", 2, 2)
    assert names_in(store) == ["a", "b"]
    assert verify_chain(list(store.read(STREAM, TEST_LAYOUT)), TEST_LAYOUT, STREAM).sequence == 2
    set_aside = store.quarantined(STREAM)
    assert [entry["length"] > 0 and len(entry["sha256"]) == 64 for entry in set_aside] == [True, True]
    append(store, "e")  # the stream goes on from its verified head
    assert names_in(store) == ["a", "b", "e"]
    assert store.recover_stream(STREAM, TEST_LAYOUT)["action"] == "none"


def test_a_stop_set_through_one_machine_is_seen_by_another_and_wakes_its_feed(pg_url, root, data_dir):
    here, there = open_pg(pg_url, root, data_dir), open_pg(pg_url, root, data_dir)
    assert isinstance(here, StopSwitch)
    assert there.stopped() is None
    feed = there.changes(None)
    try:
        here.set_stop("release freeze")
        assert feed.wait(30) is True
        seen = there.stopped()
        assert seen is not None and seen["state"] == "present" and seen["reason"] == "release freeze"
        assert seen["by"].startswith("loopstate ")
        here.clear_stop()
        assert there.stopped() is None
    finally:
        feed.close()


def test_the_kill_switch_is_read_inside_a_section_beside_the_append_it_allows(pg_url, root, data_dir):
    """The check and the append run in the section's one transaction (on the thread's connection)."""
    store = open_pg(pg_url, root, data_dir)
    with store.exclusive(STREAM):
        assert store.stopped() is None
        append(store, "allowed")
    open_pg(pg_url, root, data_dir).set_stop("stop now")
    assert store.stopped() is not None
    assert names_in(store) == ["allowed"]


def test_a_long_lived_fold_on_another_machine_follows_a_recovery_instead_of_keeping_the_cut_events(
        pg_url, root, data_dir):
    """A process that folded past the cut (another machine's sidecar) reads the stream from its first event
    again, once, and then appends after the kept head: not a stale fold, nor writes refused forever."""
    here, there = open_pg(pg_url, root, data_dir), open_pg(pg_url, root, data_dir)
    resets: list[int] = []
    folded: list[object] = []
    ledger = there.open_ledger(STREAM, TEST_LAYOUT, on_record=lambda r: folded.append(r.event["n"]),
                               on_reset=lambda: (resets.append(1), folded.clear()))
    for name in ("a", "b", "c", "d", "e"):
        append(here, name)
    assert [r.event["n"] for r in ledger.refresh()] == ["a", "b", "c", "d", "e"]
    assert ledger.refresh() == []  # nothing new: its own head is still there as folded
    with psycopg.connect(pg_url, autocommit=True) as conn:
        conn.execute("UPDATE loopstate.events SET line = convert_to(replace(convert_from(line, 'UTF8'), "
                     "'\"d\"', '\"D\"'), 'UTF8') WHERE sequence = 4")
    assert here.recover_stream(STREAM, TEST_LAYOUT)["events"] == 3
    assert [r.event["n"] for r in ledger.refresh()] == ["a", "b", "c"] and resets == [1]
    assert folded == ["a", "b", "c"] and ledger.head[0] == 3

    append(here, "x")  # appended after the recovery by the other machine
    assert [r.event["n"] for r in ledger.refresh()] == ["x"] and resets == [1]
    with ledger.mutation() as tx:
        tx.append([{"n": "y", "schema_version": 1}])
    assert names_in(here) == ["a", "b", "c", "x", "y"] and folded == ["a", "b", "c", "x", "y"]

    with psycopg.connect(pg_url, autocommit=True) as conn:  # cut again, then grown past the old head
        conn.execute("UPDATE loopstate.events SET line = convert_to(replace(convert_from(line, 'UTF8'), "
                     "'\"x\"', '\"X\"'), 'UTF8') WHERE sequence = 4")
    here.recover_stream(STREAM, TEST_LAYOUT)
    for name in ("p", "q", "r"):
        append(here, name)
    with ledger.mutation() as tx:  # the re-fold happens inside the mutation, which appends after the new head
        tx.append([{"n": "z", "schema_version": 1}])
    assert names_in(here) == ["a", "b", "c", "p", "q", "r", "z"] and folded == names_in(here) and resets == [1, 1]
