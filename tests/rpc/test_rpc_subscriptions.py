"""Subscriptions over real stdio: every change, in order, exactly once, from any process."""

from __future__ import annotations

from pathlib import Path

import pytest
from rpckit import changes_until, client, run_cli, servers, Servers, start_writer, stream_log, task_start  # noqa: F401 (fixtures)

from loopstate_protocol.client import LoopstateClient, RpcError
from loopstate_protocol.messages import StreamErrorNotification

from loopstate.core.project import Project

pytestmark = pytest.mark.both_stores  # docs/storage.md, *Which tests run on PostgreSQL*


def sequences(changes) -> list[int]:
    return [e["sequence"] for c in changes for e in c.events]


@pytest.mark.slow
def test_two_servers_plus_the_cli_and_another_process_each_subscriber_sees_every_change_once_in_order(
        servers: Servers, root: Path, data_dir: Path) -> None:
    a, b = servers.start(), servers.start()
    sub_a = a.subscribe(str(root), "intent/snapshot", deliver="events")
    sub_b = b.subscribe(str(root), "intent/snapshot", deliver="events")
    tasks_b = b.subscribe(str(root), "intent/tasks")
    assert sub_a.head.sequence == sub_b.head.sequence == 0
    writer = start_writer(data_dir, root, 8, "cli")
    for i in range(5):
        a.execute(str(root), task_start(f"a{i}"), f"a{i}")
        b.execute(str(root), task_start(f"b{i}"), f"b{i}")
        if i < 2:  # and the real CLI, a process per command
            done = run_cli(data_dir, "intent", "start", "--root", str(root), "--label", f"cli-{8 + i}", "--request-id", f"c{i}")
            assert done.returncode == 0, done.stderr
    assert writer.wait(60) == 0
    log = stream_log(data_dir, root)
    assert log["head"]["sequence"] == 20

    for client, sub in ((a, sub_a), (b, sub_b)):
        changes = changes_until(client, sub.subscription_id, 20)
        assert sequences(changes) == list(range(1, 21))
        assert [e["event_hash"] for c in changes for e in c.events] == [e["event_hash"] for e in log["events"]]
        previous = 0
        for change in changes:  # each notification starts where the last one ended
            assert change.previous_sequence == previous
            assert change.head.sequence == change.events[-1]["sequence"]
            assert change.head.hash == change.events[-1]["event_hash"]
            previous = change.head.sequence
        assert changes[-1].head.hash == log["head"]["hash"]

    snapshots = changes_until(b, tasks_b.subscription_id, 20)
    heads = [c.head.sequence for c in snapshots]
    assert heads == sorted(set(heads)) and heads[-1] == 20
    assert sorted(t["label"] for t in snapshots[-1].snapshot) == sorted(
        [f"a{i}" for i in range(5)] + [f"b{i}" for i in range(5)] + [f"cli-{i}" for i in range(10)])
    assert all(c.events is None for c in snapshots)


@pytest.mark.slow
def test_a_reconnecting_subscriber_gets_exactly_the_missed_events_with_since(
        servers: Servers, root: Path, data_dir: Path) -> None:
    first = servers.start()
    sub = first.subscribe(str(root), "intent/snapshot", deliver="events")
    for i in range(3):
        first.execute(str(root), task_start(f"seen{i}"), f"seen{i}")
    seen = changes_until(first, sub.subscription_id, 3)
    last = seen[-1].head.sequence
    assert first.close() == 0

    assert start_writer(data_dir, root, 4, "missed").wait(60) == 0
    again = servers.start()
    resumed = again.subscribe(str(root), "intent/snapshot", since=last, deliver="events")
    log = stream_log(data_dir, root)
    assert [e["sequence"] for e in resumed.events] == [4, 5, 6, 7]
    assert resumed.events == log["events"][3:]
    assert resumed.head.sequence == 7 and resumed.head.hash == log["head"]["hash"]
    assert len(resumed.snapshot["tasks"]) == 7

    again.execute(str(root), task_start("after"), "after")
    (change,) = changes_until(again, resumed.subscription_id, 8)
    assert change.previous_sequence == 7 and sequences([change]) == [8]


