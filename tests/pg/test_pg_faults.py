"""Faults with a real PostgreSQL server: killed backends, a lost LISTEN, racing machines,
aborted transactions, exact retries, a server that is not there."""

from __future__ import annotations

import json
import subprocess
import sys
import threading
from pathlib import Path

import psycopg
import pytest

from loopstate_protocol.errors import ErrorCode

from loopstate.core.backend import EMPTY, Head, verify_chain
from loopstate.core.errors import LoopstateError
from loopstate.core.project import Project
from loopstate.core.stores import open_store
from pgkit import (
    STREAM, append, backends, lines_after, names_in, open_pg, terminate, wait_for, waiting_on_a_lock,
)
from tests.core.corekit import TEST_LAYOUT

CHILD = Path(__file__).resolve().parent / "pg_child.py"


def test_a_backend_killed_while_an_append_waits_is_retried_once_and_lands_exactly_once(pg_url, root, data_dir):
    holder, writer = open_pg(pg_url, root, data_dir), open_pg(pg_url, root, data_dir, lock_timeout=30)
    head = append(holder, "first")
    entered, released = threading.Event(), threading.Event()
    result: list[object] = []

    def hold() -> None:
        with holder.exclusive(STREAM):
            entered.set()
            released.wait(30)

    def write() -> None:
        try:
            result.append(writer.append(STREAM, TEST_LAYOUT, lines_after(head, "second"), expected=head))
        except BaseException as exc:
            result.append(exc)

    holding = threading.Thread(target=hold)
    holding.start()
    assert entered.wait(30)
    writing = threading.Thread(target=write)
    writing.start()
    victims = wait_for(lambda: waiting_on_a_lock(pg_url), what="the append to wait for the section")
    terminate(pg_url, victims)  # the server process serving the append dies mid-call
    wait_for(lambda: set(waiting_on_a_lock(pg_url)) - set(victims), what="the retry on a new connection")
    released.set()
    holding.join(30)
    writing.join(30)
    assert isinstance(result[0], Head), result
    assert result[0].sequence == 2
    assert names_in(writer) == ["first", "second"]


def test_an_append_whose_answer_was_lost_after_it_committed_is_recognised_not_doubled(pg_url, root, data_dir):
    """What the retry after a lost connection meets when the first attempt had committed:
    the same batch at the same head, byte for byte (with or without a request id)."""
    store = open_pg(pg_url, root, data_dir)
    batch = lines_after(EMPTY, "once")
    first = store.append(STREAM, TEST_LAYOUT, batch, expected=EMPTY)
    with psycopg.connect(pg_url, autocommit=True) as conn:
        row = conn.execute(
            "SELECT status FROM loopstate.append(%s, %s, 0, NULL, %s, %s, %s, NULL, NULL)",
            (store.key, STREAM, [batch[0].line], [batch[0].hash], [None]),
        ).fetchone()
    assert row[0] == "conflict"  # the server alone cannot know; the client's retry path can:
    again = store.call_append(store.events.conn, STREAM, EMPTY, batch, None, None, retrying=True)
    assert (again.status, again.last) == ("duplicate", 1)
    assert first == Head(1, batch[0].hash)
    assert names_in(store) == ["once"]


def test_a_transaction_aborted_after_the_insert_keeps_nothing_in_the_table_or_the_fold(pg_url, root, data_dir):
    store = open_pg(pg_url, root, data_dir)
    folded: list[object] = []
    resets: list[int] = []
    ledger = store.open_ledger(STREAM, TEST_LAYOUT, on_record=lambda r: folded.append(r.event["n"]),
                               on_reset=lambda: (folded.clear(), resets.append(1)))
    with ledger.mutation() as tx:
        tx.append([{"n": "kept", "schema_version": 1}])
    with pytest.raises(RuntimeError), ledger.mutation() as tx:
        tx.append([{"n": "rolled back", "schema_version": 1}])
        assert folded == ["kept", "rolled back"]  # folded at the insert...
        raise RuntimeError("the command failed after its append")
    assert resets == [1] and names_in(store) == ["kept"]  # ...and dropped with the rollback
    with ledger.mutation() as tx:
        assert folded == ["kept"]  # refolded from the table on the way in
        tx.append([{"n": "next", "schema_version": 1}])
    assert names_in(store) == ["kept", "next"] and folded == ["kept", "next"]


