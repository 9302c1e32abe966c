"""The PostgreSQL store's tables and its one append function, created idempotently and versioned.

Everything lives in the ``loopstate`` schema of the database the store URL names:

- ``loopstate.meta``: ``schema_version``, the version of what follows. A database
  written by a newer loopstate is refused (FUTURE_SCHEMA), never altered. And
  ``functions_revision``, the revision of the functions' bodies, which change within a
  version (same arguments, same answers): the newest client's bodies are the ones kept.
- ``loopstate.events``: one row per event, unique ``(project, stream, sequence)``. ``line``
  holds the event's exact canonical bytes (the JSONL line without its newline),
  ``event_hash``/``prev_hash`` the chain's links as the line states them, so the same
  verifier checks both backends, and ``start`` the byte offset the line would have in the
  stream's JSONL file (every store gives a record the same offsets: core/record.py). ``request_id``/``fingerprint`` make an exact retry
  findable inside the append's own transaction.
- ``loopstate.streams``: one row per stream, written with its first event, so a project's
  streams are listed without scanning its events.
- ``loopstate.stops``: the project's kill switch while it is set (``StopSwitch``), one row.
- ``loopstate.quarantine``: what ``recover`` set aside (a damaged suffix, rows as they were).
- ``loopstate.append(...)``: the append, one statement, so one round trip (and
  ``loopstate.append_in_section``, the same inside a mutation, raising instead of answering). It takes a
  transaction-scoped advisory lock on ``(project, stream)``, reads the head, and either
  inserts the batch at it or says why not (``conflict``: the head moved; ``duplicate``: this
  request id is already in the stream with this fingerprint; ``reused``: with another one).
  It queues a NOTIFY that PostgreSQL delivers only at commit. The lock is held until the
  transaction ends, so appends to one stream commit in sequence order: no reader can see
  sequence n+1 before n (gapless commit order). docs/storage.md, "PostgreSQL", says why an
  advisory lock and not a row lock on a heads table (measured: tests/bench/bench_postgres.py).
- ``loopstate.lock_and_read(...)``: a mutation's first statement, the stream's lock and then
  the events after the ledger's head (schema version 2).

Creation runs under a transaction-scoped advisory lock of its own, so processes that
connect to a fresh database at once do not race on ``CREATE``.
"""

from __future__ import annotations

import hashlib
from typing import TYPE_CHECKING

from psycopg import errors as pg_errors

from loopstate_protocol.errors import ErrorCode

from loopstate.core.errors import LoopstateError

if TYPE_CHECKING:
    import psycopg

SCHEMA_VERSION = 2
# The revision of the server-side functions' bodies, which change without changing what they
# take or answer, so clients of one schema version share a database whatever revision each
# knows: a client with a newer revision than the database's replaces the bodies once, an older
# one leaves them (clients before revision 2 never look). Revision 2: append_in_section
# written out instead of calling loopstate.append.
FUNCTIONS_REVISION = 2
# pg_advisory_xact_lock keys are one bigint; this one (ASCII "lsschema") guards creation only.
CREATION_LOCK = 0x6C73736368656D61
# A NOTIFY channel name is at most 63 bytes, a project id 64 hex digits: the channel is
# this prefix and the MD5 of the project id, and the payload names the project in full.
CHANNEL_PREFIX = "loopstate_"