def test_since_at_the_head_returns_no_events_and_past_the_head_is_refused(client: LoopstateClient, root: Path) -> None:
    client.execute(str(root), task_start(), "one")
    assert client.subscribe(str(root), "intent/snapshot", since=1).events == []
    assert [e["sequence"] for e in client.subscribe(str(root), "intent/snapshot", since=0).events] == [1]
    with pytest.raises(RpcError) as refused:
        client.subscribe(str(root), "intent/snapshot", since=5)
    assert refused.value.code == "INVALID_PARAMS" and "past the head" in refused.value.message
    with pytest.raises(RpcError) as negative:
        client.subscribe(str(root), "intent/snapshot", since=-1)
    assert negative.value.code == "INVALID_PARAMS"


def test_a_subscription_to_a_project_nobody_wrote_yet_sees_the_first_write_by_another_process(
        client: LoopstateClient, root: Path, data_dir: Path) -> None:
    assert not Project(str(root), data_dir=data_dir).dir.exists()
    sub = client.subscribe(str(root), "intent/snapshot", deliver="events")
    assert sub.head.sequence == 0 and sub.snapshot["tasks"] == []
    assert start_writer(data_dir, root, 2, "first").wait(60) == 0
    changes = changes_until(client, sub.subscription_id, 2)
    assert sequences(changes) == [1, 2]


def test_unsubscribe_stops_notifications_and_an_unknown_id_is_refused(client: LoopstateClient, root: Path) -> None:
    kept = client.subscribe(str(root), "intent/tasks")
    dropped = client.subscribe(str(root), "intent/snapshot")
    assert client.unsubscribe(dropped.subscription_id).subscription_id == dropped.subscription_id
    client.execute(str(root), task_start(), "one")
    changes_until(client, kept.subscription_id, 1)
    client.execute(str(root), task_start("two"), "two")
    changes_until(client, kept.subscription_id, 2)
    assert dropped.subscription_id not in client.__dict__.get("stash", {})
    with pytest.raises(RpcError) as refused:
        client.unsubscribe(dropped.subscription_id)
    assert refused.value.code == "UNKNOWN_SUBSCRIPTION"


@pytest.mark.parametrize("topic, fragment", [
    ("intent", "'<domain>/<view>[/<key>]'"),
    ("intent//x", "'<domain>/<view>[/<key>]'"),
    ("nope/snapshot", "intent/snapshot"),
    ("intent/nope", "intent/snapshot"),
])
def test_a_bad_topic_is_refused_naming_the_topics(client: LoopstateClient, root: Path, topic: str, fragment: str) -> None:
    with pytest.raises(RpcError) as refused:
        client.subscribe(str(root), topic)
    assert refused.value.code == "INVALID_PARAMS" and fragment in refused.value.message


@pytest.mark.jsonl_only("corrupts the stream file")
def test_a_stream_corrupted_by_another_process_is_reported_to_its_subscribers(
        client: LoopstateClient, root: Path, data_dir: Path) -> None:
    client.execute(str(root), task_start(), "one")
    sub = client.subscribe(str(root), "intent/snapshot")
    path = Project(str(root), data_dir=data_dir).dir / "streams" / "intent.jsonl"
    with open(path, "ab") as out:
        out.write(b'{"this is": "not a chained event"}\n')
    while True:
        change = client.next_change(30)
        if isinstance(change, StreamErrorNotification):
            break
    assert change.subscription_id == sub.subscription_id
    assert change.error.code == "CORRUPT_LEDGER" and "loopstate verify" in change.message
    assert client.query("/", {"kind": "intent.tasks"}) == []  # the server keeps serving


