"""Deeply nested messages and command data: refused with the limit named, the server alive.

Before, a frame nested about 1,000 levels deep (in ``id``, in ``params``, or the
whole message) raised RecursionError out of the reader and ended the server with
exit 70, taking every subscription with it; command data nested a few hundred
levels deep was an INTERNAL_ERROR from a recursive walk in a domain.
"""

from __future__ import annotations

import json
from pathlib import Path

import msgspec
import pytest

from loopstate_protocol import methods
from loopstate_protocol.client import LoopstateClient, RpcError

from rpckit import changes_until, client, run_cli, servers, start_writer, task_start  # noqa: F401 (fixtures)

WIRE_LIMIT = 512  # documented in docs/protocol.md
DATA_LIMIT = 64


def nested(levels: int, leaf: bytes = b"1") -> bytes:
    return b"[" * levels + leaf + b"]" * levels


def query(msg_id, root: Path) -> bytes:
    return msgspec.json.encode({"jsonrpc": "2.0", "id": msg_id, "method": methods.QUERY,
                                "params": {"root": str(root), "query": {"kind": "intent.tasks"}}})


def too_deep(levels: int, where: str) -> tuple[bytes, object]:
    """A frame nesting ``levels`` deep at ``where``, and the id its answer carries."""
    if where == "params":
        return b'{"jsonrpc":"2.0","id":"deep","method":"%s","params":%s}' % (methods.QUERY.encode(), nested(levels)), "deep"
    if where == "params, id last":
        return b'{"jsonrpc":"2.0","method":"%s","params":%s,"id":7}' % (methods.EXECUTE.encode(), nested(levels)), 7
    if where == "id":
        return b'{"jsonrpc":"2.0","id":%s,"method":"%s"}' % (nested(levels), methods.QUERY.encode()), None
    if where == "whole message, objects":
        return b'{"a":' * levels + b"1" + b"}" * levels, None
    assert where == "whole message, arrays"
    return nested(levels), None


@pytest.mark.parametrize("levels", [1_000, 10_000])
@pytest.mark.parametrize("where", ["params", "params, id last", "id", "whole message, objects", "whole message, arrays"])
def test_a_frame_nested_too_deep_is_answered_and_the_subscriptions_live_on(
        servers, data_dir: Path, root: Path, where: str, levels: int) -> None:
    client = servers.start()
    sub = client.subscribe(str(root), "intent/snapshot")
    body, answered_id = too_deep(levels, where)
    client.send_frame(body, expect_id=answered_id)
    if answered_id is None:
        client.response(client.send(methods.QUERY, {"root": str(root), "query": {"kind": "intent.tasks"}}))
        (answer,) = client.unmatched
    else:
        answer = client.response(answered_id)
    error = answer["error"]
    assert answer["id"] == answered_id and error["data"]["code"] == "INVALID_REQUEST" and error["code"] == -32600
    assert f"deeper than {WIRE_LIMIT} levels" in error["message"]
    if where.startswith("params"):
        assert "(in `params`)" in error["message"]
    # Still serving, and the subscription still hears another process's appends.
    writer = start_writer(data_dir, root, 1, "after-deep")
    assert writer.wait(60) == 0
    (change,) = changes_until(client, sub.subscription_id, sub.head.sequence + 1)
    assert change.head.sequence == sub.head.sequence + 1
    assert client.close() == 0
    assert "Traceback" not in (servers.logs / "serve-0.log").read_text()


def test_a_deep_notification_is_not_answered_and_the_server_keeps_serving(client: LoopstateClient, root: Path) -> None:
    client.send_frame(b'{"jsonrpc":"2.0","method":"$/progress","params":%s}' % nested(10_000))
    assert client.query(str(root), {"kind": "intent.tasks"}) == []
    assert client.unmatched == []


def test_the_wire_limit_is_exact(client: LoopstateClient, root: Path) -> None:
    """512 levels are read (the command is then refused for its data); 513 are not."""
    for levels, code in ((WIRE_LIMIT, "VALIDATION_FAILED"), (WIRE_LIMIT + 1, "INVALID_REQUEST")):
        graph = nested(levels - 4)  # message > params > command > graph: 4 levels
        body = (b'{"jsonrpc":"2.0","id":%d,"method":"%s","params":{"root":"%s","request_id":"r-%d",'
                b'"command":{"kind":"intent.import","graph":{"x":%s}}}}'
                % (levels, methods.EXECUTE.encode(), str(root).encode(), levels, graph))
        assert json.loads(body) and body.count(b"[") == levels - 4
        client.send_frame(body, expect_id=levels)
        assert client.response(levels)["error"]["data"]["code"] == code