def test_a_backend_killed_before_a_mutation_commits_loses_the_batch_cleanly(pg_url, root, data_dir):
    store = open_pg(pg_url, root, data_dir)
    folded: list[object] = []
    ledger = store.open_ledger(STREAM, TEST_LAYOUT, on_record=lambda r: folded.append(r.event["n"]),
                               on_reset=folded.clear)
    with ledger.mutation() as tx:
        tx.append([{"n": "kept", "schema_version": 1}])
    with pytest.raises(LoopstateError) as caught, ledger.mutation() as tx:
        tx.append([{"n": "never committed", "schema_version": 1}])
        terminate(pg_url, backends(pg_url, "loopstate %pid%"))  # the server process dies before the commit
    assert caught.value.code is ErrorCode.STORE_IO_ERROR
    assert names_in(store) == ["kept"]  # a new connection, the same truth
    with ledger.mutation() as tx:
        tx.append([{"n": "after", "schema_version": 1}])
    assert folded == ["kept", "after"] and names_in(store) == ["kept", "after"]


def test_a_feed_whose_connection_is_killed_reconnects_and_its_reader_misses_nothing(pg_url, root, data_dir):
    writer, reader = open_pg(pg_url, root, data_dir), open_pg(pg_url, root, data_dir)
    append(writer, "before")
    ledger = reader.open_ledger(STREAM, TEST_LAYOUT)
    assert [r.event["n"] for r in ledger.catch_up().records] == ["before"]
    heard: list[str | None] = []
    feed = reader.changes([STREAM], on_change=heard.append)
    try:
        terminate(pg_url, backends(pg_url, "% feed"))  # the LISTENing connection is gone
        append(writer, "while away")  # committed while nobody listens: its NOTIFY reaches no one
        assert feed.wait(30) is True  # the reconnect's own wake
        assert feed.connects == 2
        assert [r.event["n"] for r in ledger.catch_up().records] == ["while away"]
        append(writer, "after")
        assert wait_for(lambda: feed.wait(1), what="the notification after the reconnect")
        assert [r.event["n"] for r in ledger.catch_up().records] == ["after"]
        assert heard.count(None) >= 1 and STREAM in heard
    finally:
        feed.close()


