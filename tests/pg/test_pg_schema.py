"""The PostgreSQL store's own rules, beyond the shared suite: schema, server-side links, commit order."""

from __future__ import annotations

import subprocess
import sys
import threading

import psycopg
import pytest

from loopstate_protocol.errors import ErrorCode

from loopstate.core.backend import EMPTY, Head, HeadConflict, verify_chain
from loopstate.core.errors import LoopstateError
from loopstate.core.postgres import schema
from pgkit import STREAM, append, lines_after, names_in, open_pg
from tests.core.corekit import TEST_LAYOUT


def test_the_schema_is_made_once_versioned_and_a_newer_one_is_refused_untouched(pg_url, root, data_dir):
    store = open_pg(pg_url, root, data_dir)
    append(store, "a")
    open_pg(pg_url, root, data_dir).head(STREAM, TEST_LAYOUT)  # a second client finds it as it is
    with psycopg.connect(pg_url, autocommit=True) as conn:
        assert conn.execute("SELECT value FROM loopstate.meta WHERE key = 'schema_version'").fetchone()[0] == str(schema.SCHEMA_VERSION)
        conn.execute("UPDATE loopstate.meta SET value = %s WHERE key = 'schema_version'", (str(schema.SCHEMA_VERSION + 1),))
    with pytest.raises(LoopstateError) as caught:
        open_pg(pg_url, root, data_dir).head(STREAM, TEST_LAYOUT)
    assert caught.value.code is ErrorCode.FUTURE_SCHEMA
    assert "upgrade loopstate" in caught.value.message
    with psycopg.connect(pg_url) as conn:  # refused, not altered: the events are still there
        assert conn.execute("SELECT count(*) FROM loopstate.events").fetchone()[0] == 1


def test_a_version_1_schema_is_brought_to_this_version_keeping_its_events(pg_url, root, data_dir):
    """Version 2 added the mutation's first statement (``lock_and_read``); a database a version 1
    client made gets it from the next client that connects, events untouched."""
    store = open_pg(pg_url, root, data_dir)
    append(store, "a")
    store.close()
    with psycopg.connect(pg_url, autocommit=True) as conn:
        conn.execute("DROP FUNCTION loopstate.lock_and_read(text, text, bigint, int)")
        conn.execute("UPDATE loopstate.meta SET value = '1' WHERE key = 'schema_version'")
    again = open_pg(pg_url, root, data_dir)
    ledger = again.open_ledger(STREAM, TEST_LAYOUT)
    with ledger.mutation() as tx:
        tx.append([{"n": "b", "schema_version": 1}])
    assert names_in(again) == ["a", "b"]
    with psycopg.connect(pg_url) as conn:
        assert conn.execute("SELECT value FROM loopstate.meta WHERE key = 'schema_version'").fetchone()[0] == "2"



def function_source(url: str, name: str) -> str:
    with psycopg.connect(url) as conn:
        return conn.execute("SELECT prosrc FROM pg_proc WHERE oid = %s::regproc", (name,)).fetchone()[0]


def meta(url: str) -> dict[str, str]:
    with psycopg.connect(url) as conn:
        return dict(conn.execute("SELECT key, value FROM loopstate.meta").fetchall())