_CREATE = """
CREATE SCHEMA IF NOT EXISTS loopstate;

CREATE TABLE IF NOT EXISTS loopstate.meta (
    key   text PRIMARY KEY,
    value text NOT NULL
);

CREATE TABLE IF NOT EXISTS loopstate.events (
    project      text        NOT NULL,
    stream       text        NOT NULL,
    sequence     bigint      NOT NULL CHECK (sequence >= 1),
    event_hash   text        NOT NULL,
    prev_hash    text,
    request_id   text,
    fingerprint  text,
    start        bigint      NOT NULL CHECK (start >= 0),
    line         bytea       NOT NULL,
    committed_at timestamptz NOT NULL DEFAULT clock_timestamp(),
    PRIMARY KEY (project, stream, sequence)
);

CREATE INDEX IF NOT EXISTS events_request
    ON loopstate.events (project, stream, request_id) WHERE request_id IS NOT NULL;

-- A record read back by its byte offset (``ReadsAt.line_at``: the intent domain's retired claims).
CREATE INDEX IF NOT EXISTS events_start ON loopstate.events (project, stream, start);

-- Rows set aside by ``loopstate recover``: the damaged suffix of a stream, as it was.
CREATE TABLE IF NOT EXISTS loopstate.quarantine (
    project    text        NOT NULL,
    stream     text        NOT NULL,
    sequence   bigint      NOT NULL,
    event_hash text        NOT NULL,
    start      bigint      NOT NULL,
    line       bytea       NOT NULL,
    reason     text        NOT NULL,
    moved_at   timestamptz NOT NULL DEFAULT clock_timestamp()
);

-- The project's kill switch, set from any machine: a row while it is set.
CREATE TABLE IF NOT EXISTS loopstate.stops (
    project text        PRIMARY KEY,
    reason  text        NOT NULL,
    set_by  text        NOT NULL,
    set_at  timestamptz NOT NULL DEFAULT clock_timestamp()
);

CREATE TABLE IF NOT EXISTS loopstate.streams (
    project    text        NOT NULL,
    stream     text        NOT NULL,
    created_at timestamptz NOT NULL DEFAULT clock_timestamp(),
    PRIMARY KEY (project, stream)
);

-- The advisory lock key of one exclusive section (a stream's is the one its appends take).
CREATE OR REPLACE FUNCTION loopstate.section_key(p_project text, p_section text) RETURNS bigint
LANGUAGE sql IMMUTABLE AS $$ SELECT hashtextextended(p_project || '/' || p_section, 0) $$;

-- A mutation's first statement: the stream's lock, then what was committed after ``p_after``.
-- Two statements of one VOLATILE function, so the read takes its snapshot after the lock is
-- granted and sees every commit made before it (one statement would read with a snapshot
-- taken before its wait).
CREATE OR REPLACE FUNCTION loopstate.lock_and_read(p_project text, p_stream text, p_after bigint, p_limit int)
RETURNS TABLE (sequence bigint, event_hash text, line bytea, start bigint)
LANGUAGE plpgsql VOLATILE AS $$
BEGIN
    PERFORM pg_advisory_xact_lock(loopstate.section_key(p_project, p_stream));
    RETURN QUERY SELECT e.sequence, e.event_hash, e.line, e.start FROM loopstate.events e
        WHERE e.project = p_project AND e.stream = p_stream AND e.sequence > p_after
        ORDER BY e.sequence LIMIT p_limit;
END
$$;

CREATE OR REPLACE FUNCTION loopstate.append(
    p_project text, p_stream text, p_after bigint, p_after_hash text,
    p_lines bytea[], p_hashes text[], p_prevs text[], p_request_id text, p_fingerprint text
) RETURNS TABLE (status text, head_sequence bigint, head_hash text, first_sequence bigint, first_start bigint)
LANGUAGE plpgsql VOLATILE AS $$
DECLARE
    cur_sequence bigint := 0;
    cur_hash text := NULL;
    cur_end bigint := 0;
    starts bigint[] := '{}';
    found_first bigint;
    found_last bigint;
    found_fingerprint text;
    n int := coalesce(array_length(p_lines, 1), 0);
BEGIN
    IF n = 0 OR array_length(p_hashes, 1) IS DISTINCT FROM n OR array_length(p_prevs, 1) IS DISTINCT FROM n THEN
        RAISE EXCEPTION 'loopstate.append: % lines, % hashes, % previous hashes', n,
            array_length(p_hashes, 1), array_length(p_prevs, 1) USING ERRCODE = '22023';
    END IF;
    -- Held to the end of the transaction: the next appender of this stream reads the head
    -- only after this one's commit (or rollback).
    PERFORM pg_advisory_xact_lock(loopstate.section_key(p_project, p_stream));
    SELECT e.sequence, e.event_hash, e.start + octet_length(e.line) + 1 INTO cur_sequence, cur_hash, cur_end
        FROM loopstate.events e WHERE e.project = p_project AND e.stream = p_stream
        ORDER BY e.sequence DESC LIMIT 1;
    IF NOT FOUND THEN
        cur_sequence := 0;
        cur_hash := NULL;
        cur_end := 0;
    END IF;
    IF p_request_id IS NOT NULL THEN
        SELECT min(e.sequence), max(e.sequence), min(e.fingerprint)
            INTO found_first, found_last, found_fingerprint
            FROM loopstate.events e
            WHERE e.project = p_project AND e.stream = p_stream AND e.request_id = p_request_id;
        IF found_first IS NOT NULL THEN
            IF found_fingerprint IS NOT DISTINCT FROM p_fingerprint THEN
                RETURN QUERY SELECT 'duplicate'::text, found_last, cur_hash, found_first, NULL::bigint;
            ELSE
                RETURN QUERY SELECT 'reused'::text, found_last, cur_hash, found_first, NULL::bigint;
            END IF;
            RETURN;
        END IF;
    END IF;
    IF cur_sequence <> p_after OR cur_hash IS DISTINCT FROM p_after_hash THEN
        RETURN QUERY SELECT 'conflict'::text, cur_sequence, cur_hash, NULL::bigint, NULL::bigint;
        RETURN;
    END IF;
    FOR i IN 1..n LOOP
        IF p_prevs[i] IS DISTINCT FROM (CASE WHEN i = 1 THEN p_after_hash ELSE p_hashes[i - 1] END) THEN
            RAISE EXCEPTION 'loopstate.append: event % of the batch does not link to the one before it', i
                USING ERRCODE = '22023';
        END IF;
        starts := starts || cur_end;
        cur_end := cur_end + octet_length(p_lines[i]) + 1;
    END LOOP;
    IF p_after = 0 THEN
        INSERT INTO loopstate.streams (project, stream) VALUES (p_project, p_stream) ON CONFLICT DO NOTHING;
    END IF;
    INSERT INTO loopstate.events (project, stream, sequence, event_hash, prev_hash, request_id, fingerprint, start, line)
        SELECT p_project, p_stream, p_after + i, p_hashes[i], p_prevs[i], p_request_id, p_fingerprint, starts[i], p_lines[i]
        FROM generate_series(1, n) AS i;
    PERFORM pg_notify('loopstate_' || md5(p_project),
        json_build_object('project', p_project, 'stream', p_stream, 'sequence', p_after + n)::text);
    RETURN QUERY SELECT 'appended'::text, p_after + n, p_hashes[n], p_after + 1, starts[1];
END
$$;

-- The append of a mutation, whose answer the client does not wait for: it reads the outcome
-- only with the commit (one round trip less), so anything but an append aborts the transaction.
-- The same steps as loopstate.append, written out rather than calling it: measured, the call
-- and its RETURN QUERY were a quarter of the server's time per mutation (functions revision 2).
CREATE OR REPLACE FUNCTION loopstate.append_in_section(
    p_project text, p_stream text, p_after bigint, p_after_hash text,
    p_lines bytea[], p_hashes text[], p_prevs text[], p_request_id text, p_fingerprint text
) RETURNS bigint
LANGUAGE plpgsql VOLATILE AS $$
DECLARE
    cur_sequence bigint := 0;
    cur_hash text := NULL;
    cur_end bigint := 0;
    found_fingerprint text;
    found_last bigint;
    status text;
    n int := coalesce(array_length(p_lines, 1), 0);
BEGIN
    IF n = 0 OR array_length(p_hashes, 1) IS DISTINCT FROM n OR array_length(p_prevs, 1) IS DISTINCT FROM n THEN
        RAISE EXCEPTION 'loopstate.append: % lines, % hashes, % previous hashes', n,
            array_length(p_hashes, 1), array_length(p_prevs, 1) USING ERRCODE = '22023';
    END IF;
    PERFORM pg_advisory_xact_lock(loopstate.section_key(p_project, p_stream));  -- re-entered: the mutation holds it
    SELECT e.sequence, e.event_hash, e.start + octet_length(e.line) + 1 INTO cur_sequence, cur_hash, cur_end
        FROM loopstate.events e WHERE e.project = p_project AND e.stream = p_stream
        ORDER BY e.sequence DESC LIMIT 1;
    IF NOT FOUND THEN
        cur_sequence := 0;
        cur_hash := NULL;
        cur_end := 0;
    END IF;
    IF p_request_id IS NOT NULL THEN
        SELECT e.fingerprint INTO found_fingerprint FROM loopstate.events e
            WHERE e.project = p_project AND e.stream = p_stream AND e.request_id = p_request_id LIMIT 1;
        IF FOUND THEN
            SELECT max(e.sequence) INTO found_last FROM loopstate.events e
                WHERE e.project = p_project AND e.stream = p_stream AND e.request_id = p_request_id;
            status := CASE WHEN found_fingerprint IS NOT DISTINCT FROM p_fingerprint THEN 'duplicate' ELSE 'reused' END;
            RAISE EXCEPTION 'loopstate: % at sequence % of stream %', status, found_last, p_stream
                USING ERRCODE = 'P0001', HINT = status;
        END IF;
    END IF;
    IF cur_sequence <> p_after OR cur_hash IS DISTINCT FROM p_after_hash THEN
        RAISE EXCEPTION 'loopstate: conflict at sequence % of stream %', cur_sequence, p_stream
            USING ERRCODE = 'P0001', HINT = 'conflict';
    END IF;
    IF p_after = 0 THEN
        INSERT INTO loopstate.streams (project, stream) VALUES (p_project, p_stream) ON CONFLICT DO NOTHING;
    END IF;
    -- A row at a time (a batch is a few events; one event is the usual case, where this
    -- measured 35 us of the server's time less than one INSERT of the whole batch): a link
    -- that fails raises, which rolls back the rows before it with the rest.
    FOR i IN 1..n LOOP
        IF p_prevs[i] IS DISTINCT FROM (CASE WHEN i = 1 THEN p_after_hash ELSE p_hashes[i - 1] END) THEN
            RAISE EXCEPTION 'loopstate.append: event % of the batch does not link to the one before it', i
                USING ERRCODE = '22023';
        END IF;
        INSERT INTO loopstate.events (project, stream, sequence, event_hash, prev_hash, request_id, fingerprint, start, line)
            VALUES (p_project, p_stream, p_after + i, p_hashes[i], p_prevs[i], p_request_id, p_fingerprint, cur_end,
                    p_lines[i]);
        cur_end := cur_end + octet_length(p_lines[i]) + 1;
    END LOOP;
    PERFORM pg_notify('loopstate_' || md5(p_project),
        json_build_object('project', p_project, 'stream', p_stream, 'sequence', p_after + n)::text);
    RETURN p_after + n;
END
$$;
"""