@pytest.mark.slow
@pytest.mark.parametrize("method, params", [
    ("initialize", {"capabilities": {}, "initializationOptions": "DEEP"}),
    (methods.QUERY, {"root": "ROOT", "query": "DEEP"}),
    (methods.SUBSCRIBE, {"root": "ROOT", "topic": "DEEP"}),
    (methods.UNSUBSCRIBE, {"subscription_id": "DEEP"}),
    (methods.EXECUTE, {"root": "ROOT", "request_id": "DEEP", "command": task_start()}),
])
def test_params_just_inside_the_wire_limit_get_a_plain_answer(servers, root: Path, method: str, params: dict) -> None:
    """What runs after the reader (pygls's converter, msgspec's convert) has room for 512 levels."""
    client = servers.start(initialize=method != "initialize")
    text = json.dumps(params).replace('"ROOT"', json.dumps(str(root))).replace('"DEEP"', nested(WIRE_LIMIT - 2).decode())
    body = b'{"jsonrpc":"2.0","id":"near","method":"%s","params":%s}' % (method.encode(), text.encode())
    client.send_frame(body, expect_id="near")
    answer = client.response("near")
    if method == "initialize":
        assert "result" in answer, answer  # initializationOptions are the client's own business
        client.notify("initialized", {})
    else:
        assert answer["error"]["data"]["code"] == "INVALID_PARAMS", answer
    assert client.query(str(root), {"kind": "intent.tasks"}) == []


def deep_value(levels: int) -> object:
    """Objects and arrays in turn, ``levels`` deep."""
    value: object = "leaf"
    for level in range(levels):
        value = {"k": value} if level % 2 else [value]
    return value


GRANT = "7d7e6c32-3f1b-4c4e-9a4b-6f0e2a4c1b11"
RUN = "0f5e3c1a-2b4d-4e6f-8a9b-1c2d3e4f5a6b"
COMMANDS = {
    "intent.import graph": ("graph", lambda deep: {"kind": "intent.import", "graph": {
        "format": "loopstate-intent-graph", "version": 1, "tasks": [], "claims": [], "candidates": [], "x": deep}}),
    "goals.append payload": ("payload", lambda deep: {"kind": "goals.append", "goal_id": "g", "event_type": "todo_added",
                                                      "payload": {"todo_id": "t", "title": "x", "metadata": deep}}),
    "runs.authority_grant scope": ("scope", lambda deep: {
        "kind": "runs.authority_grant", "grant_id": GRANT, "level": "bounded", "actor": "user", "scope": {"x": deep},
        "risks_shown": [], "confirmation_text": "yes", "expires_at": "2030-01-01T00:00:00Z"}),
    "runs.create asset": ("asset", lambda deep: {
        "kind": "runs.create", "run_id": RUN, "asset": {"x": deep}, "objective": "o", "done_gate": [],
        "authority_grant_id": GRANT, "actor": {"kind": "user", "id": "u"}}),
}


@pytest.mark.parametrize("levels", [65, 500, 505])
@pytest.mark.parametrize("command", sorted(COMMANDS))
def test_command_data_nested_too_deep_is_validation_failed_naming_the_limit(client: LoopstateClient, root: Path,
                                                                            command: str, levels: int) -> None:
    field, build = COMMANDS[command]
    with pytest.raises(RpcError) as refused:
        client.execute(str(root), build(deep_value(levels)), f"r-{command}-{levels}")
    assert refused.value.code == "VALIDATION_FAILED", refused.value
    assert f"{field} nests deeper than {DATA_LIMIT} levels" in refused.value.message
    assert refused.value.details == {"field": field, "limit": DATA_LIMIT}
    assert client.query(str(root), {"kind": "intent.tasks"}) == []


def test_data_at_the_limit_is_accepted(client: LoopstateClient, root: Path) -> None:
    """An exported graph with an extra member 64 levels deep imports; one level more does not."""
    client.execute(str(root), task_start(), "r-task")
    graph = client.query(str(root), {"kind": "intent.export"})
    graph["x"] = deep_value(DATA_LIMIT - 1)  # the graph object is the 64th level
    imported = client.execute(str(root), {"kind": "intent.import", "graph": graph}, "r-import")
    assert [e["event_type"] for e in imported.events] == ["graph_imported"]
    graph["x"] = deep_value(DATA_LIMIT)
    with pytest.raises(RpcError) as refused:
        client.execute(str(root), {"kind": "intent.import", "graph": graph}, "r-import-2")
    assert refused.value.code == "VALIDATION_FAILED" and "64 levels" in refused.value.message


def test_the_cli_refuses_an_import_nested_500_deep_naming_the_limit(data_dir: Path, root: Path, tmp_path: Path) -> None:
    graph = {"format": "loopstate-intent-graph", "version": 1, "tasks": [], "claims": [], "candidates": [],
             "x": deep_value(500)}
    path = tmp_path / "graph.json"
    path.write_text(json.dumps(graph))
    done = run_cli(data_dir, "intent", "import", str(path), "--root", str(root))
    assert done.returncode not in (0, 70), done
    assert f"graph nests deeper than {DATA_LIMIT} levels" in done.stderr, done.stderr
    assert "Traceback" not in done.stderr