def test_older_function_bodies_are_replaced_once_by_a_newer_client_and_newer_ones_kept(pg_url, root, data_dir):
    """Function bodies change within a schema version (their arguments and answers do not): a
    database whose functions predate this client's revision gets this client's bodies, events
    untouched; one a newer client wrote keeps its bodies, so two machines never swap them."""
    store = open_pg(pg_url, root, data_dir)
    append(store, "a")
    store.close()
    assert meta(pg_url) == {"schema_version": str(schema.SCHEMA_VERSION), "functions_revision": str(schema.FUNCTIONS_REVISION)}
    current = function_source(pg_url, "loopstate.append_in_section")
    with psycopg.connect(pg_url, autocommit=True) as conn:  # what a client before revisions left
        conn.execute("DELETE FROM loopstate.meta WHERE key = 'functions_revision'")
        conn.execute(
            "CREATE OR REPLACE FUNCTION loopstate.append_in_section(p_project text, p_stream text, p_after bigint, "
            "p_after_hash text, p_lines bytea[], p_hashes text[], p_prevs text[], p_request_id text, "
            "p_fingerprint text) RETURNS bigint LANGUAGE plpgsql VOLATILE AS $$ BEGIN RAISE EXCEPTION 'old body'; END $$")
    again = open_pg(pg_url, root, data_dir)
    ledger = again.open_ledger(STREAM, TEST_LAYOUT)
    with ledger.mutation() as tx:  # would raise 'old body' had the function been left
        tx.append([{"n": "b", "schema_version": 1}])
    assert names_in(again) == ["a", "b"]
    assert function_source(pg_url, "loopstate.append_in_section") == current
    assert meta(pg_url)["functions_revision"] == str(schema.FUNCTIONS_REVISION)
    again.close()
    newer = current.replace("BEGIN", "BEGIN\n    -- a newer revision's body", 1)
    with psycopg.connect(pg_url, autocommit=True) as conn:
        conn.execute("UPDATE loopstate.meta SET value = %s WHERE key = 'functions_revision'",
                     (str(schema.FUNCTIONS_REVISION + 1),))
        conn.execute(
            "CREATE OR REPLACE FUNCTION loopstate.append_in_section(p_project text, p_stream text, p_after bigint, "
            "p_after_hash text, p_lines bytea[], p_hashes text[], p_prevs text[], p_request_id text, "
            "p_fingerprint text) RETURNS bigint LANGUAGE plpgsql VOLATILE AS $body$" + newer + "$body$")
    third = open_pg(pg_url, root, data_dir)
    with third.open_ledger(STREAM, TEST_LAYOUT).mutation() as tx:
        tx.append([{"n": "c", "schema_version": 1}])
    assert names_in(third) == ["a", "b", "c"]
    assert function_source(pg_url, "loopstate.append_in_section") == newer
    assert meta(pg_url)["functions_revision"] == str(schema.FUNCTIONS_REVISION + 1)

@pytest.mark.slow
def test_a_fresh_database_opened_by_many_processes_at_once_gets_one_schema(pg_url):
    code = ("import sys; from loopstate.core.postgres.events import Events; "
            "Events(sys.argv[1], lock_timeout=30).conn")
    children = [subprocess.Popen([sys.executable, "-c", code, pg_url], stderr=subprocess.PIPE, text=True)
                for _ in range(6)]
    for child in children:
        _, err = child.communicate(timeout=60)
        assert child.returncode == 0, err
    assert meta(pg_url) == {"schema_version": str(schema.SCHEMA_VERSION), "functions_revision": str(schema.FUNCTIONS_REVISION)}


def test_the_table_holds_the_exact_line_its_hash_and_its_jsonl_offset(pg_url, root, data_dir):
    store = open_pg(pg_url, root, data_dir)
    first = lines_after(EMPTY, "a", "b")
    head = store.append(STREAM, TEST_LAYOUT, first, expected=EMPTY)
    second = lines_after(head, "c", start=first[-1].end)
    store.append(STREAM, TEST_LAYOUT, second, expected=head)
    with psycopg.connect(pg_url) as conn:
        rows = conn.execute("SELECT sequence, event_hash, prev_hash, start, line FROM loopstate.events "
                            "ORDER BY sequence").fetchall()
    jsonl = b"".join(s.line + b"\n" for s in first + second)
    assert [bytes(r[4]) for r in rows] == [s.line for s in first + second]
    assert [r[3] for r in rows] == [0, len(first[0].line) + 1, len(first[0].line) + len(first[1].line) + 2]
    assert rows[-1][3] + len(rows[-1][4]) + 1 == len(jsonl)  # offsets as the JSONL file of the same events has them
    assert [r[2] for r in rows] == [None, rows[0][1], rows[1][1]]


