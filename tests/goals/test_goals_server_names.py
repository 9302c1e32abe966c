"""Goal names through a real `loopstate serve` over stdio: the wire gets the same refusals as the CLI,
and a subscription may still open on a goal before its first event."""

from __future__ import annotations

import os
import sys
from pathlib import Path

import pytest

from loopstate_protocol.client import LoopstateClient, RpcError

SERVE = [sys.executable, "-m", "loopstate.cli.main", "serve"]


@pytest.fixture
def server(data_dir: Path, tmp_path: Path):
    """A real sidecar (the client's context manager shuts it down); its stderr goes to a file."""
    with (tmp_path / "serve.log").open("wb") as log, LoopstateClient(
            SERVE, env={**os.environ, "LOOPSTATE_DATA_DIR": str(data_dir)}, stderr=log) as client:
        client.initialize()
        yield client


def test_reads_and_first_events_of_mistyped_goals_over_the_wire(server: LoopstateClient, root: Path) -> None:
    project = str(root)
    server.execute(project, {"kind": "goals.add", "goal_id": "json-export", "title": "Write the exporter"}, "r1")
    for query in ({"kind": "goals.board", "goal_id": "json-exprot"},
                  {"kind": "goals.markdown", "goal_id": "json-exprot"},
                  {"kind": "goals.check", "goal_id": "json-exprot", "markdown": "# x\n"},
                  {"kind": "goals.bridge", "goal_id": "json-exprot", "markdown": "# x\n"}):
        with pytest.raises(RpcError) as missing:
            server.query(project, query)
        assert missing.value.code == "NOT_FOUND", query
        assert missing.value.details["known_goals"] == ["json-export"]
        assert missing.value.details["suggestions"] == ["json-export"]

    sub = server.subscribe(project, "goals/board/json-exprot")
    assert sub.snapshot["meta"]["source_event_count"] == 0, "a panel may open before the goal's first event"

    typo = {"kind": "goals.add", "goal_id": "json-exprot", "title": "Oops"}
    with pytest.raises(RpcError) as near:
        server.execute(project, typo, "r2")
    assert near.value.code == "CONFLICT" and near.value.details["near"] == ["json-export"]
    created = server.execute(project, {**typo, "new_goal": True}, "r2")
    assert created.events[0]["goal_id"] == "json-exprot"
    assert server.query(project, {"kind": "goals.board", "goal_id": "json-exprot"})["meta"]["source_event_count"] == 1
