"""A sidecar catching up on a large batch another process appended: bounded, and nothing missed.

The service hands its listeners at most NEWS_LIMIT records of one catch-up; past that
only the new head (``core/news.py``). In process: what a listener gets. Through a real
`loopstate serve` over stdio: each kind of subscriber still gets the new state after a
catch-up far past the limit, the events subscriber as a snapshot, later small appends as
events again, and a subscriber reconnecting from a sequence before the batch gets every
event of it.
"""

from __future__ import annotations

import pytest

from pathlib import Path

import msgspec

from rpckit import changes_until, client, servers, stream_log  # noqa: F401 - fixtures

from loopstate_protocol.client import LoopstateClient
from loopstate_protocol.intent import IntentSnapshot, IntentTaskStart

from loopstate.core.news import News
from loopstate.service.engine import NEWS_LIMIT, Service

pytestmark = pytest.mark.both_stores  # docs/storage.md, *Which tests run on PostgreSQL*

BATCH = 3 * NEWS_LIMIT


def append_at_once(root: Path, data_dir: Path, labels: list[str]) -> None:
    """Another process's intent tasks, one per label, in one group commit: one write and
    one fsync under one exclusive lock, so a follower's next catch-up reads them all at once."""
    writer = Service(data_dir=data_dir)
    project = writer.project(str(root))
    domain = writer.domains["intent"]
    folded = writer.folded(project, domain, "intent")
    effects = writer.effects_of(domain)

    def work(tx) -> None:
        for label in labels:
            command = IntentTaskStart(label=label)
            prepared = effects.before_decide(writer, project, folded.state, command, writer.context(project, label))
            try:
                tx.append(domain.decide(folded.state, command, prepared.ctx), request_id=label, fp=label)
            finally:
                effects.release(prepared)

    folded.ledger.submit(work)


def test_a_listener_gets_a_large_catch_up_as_its_bounds_and_a_small_one_as_records(root: Path, data_dir: Path) -> None:
    heard: list[News] = []
    follower = Service(data_dir=data_dir)
    follower.add_listener(lambda project, stream, news: heard.append(news))
    follower.execute(str(root), IntentTaskStart(label="first"), "first")
    append_at_once(root, data_dir, [f"bulk-{i}" for i in range(BATCH)])
    tasks = msgspec.to_builtins(follower.query(str(root), IntentSnapshot()))
    big = heard[-1]
    assert (big.count, big.complete, big.records) == (BATCH, False, [])
    assert (big.first.event["sequence"], big.last.event["sequence"]) == (2, BATCH + 1)
    assert len(tasks["tasks"]) == BATCH + 1  # folded all the same
    append_at_once(root, data_dir, ["small-0", "small-1"])
    follower.query(str(root), IntentSnapshot())
    assert [r.event["sequence"] for r in heard[-1].records] == [BATCH + 2, BATCH + 3]


def test_subscribers_get_the_state_after_a_catch_up_past_the_limit_and_a_reconnect_misses_nothing(
    client: LoopstateClient, root: Path, data_dir: Path,  # noqa: F811 - fixtures
) -> None:
    client.execute(str(root), IntentTaskStart(label="first"), "first")
    snap = client.subscribe(str(root), "intent/snapshot")
    evts = client.subscribe(str(root), "intent/snapshot", deliver="events")
    assert snap.head.sequence == evts.head.sequence == 1

    append_at_once(root, data_dir, [f"bulk-{i}" for i in range(BATCH)])
    head = BATCH + 1
    last_snap = changes_until(client, snap.subscription_id, head)[-1]
    assert last_snap.head.sequence == head and last_snap.snapshot is not None
    assert len(last_snap.snapshot["tasks"]) == head
    evts_changes = changes_until(client, evts.subscription_id, head)
    assert evts_changes[-1].events is None and evts_changes[-1].snapshot is not None  # owed too many: the state
    assert len(evts_changes[-1].snapshot["tasks"]) == head

    # A small append after that is events again, continuing from the head delivered.
    append_at_once(root, data_dir, ["small-0", "small-1"])
    (small,) = changes_until(client, evts.subscription_id, head + 2)
    assert small.previous_sequence == head
    assert [e["sequence"] for e in small.events] == [head + 1, head + 2]
    changes_until(client, snap.subscription_id, head + 2)

    # A subscriber that went away before the batch and comes back from its last sequence.
    resumed = client.subscribe(str(root), "intent/snapshot", since=1, deliver="events")
    assert resumed.events == stream_log(data_dir, root)["events"][1:]
    assert [e["sequence"] for e in resumed.events] == list(range(2, head + 3))