def channel_for(project: str) -> str:
    """The NOTIFY channel of one project's appends (what ``loopstate.append`` notifies on)."""
    return CHANNEL_PREFIX + hashlib.md5(project.encode("utf-8"), usedforsecurity=False).hexdigest()


def ensure(conn: psycopg.Connection[tuple[object, ...]], where: str) -> None:
    """Create the schema if it is missing, or check that it is the version this code writes.

    ``where`` is the store's URL without its password, for the error messages. ``conn`` is in
    autocommit mode. Every connection asks, so the usual answer (made already, this version)
    costs one query and no transaction; anything else is settled in a transaction under the
    creation lock, where a client that lost the race to create finds it made.
    """
    try:
        if _current(*_versions(conn)):
            return
    except (pg_errors.UndefinedTable, pg_errors.InvalidSchemaName):
        pass  # a fresh database
    with conn.transaction():
        conn.execute("SELECT pg_advisory_xact_lock(%s)", (CREATION_LOCK,))
        row = conn.execute("SELECT to_regclass('loopstate.meta') IS NOT NULL").fetchone()
        found, revision = _versions(conn) if row is not None and row[0] else (None, 0)
        if _current(found, revision):
            return
        if found is not None and found > SCHEMA_VERSION:
            raise LoopstateError(
                ErrorCode.FUTURE_SCHEMA,
                f"the PostgreSQL store at {where} has schema version {found}, newer than this loopstate "
                f"understands ({SCHEMA_VERSION}); upgrade loopstate on this machine to use it",
                store=where, schema=found,
            )
        # Version 2 added loopstate.lock_and_read; every statement of _CREATE is idempotent (its
        # functions are CREATE OR REPLACE), so running it over version 1, or over older function
        # bodies, is the migration.
        conn.execute(_CREATE)
        conn.execute(
            "INSERT INTO loopstate.meta (key, value) VALUES ('schema_version', %s), ('functions_revision', %s) "
            "ON CONFLICT (key) DO UPDATE SET value = excluded.value", (str(SCHEMA_VERSION), str(FUNCTIONS_REVISION)),
        )


def _versions(conn: psycopg.Connection[tuple[object, ...]]) -> tuple[int | None, int]:
    """The database's schema version (None: not made yet) and its functions' revision (0: before revisions)."""
    rows = {str(key): str(value) for key, value in conn.execute(
        "SELECT key, value FROM loopstate.meta WHERE key IN ('schema_version', 'functions_revision')")}
    version = rows.get("schema_version")
    return (None if version is None else int(version)), int(rows.get("functions_revision", "0"))


def _current(version: int | None, revision: int) -> bool:
    """Whether a database at ``version`` and ``revision`` needs nothing from this client."""
    return version == SCHEMA_VERSION and revision >= FUNCTIONS_REVISION
