"""``project.log`` pages on PostgreSQL: each page read from the event before it, never from the
first event, with every link it shows checked (service/log_pages.in_store)."""

from __future__ import annotations

import json

import psycopg
import pytest

from loopstate_protocol import project as proto
from loopstate_protocol.errors import ErrorCode

from loopstate.core.chain import ChainError
from loopstate.service.log_pages import in_store
from pgkit import STREAM, append, open_pg
from tests.core.corekit import TEST_LAYOUT

EVENTS = 60


@pytest.fixture
def store(pg_url, root, data_dir):
    store = open_pg(pg_url, root, data_dir)
    for n in range(EVENTS):
        append(store, f"e{n + 1}")
    return store


def page(store, **query) -> proto.LogPage:
    return in_store(store, STREAM, TEST_LAYOUT, proto.ProjectLog(stream=STREAM, **query))


def names(page: proto.LogPage) -> list[str]:
    return [event["n"] for event in page.events]


def tamper(url: str, sequence: int) -> None:
    """Change a stored line and keep its stored hash: what a hand edit of the table looks like."""
    with psycopg.connect(url, autocommit=True) as conn:
        line = conn.execute("SELECT line FROM loopstate.events WHERE sequence = %s", (sequence,)).fetchone()[0]
        event = json.loads(bytes(line))
        event["n"] = "edited"
        conn.execute("UPDATE loopstate.events SET line = %s WHERE sequence = %s",
                     (json.dumps(event, sort_keys=True, separators=(",", ":")).encode(), sequence))


def test_pages_forward_and_backward_cover_the_stream_once_in_order(store):
    forward, after = [], 0
    while True:
        got = page(store, after=after, limit=25)
        assert got.event_count == EVENTS and got.head.sequence == EVENTS
        forward += names(got)
        if got.next_after is None:
            break
        after = got.next_after
    assert forward == [f"e{n}" for n in range(1, EVENTS + 1)]
    backward, before = [], None
    while True:
        got = page(store, before=before, tail=True, limit=25)
        backward = names(got) + backward
        if got.next_before is None:
            break
        before = got.next_before
    assert backward == forward
    assert names(page(store, after=10, before=14)) == ["e11", "e12", "e13"]
    assert names(page(store, after=EVENTS)) == [] and page(store, after=EVENTS).next_after is None


def test_a_page_reads_from_the_event_before_it_and_checks_what_it_shows(store, pg_url):
    tamper(pg_url, 2)  # far before the page: not read by it, found by verify from the first event
    assert names(page(store, after=40, limit=5)) == ["e41", "e42", "e43", "e44", "e45"]
    report = store.verify_stream(STREAM, TEST_LAYOUT)
    assert not report["ok"] and report["error"]["sequence"] == 2
    tamper(pg_url, 40)  # the event the page links from: its line no longer hashes to its stored hash
    with pytest.raises(ChainError) as before:
        page(store, after=40, limit=5)
    tamper(pg_url, 43)  # inside the page
    with pytest.raises(ChainError) as inside:
        page(store, after=41, limit=5)
    assert before.value.code is inside.value.code is ErrorCode.CORRUPT_LEDGER
    assert inside.value.sequence == 43
