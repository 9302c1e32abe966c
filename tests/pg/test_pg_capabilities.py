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