@pytest.mark.jsonl_only("purge rewrites the intent file; on PostgreSQL it is refused (tests/team/test_team_proofs_on_pg.py)")
@pytest.mark.slow
def test_a_purge_that_rewrites_the_stream_is_announced_as_rewritten_to_every_subscriber(
        servers: Servers, root: Path, data_dir: Path) -> None:
    a, b = servers.start(), servers.start()
    a.execute(str(root), task_start("keep"), "keep")
    dropped = a.execute(str(root), task_start("drop"), "drop").events[0]["task_id"]
    subs = [(a, a.subscribe(str(root), "intent/tasks", deliver="events")), (b, b.subscribe(str(root), "intent/tasks"))]
    a.execute(str(root), {"kind": "intent.purge", "target": "task", "id": dropped, "confirm": True}, "purge")
    log = stream_log(data_dir, root)
    assert log["head"]["sequence"] == 1
    for client, sub in subs:
        change = client.next_change(30)
        assert change.subscription_id == sub.subscription_id
        assert change.rewritten and change.previous_sequence == 0 and change.events is None
        assert [t["label"] for t in change.snapshot] == ["keep"]
        assert change.head.sequence == 1 and change.head.hash == log["head"]["hash"]
    a.execute(str(root), task_start("after"), "after")
    for client, _sub in subs:
        change = client.next_change(30)
        assert not change.rewritten and change.previous_sequence == 1 and change.head.sequence == 2


@pytest.mark.jsonl_only("purge rewrites the intent file; on PostgreSQL it is refused (tests/team/test_team_proofs_on_pg.py)")
@pytest.mark.slow
def test_a_purge_that_empties_the_stream_is_announced_too(servers: Servers, root: Path) -> None:
    a, b = servers.start(), servers.start()
    only = a.execute(str(root), task_start("only"), "only").events[0]["task_id"]
    subs = [(a, a.subscribe(str(root), "intent/tasks")), (b, b.subscribe(str(root), "intent/snapshot", deliver="events"))]
    a.execute(str(root), {"kind": "intent.purge", "target": "task", "id": only, "confirm": True}, "purge")
    for client, sub in subs:
        change = client.next_change(30)
        assert change.subscription_id == sub.subscription_id and change.rewritten
        assert change.head.sequence == 0 and change.head.hash is None and change.previous_sequence == 0
        snapshot = change.snapshot if isinstance(change.snapshot, list) else change.snapshot["tasks"]
        assert snapshot == []


@pytest.mark.jsonl_only("reads the stream file")
@pytest.mark.slow
def test_since_further_back_than_one_subscribe_returns_is_refused_with_what_to_do(
        servers: Servers, root: Path, data_dir: Path) -> None:
    from loopstate.core.chain import Position, seal
    from loopstate.domains.intent import LAYOUT
    from loopstate.rpc.server import MAX_SINCE_EVENTS

    writer = servers.start()
    first = writer.execute(str(root), task_start("first"), "first")
    path = Project(str(root), data_dir=data_dir).dir / "streams" / "intent.jsonl"
    at = Position(offset=path.stat().st_size, sequence=first.head.sequence, hash=first.head.hash)
    lines = []
    for i in range(MAX_SINCE_EVENTS):  # chain-valid task starts, written as a bulk import would
        event, line = seal(dict(first.events[0], event_id=f"bulk-{i}", task_id=f"bulk-task-{i}",
                                request_id=f"bulk-{i}"), LAYOUT, at)
        at = Position(at.offset + len(line), event["sequence"], event["event_hash"])
        lines.append(line)
    with open(path, "ab") as out:
        out.write(b"".join(lines))
    client = servers.start()
    with pytest.raises(RpcError) as refused:
        client.subscribe(str(root), "intent/tasks", since=0)
    assert refused.value.code == "INVALID_PARAMS"
    assert "without since" in refused.value.message and refused.value.details["head"] == MAX_SINCE_EVENTS + 1
    recent = client.subscribe(str(root), "intent/tasks", since=MAX_SINCE_EVENTS - 2)
    assert [e["sequence"] for e in recent.events] == [MAX_SINCE_EVENTS - 1, MAX_SINCE_EVENTS, MAX_SINCE_EVENTS + 1]
