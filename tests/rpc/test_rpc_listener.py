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
    mine.add_listener(lambda project, stream, records: heard.extend(r.event["sequence"] for r in records))
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
