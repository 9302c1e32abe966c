"""The guarantee subscriptions rest on: a Service's listeners hear every event exactly
once, in order, including what another process appended and this one first reads while
it holds the lock for its own command (refused, replayed or applied)."""

from __future__ import annotations

from pathlib import Path

import pytest

from loopstate_protocol.intent import ClaimInput, IntentClaimAdd, IntentTaskStart

from loopstate.core.errors import LoopstateError
from loopstate.service.engine import Service


def test_listeners_hear_events_first_read_in_a_commands_catch_up(root: Path, data_dir: Path) -> None:
    heard: list[int] = []
    mine = Service(data_dir=data_dir)
    mine.add_listener(lambda project, stream, news: heard.extend(r.event["sequence"] for r in news.records))
    other = Service(data_dir=data_dir)  # another process, as far as the store can tell

    mine.execute(str(root), IntentTaskStart(label="a"), "a")
    other.execute(str(root), IntentTaskStart(label="b"), "b")
    mine.execute(str(root), IntentTaskStart(label="c"), "c")  # reads b under its lock, then appends c
    assert heard == [1, 2, 3]

    other.execute(str(root), IntentTaskStart(label="d"), "d")
    refused = IntentClaimAdd(task_id="no-such-task", claim=ClaimInput(
        statement="x", role="user", epistemic_status="explicit", facets=["outcome"]))
    with pytest.raises(LoopstateError):
        mine.execute(str(root), refused, "e")  # reads d, then is refused
    assert heard == [1, 2, 3, 4]

    other.execute(str(root), IntentTaskStart(label="f"), "f")
    assert mine.execute(str(root), IntentTaskStart(label="a"), "a").replayed  # reads f, then replays
    assert heard == [1, 2, 3, 4, 5]


def test_subscribers_still_get_events_some_path_folded_without_announcing(root: Path, data_dir: Path) -> None:
    """Defence in depth: a gap in what the service announces is read back from the stream."""
    import asyncio
    from concurrent.futures import ThreadPoolExecutor

    from loopstate.rpc.subscriptions import Hub, Subscription
    from loopstate.service.live import Live

    service, other = Service(data_dir=data_dir), Service(data_dir=data_dir)
    service.execute(str(root), IntentTaskStart(label="a"), "a")
    loop = asyncio.new_event_loop()
    sent: list[tuple[str, dict]] = []
    with ThreadPoolExecutor(1) as worker:
        hub = Hub(service, Live(service, worker, loop), loop, lambda method, params: sent.append((method, params)),
                  lambda: False)
        folded, _ = service.view(str(root), "intent", "tasks", None)
        project, domain = service.project(str(root)), service.domains["intent"]
        sub = Subscription(id="sub-x", topic="intent/tasks", root=str(root), project=project, domain=domain,
                           view="tasks", key=None, stream="intent", deliver="events")
        hub.open(sub, folded.head())
        loop.run_until_complete(asyncio.sleep(0))
        worker.submit(lambda: None).result()  # the catch-up refresh the slot scheduled has run
        hub.release(sub.id)

        other.execute(str(root), IntentTaskStart(label="b"), "b")
        other.execute(str(root), IntentTaskStart(label="c"), "c")
        folded.ledger.refresh()  # folds 2 and 3 and tells nobody
        other.execute(str(root), IntentTaskStart(label="d"), "d")
        service.refresh(project, domain, "intent")  # announces 4 only
        loop.run_until_complete(asyncio.sleep(0))
    loop.close()
    (method, params), = sent
    assert method == "loopstate/changed" and params["previous_sequence"] == 1
    assert [e["sequence"] for e in params["events"]] == [2, 3, 4]
