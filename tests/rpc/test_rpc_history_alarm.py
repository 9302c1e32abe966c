"""`loopstate/historyAlarm` from a real `loopstate serve`: the sidecar checks each new signed checkpoint of a
stream it follows against its own tree of it, and tells every client once when history was rewritten."""

from __future__ import annotations

import pytest

from pathlib import Path

from rpckit import client, run_cli, servers, Servers  # noqa: F401 (fixtures)

from loopstate_protocol import methods
from loopstate_protocol.client import LoopstateClient
from tests.cli.test_cli_transparency import events_of, reseal, stream_file
from tests.rpc.test_rpc_proofs import claims


def alarms(client: LoopstateClient, wait: float) -> list[dict]:
    """Every historyAlarm pushed within ``wait`` seconds (other notifications are dropped)."""
    found = []
    while True:
        try:
            method, params = client.next_notification(wait)
        except TimeoutError:
            return found
        if method == methods.HISTORY_ALARM:
            found.append(params)


@pytest.mark.jsonl_only("rewrites the stream file behind the sidecar")
def test_a_rewrite_behind_the_sidecar_is_pushed_once_and_honest_growth_never(servers: Servers, root: Path,
                                                                           data_dir: Path) -> None:
    """The editor is closed while history is rewritten (a running server would see its verified bytes change
    under it: a stream error); the next server's witness still remembers what the last one saw."""
    editor = servers.start()
    r = str(root)
    claims(data_dir, root, 2)
    editor.subscribe(r, "intent/snapshot")  # the server follows the intent stream from here
    assert run_cli(data_dir, "checkpoint", "intent", "--root", r).returncode == 0
    claims(data_dir, root, 1)  # news: the sidecar's witness takes the checkpoint on trust
    assert run_cli(data_dir, "checkpoint", "intent", "--root", r).returncode == 0
    claims(data_dir, root, 1)  # news: a checkpoint that extends what it saw
    assert alarms(editor, 3.0) == []
    editor.close()

    path = stream_file(root, data_dir)
    events = events_of(path)
    events[1]["payload"]["claim"]["statement"] = "Never said"
    reseal(path, events)
    assert run_cli(data_dir, "checkpoint", "intent", "--root", r).returncode == 0
    editor = servers.start()
    editor.subscribe(r, "intent/snapshot")
    claims(data_dir, root, 1)
    pushed = alarms(editor, 5.0)
    assert len(pushed) == 1, pushed
    assert pushed[0]["stream"] == "intent" and pushed[0]["rewritten"] is True and pushed[0]["root"] == r
    assert "history was rewritten" in pushed[0]["message"]
    claims(data_dir, root, 1)  # the same checkpoint again: no second alarm
    assert alarms(editor, 3.0) == []