def test_two_machines_appending_at_the_same_head_one_wins_and_the_other_retries_exactly(pg_url, root, data_dir, tmp_path):
    go = tmp_path / "go"
    children = [
        subprocess.Popen([sys.executable, str(CHILD), pg_url, str(root), str(data_dir), name, str(go)],
                         stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
        for name in ("machine-a", "machine-b")
    ]
    wait_for(lambda: len(backends(pg_url, "loopstate %pid%")) >= 2, what="both children connected")
    go.touch()
    results = []
    for child in children:
        out, err = child.communicate(timeout=120)
        assert child.returncode == 0, err
        results.append(json.loads(out))
    assert sorted(r["sequence"] for r in results) == [1, 2]
    loser = next(r for r in results if r["sequence"] == 2)
    winner = next(r for r in results if r["sequence"] == 1)
    assert winner["conflicts"] == [] and loser["conflicts"] == [[0, 1]]  # typed: expected 0, found 1
    store = open_pg(pg_url, root, data_dir)
    assert sorted(names_in(store)) == ["machine-a", "machine-b"]
    assert verify_chain(list(store.read(STREAM, TEST_LAYOUT)), TEST_LAYOUT, STREAM).sequence == 2


def test_an_exact_retry_by_request_id_after_a_restart_appends_nothing(pg_url, root, data_dir):
    first = open_pg(pg_url, root, data_dir).open_ledger(STREAM, TEST_LAYOUT)
    with first.mutation() as tx:
        records = tx.append([{"n": "a", "schema_version": 1}, {"n": "b", "schema_version": 1}], request_id="req-1",
                            fp="fp-1")
    restarted = open_pg(pg_url, root, data_dir).open_ledger(STREAM, TEST_LAYOUT)
    for _ in range(3):
        with restarted.mutation() as tx:
            earlier = tx.earlier("req-1", "fp-1")
            assert earlier is not None and [r.event for r in earlier] == [r.event for r in records]
            assert [(r.start, r.end) for r in earlier] == [(r.start, r.end) for r in records]
    with restarted.mutation() as tx, pytest.raises(LoopstateError) as caught:
        tx.earlier("req-1", "fp-other")
    assert caught.value.code is ErrorCode.REQUEST_ID_REUSED
    store = open_pg(pg_url, root, data_dir)
    assert names_in(store) == ["a", "b"]
    # The server's own check: the same request id sent again at a later head is not appended.
    batch = lines_after(Head(*first.head), "a-again")
    with psycopg.connect(pg_url, autocommit=True) as conn:
        status = conn.execute(
            "SELECT status FROM loopstate.append(%s, %s, 2, %s, %s, %s, %s, 'req-1', 'fp-1')",
            (store.key, STREAM, first.head[1], [batch[0].line], [batch[0].hash], [first.head[1]]),
        ).fetchone()[0]
    assert status == "duplicate" and names_in(store) == ["a", "b"]


def test_a_server_that_is_not_there_is_a_clear_error_naming_the_url_without_its_password(root, data_dir, tmp_path):
    nobody = tmp_path / "no-server"
    nobody.mkdir()
    for url in (f"postgresql://alice:s3cret@/teamdb?host={nobody}",
                f"postgresql:///teamdb?host={nobody}&user=alice&password=s3cret"):
        store = open_store(Project(str(root), data_dir=data_dir), url)
        with pytest.raises(LoopstateError) as caught:
            store.head(STREAM, TEST_LAYOUT)
        error = caught.value
        assert error.code is ErrorCode.STORE_IO_ERROR
        assert "s3cret" not in error.message and "s3cret" not in json.dumps(error.details)
        assert "teamdb" in error.message and "check that the server is up" in error.message
        assert "s3cret" not in store.url


def test_a_wait_for_a_held_section_times_out_naming_the_holder(pg_url, root, data_dir):
    holder, waiter = open_pg(pg_url, root, data_dir), open_pg(pg_url, root, data_dir, lock_timeout=0.3)
    with holder.exclusive("runs.r1"):
        with pytest.raises(LoopstateError) as caught:
            with waiter.exclusive("runs.r1"):
                pass
    error = caught.value
    assert error.code is ErrorCode.LOCK_TIMEOUT
    assert "runs.r1" in error.message and "loopstate " in error.message and "pid" in error.message
    with waiter.exclusive("runs.r1"):  # let go: the same section is free again
        pass


def test_an_append_refused_inside_a_mutation_rolls_the_whole_mutation_back(pg_url, root, data_dir):
    """The mutation's append is read back only with its commit; a refusal there (a writer that
    bypassed the lock put a row at the head) aborts everything and drops the fold."""
    store = open_pg(pg_url, root, data_dir)
    folded: list[object] = []
    ledger = store.open_ledger(STREAM, TEST_LAYOUT, on_record=lambda r: folded.append(r.event["n"]),
                               on_reset=folded.clear)
    with ledger.mutation() as tx:
        tx.append([{"n": "kept", "schema_version": 1}])
    rogue = lines_after(Head(*ledger.head), "rogue", start=0)
    with pytest.raises(LoopstateError) as caught, ledger.mutation() as tx:
        with psycopg.connect(pg_url, autocommit=True) as conn:  # no lock taken: what the function never does
            conn.execute("INSERT INTO loopstate.events (project, stream, sequence, event_hash, prev_hash, start, line) "
                         "VALUES (%s, %s, 2, %s, %s, 0, %s)", (store.key, STREAM, rogue[0].hash, ledger.head[1], rogue[0].line))
        tx.append([{"n": "mine", "schema_version": 1}])
    assert caught.value.code is ErrorCode.CONFLICT and "nothing of the mutation was kept" in caught.value.message
    assert folded == []  # dropped (on_reset), refolded from the table on the next use
    with psycopg.connect(pg_url) as conn:
        assert conn.execute("SELECT count(*) FROM loopstate.events").fetchone()[0] == 2  # kept + the rogue row
    # The refusal came with the COMMIT: the connection was rolled back, not left in a failed transaction.
    assert store.stream_names() == [STREAM]
    with store.exclusive("leases"):
        assert store.stopped() is None


def test_a_section_inside_a_section_is_a_savepoint_rolled_back_alone(pg_url, root, data_dir):
    """On one thread a mutation inside an exclusive section joins its transaction: the inner one's
    failure undoes only its own append, and the outer section's work commits."""
    store = open_pg(pg_url, root, data_dir)
    ledger = store.open_ledger(STREAM, TEST_LAYOUT)
    with store.exclusive("leases"):
        with ledger.mutation() as tx:
            tx.append([{"n": "inner kept", "schema_version": 1}])
        with pytest.raises(RuntimeError), ledger.mutation() as tx:
            tx.append([{"n": "inner undone", "schema_version": 1}])
            raise RuntimeError("the inner command failed after its append")
        append(store, "outer", stream="other")
    assert names_in(store) == ["inner kept"] and names_in(store, "other") == ["outer"]
    with pytest.raises(RuntimeError), store.exclusive("leases"):
        append(store, "never", stream="other")
        raise RuntimeError("the outer section failed")
    assert names_in(store, "other") == ["outer"]


def test_a_section_inside_a_mutation_joins_it_and_commits_or_rolls_back_with_it(pg_url, root, data_dir):
    """An outermost mutation sends no BEGIN (its pipeline's sync commits it); a section opened
    inside it makes it a transaction block first, so the inner savepoint works and what the
    mutation did before it is kept, or undone with it."""
    store = open_pg(pg_url, root, data_dir)
    ledger = store.open_ledger(STREAM, TEST_LAYOUT)
    with ledger.mutation() as tx:
        tx.append([{"n": "before the section", "schema_version": 1}])
        with store.exclusive("leases"):
            append(store, "in the section", stream="other")
        assert advisory_locks(pg_url) == 3  # the stream's, the section's and "other"'s: nothing committed early
        with pytest.raises(RuntimeError), store.exclusive("leases"):
            append(store, "section undone", stream="other")
            raise RuntimeError("the inner section failed")
        tx.append([{"n": "after the section", "schema_version": 1}])
    assert names_in(store) == ["before the section", "after the section"]
    assert names_in(store, "other") == ["in the section"]
    with pytest.raises(RuntimeError), ledger.mutation() as tx:
        tx.append([{"n": "never", "schema_version": 1}])
        with store.exclusive("leases"):
            append(store, "never either", stream="other")
        raise RuntimeError("the mutation failed after its section")
    assert names_in(store) == ["before the section", "after the section"]
    assert names_in(store, "other") == ["in the section"]
    assert advisory_locks(pg_url) == 0  # none left behind by either transaction


def advisory_locks(pg_url: str) -> int:
    """How many advisory locks the server's clients hold now, seen from a connection of its own."""
    with psycopg.connect(pg_url) as conn:
        return conn.execute("SELECT count(*) FROM pg_locks WHERE locktype = 'advisory' AND granted").fetchone()[0]


def test_a_mutation_waiting_for_a_held_stream_times_out_naming_the_holder(pg_url, root, data_dir):
    """The mutation's lock is taken by its first read: a wait that runs out is LOCK_TIMEOUT, not a lost server."""
    holder, waiter = open_pg(pg_url, root, data_dir), open_pg(pg_url, root, data_dir, lock_timeout=0.3)
    ledger = waiter.open_ledger(STREAM, TEST_LAYOUT)
    with holder.exclusive(STREAM):
        with pytest.raises(LoopstateError) as caught, ledger.mutation() as tx:
            tx.append([{"n": "never", "schema_version": 1}])
    assert caught.value.code is ErrorCode.LOCK_TIMEOUT and "pid" in caught.value.message
    with ledger.mutation() as tx:  # the same connection, free again
        tx.append([{"n": "after", "schema_version": 1}])
    assert names_in(waiter) == ["after"]