def test_the_server_refuses_a_batch_that_does_not_link_even_from_a_client_that_skips_the_checks(pg_url, root, data_dir):
    store = open_pg(pg_url, root, data_dir)
    head = append(store, "a")
    batch = lines_after(head, "x", "y")
    with psycopg.connect(pg_url, autocommit=True) as conn, pytest.raises(psycopg.errors.InvalidParameterValue):
        conn.execute(
            "SELECT * FROM loopstate.append(%s, %s, %s, %s, %s, %s, %s, NULL, NULL)",
            (store.key, STREAM, 1, head.hash, [s.line for s in batch], [s.hash for s in batch],
             [head.hash, "0" * 64]),
        )
    assert names_in(store) == ["a"]


def test_a_stream_of_another_project_in_the_same_database_is_apart(pg_url, root, data_dir, tmp_path):
    mine = open_pg(pg_url, root, data_dir)
    other_root = tmp_path / "other"
    other_root.mkdir()
    theirs = open_pg(pg_url, other_root, data_dir)
    append(mine, "mine")
    append(theirs, "theirs", stream="intent")
    assert mine.stream_names() == [STREAM] and theirs.stream_names() == ["intent"]
    assert theirs.head(STREAM, TEST_LAYOUT) == EMPTY


def test_concurrent_writers_commit_in_sequence_order_so_a_reader_never_sees_a_gap(pg_url, root, data_dir):
    """Readers page by sequence; that is sound only if sequence n+1 is never visible before n."""
    writers = [open_pg(pg_url, root, data_dir) for _ in range(4)]
    reader = open_pg(pg_url, root, data_dir)
    stop = threading.Event()
    gaps: list[tuple[int, int]] = []
    errors: list[BaseException] = []

    def write(store, k: int) -> None:
        try:
            for i in range(40):
                while True:
                    head = store.head(STREAM, TEST_LAYOUT)
                    try:
                        store.append(STREAM, TEST_LAYOUT, lines_after(head, f"w{k}-{i}"), expected=head)
                        break
                    except HeadConflict:
                        continue
        except BaseException as exc:
            errors.append(exc)

    def read() -> None:
        last = 0
        while not stop.is_set():
            for stored in reader.read(STREAM, TEST_LAYOUT, after=last):
                if stored.sequence != last + 1:
                    gaps.append((last, stored.sequence))
                last = stored.sequence

    threads = [threading.Thread(target=write, args=(w, k)) for k, w in enumerate(writers)]
    watcher = threading.Thread(target=read)
    watcher.start()
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(120)
    stop.set()
    watcher.join(30)
    assert errors == [] and gaps == []
    assert verify_chain(list(reader.read(STREAM, TEST_LAYOUT)), TEST_LAYOUT, STREAM).sequence == 160
    for store in [*writers, reader]:
        store.close()


def test_reads_page_through_a_long_stream_and_verify_from_any_sequence(pg_url, root, data_dir):
    store = open_pg(pg_url, root, data_dir)
    head, end = EMPTY, 0
    for _ in range(5):
        batch = lines_after(head, *(f"e{i}" for i in range(1000)), start=end)
        head = store.append(STREAM, TEST_LAYOUT, batch, expected=head)
        end = batch[-1].end
    stored = list(store.read(STREAM, TEST_LAYOUT))
    assert len(stored) == 5000 and verify_chain(stored, TEST_LAYOUT, STREAM) == head
    tail = list(store.read(STREAM, TEST_LAYOUT, after=3000))  # a batch boundary: a tail holds whole batches
    assert [s.sequence for s in tail[:2]] == [3001, 3002] and tail == stored[3000:]
    assert verify_chain(tail, TEST_LAYOUT, STREAM, Head(3000, stored[2999].hash), start=stored[3000].start) == head


def test_two_writers_that_seal_the_same_bytes_at_one_head_are_still_one_winner_and_one_conflict(pg_url, root, data_dir):
    first, second = open_pg(pg_url, root, data_dir), open_pg(pg_url, root, data_dir)
    same = lines_after(EMPTY, "identical")
    first.append(STREAM, TEST_LAYOUT, same, expected=EMPTY)
    with pytest.raises(HeadConflict):
        second.append(STREAM, TEST_LAYOUT, same, expected=EMPTY)
    assert names_in(first) == ["identical"]
