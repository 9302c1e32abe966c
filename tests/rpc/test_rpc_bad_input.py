"""Every bad input is answered once with a stable data.code, and the server keeps serving."""

from __future__ import annotations

from pathlib import Path
from typing import Iterator

import pytest

from loopstate_protocol import methods
from loopstate_protocol.client import LoopstateClient, RpcError

from loopstate.core.chain import Position, seal
from loopstate.core.project import Project
from loopstate.domains.intent import LAYOUT as INTENT_LAYOUT

from rpckit import claim_add, client, frame, module_server, servers, task_start  # noqa: F401 (fixtures)


@pytest.fixture(scope="module")
def shared(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[LoopstateClient, Path]]:
    """One server for the stateless refusals: each must leave it serving the next."""
    with module_server(tmp_path_factory, "bad-input") as (client, base):
        yield client, base / "workspace"
        assert client.close() == 0


def still_serving(client: LoopstateClient, root: Path) -> None:
    assert isinstance(client.query(str(root), {"kind": "intent.tasks"}), list)


def null_id_error(client: LoopstateClient) -> dict:
    """The one error answered with id null (the request's id could not be known)."""
    marker = client.send(methods.QUERY, {"root": "/", "query": {"kind": "intent.tasks"}})
    client.response(marker)  # answered after the bad frame, so the bad frame's answer is in
    errors = [m for m in client.unmatched if m.get("id") is None]
    assert len(errors) == 1, client.unmatched
    client.unmatched.clear()
    return errors[0]["error"]


@pytest.mark.parametrize("body, fragment", [
    (b"{not json", "not valid JSON"),
    (b"", "not valid JSON"),
    (b"\xff\xfe", "not valid JSON"),
    (b'{"jsonrpc": "2.0", "id": 1, "method": "loopstate/query"', "not valid JSON"),
])
def test_malformed_json_gets_a_parse_error_with_id_null(shared, body: bytes, fragment: str) -> None:
    client, root = shared
    client.send_frame(body)
    error = null_id_error(client)
    assert error["code"] == -32700 and error["data"]["code"] == "PARSE_ERROR"
    assert fragment in error["message"]
    still_serving(client, root)


# Bad header blocks, each followed by the frames after it: test_rpc_framing_headers.py.


def test_header_names_are_case_insensitive(shared) -> None:
    client, root = shared
    body = frame({"jsonrpc": "2.0", "id": "lower", "method": methods.QUERY,
                  "params": {"root": str(root), "query": {"kind": "intent.tasks"}}})
    client.send_frame(body, expect_id="lower", header=b"content-length: %d\r\ncontent-type: application/vscode-jsonrpc; charset=utf-8\r\n\r\n" % len(body))
    assert client.wait("lower") == []


@pytest.mark.parametrize("message, answered_id, code, fragment", [
    ({"id": 7, "method": methods.QUERY, "params": {}}, 7, "INVALID_REQUEST", 'jsonrpc must be "2.0"'),
    ({"jsonrpc": "1.0", "id": 8, "method": methods.QUERY}, 8, "INVALID_REQUEST", 'jsonrpc must be "2.0"'),
    ({"jsonrpc": "2.0", "id": 9}, 9, "INVALID_REQUEST", "no method"),
    ({"jsonrpc": "2.0", "id": 10, "method": 42}, 10, "INVALID_REQUEST", "method must be a string"),
    ({"jsonrpc": "2.0", "id": 1.5, "method": methods.QUERY}, None, "INVALID_REQUEST", "id must be an integer or a string"),
    ({"jsonrpc": "2.0", "id": True, "method": methods.QUERY}, None, "INVALID_REQUEST", "id must be"),
    ({"jsonrpc": "2.0", "id": None, "method": methods.QUERY}, None, "INVALID_REQUEST", "id must be"),
    ([{"jsonrpc": "2.0", "id": 11, "method": methods.QUERY}], None, "INVALID_REQUEST", "batches"),
    (42, None, "INVALID_REQUEST", "must be a JSON object"),
    ({"jsonrpc": "2.0", "method": 5}, None, "INVALID_REQUEST", "method must be a string"),
])
def test_invalid_envelopes_are_answered_with_invalid_request(shared, message, answered_id,
                                                              code: str, fragment: str) -> None:
    client, root = shared
    client.send_frame(frame(message), expect_id=answered_id)
    if answered_id is None:
        error = null_id_error(client)
    else:
        response = client.response(answered_id)
        error = response["error"]
    assert error["data"]["code"] == code and error["code"] == -32600
    assert fragment in error["message"]
    still_serving(client, root)


@pytest.mark.parametrize("method", ["loopstate/nope", "textDocument/hover", "workspace/executeCommand", "$/unknown"])
def test_unknown_methods_get_method_not_found_naming_the_served_methods(shared, method: str) -> None:
    client, root = shared
    with pytest.raises(RpcError) as refused:
        client.request(method, {"textDocument": {"uri": "file:///x"}})
    assert refused.value.code == "METHOD_NOT_FOUND" and refused.value.number == -32601
    assert method in refused.value.message and methods.EXECUTE in refused.value.message
    still_serving(client, root)


@pytest.mark.parametrize("method, params, fragment", [
    (methods.EXECUTE, None, "Expected `object`, got `null`"),
    (methods.EXECUTE, {"root": "/x", "request_id": "r", "command": {"kind": "intent.nope"}}, "`$.command.kind`"),
    (methods.EXECUTE, {"root": "/x", "command": {"kind": "intent.task_start"}}, "missing required field `request_id`"),
    (methods.EXECUTE, {"root": "/x", "request_id": "r", "command": {"kind": "intent.task_start", "labl": "x"}},
     "unknown field `labl`"),
    (methods.QUERY, {"root": 5, "query": {"kind": "intent.tasks"}}, "Expected `str`, got `int` - at `$.root`"),
    (methods.SUBSCRIBE, {"root": "/x", "topic": "intent/snapshot", "since": "3"}, "`$.since`"),
    (methods.SUBSCRIBE, {"root": "/x", "topic": "intent/snapshot", "deliver": "fax"}, "`$.deliver`"),
    (methods.UNSUBSCRIBE, [], "Expected `object`, got `array`"),
])
def test_params_that_do_not_decode_get_msgspecs_message(shared, method, params, fragment) -> None:
    client, root = shared
    with pytest.raises(RpcError) as refused:
        client.request(method, params)
    assert refused.value.code == "INVALID_PARAMS" and refused.value.number == -32602
    assert fragment in refused.value.message
    assert "loopstate schema" in refused.value.message
    still_serving(client, root)


def stream_bytes(data_dir: Path, root: Path) -> bytes:
    path = Project(str(root), data_dir=data_dir).dir / "streams" / "intent.jsonl"
    return path.read_bytes() if path.exists() else b""


def test_a_command_that_breaks_a_rule_is_refused_and_writes_nothing(client: LoopstateClient, root: Path, data_dir: Path) -> None:
    client.execute(str(root), task_start(), "r-1")
    before = stream_bytes(data_dir, root)
    with pytest.raises(RpcError) as refused:
        client.execute(str(root), claim_add("no-such-task", "ship it"), "r-2")
    assert refused.value.code in {"NOT_FOUND", "RULE_VIOLATION", "VALIDATION_FAILED"}
    assert refused.value.number == -32000
    assert stream_bytes(data_dir, root) == before
    still_serving(client, root)


def test_a_reused_request_id_is_refused_and_an_exact_retry_replays(client: LoopstateClient, root: Path, data_dir: Path) -> None:
    first = client.execute(str(root), task_start("a"), "same-id")
    again = client.execute(str(root), task_start("a"), "same-id")
    assert again.replayed and again.events == first.events and again.head == first.head
    before = stream_bytes(data_dir, root)
    with pytest.raises(RpcError) as refused:
        client.execute(str(root), task_start("b"), "same-id")
    assert refused.value.code == "REQUEST_ID_REUSED"
    assert stream_bytes(data_dir, root) == before


def test_a_bad_project_root_is_refused_with_invalid_root(shared) -> None:
    client, root = shared
    for bad in ("relative/path", str(root / "missing"), "/tmp/\0nul"):
        with pytest.raises(RpcError) as refused:
            client.query(bad, {"kind": "intent.tasks"})
        assert refused.value.code == "INVALID_ROOT"
    still_serving(client, root)


@pytest.mark.jsonl_only("corrupts the stream file")
def test_a_corrupt_store_is_reported_as_corrupt_ledger_and_nothing_is_written(servers, root: Path, data_dir: Path) -> None:
    writer = servers.start()
    writer.execute(str(root), task_start("one"), "r-1")
    writer.execute(str(root), task_start("two"), "r-2")
    path = Project(str(root), data_dir=data_dir).dir / "streams" / "intent.jsonl"
    data = path.read_bytes()
    path.write_bytes(data.replace(b'"label":"one"', b'"label":"0ne"'))
    corrupt = path.read_bytes()
    client = servers.start()  # a fresh server reads the store from the start
    with pytest.raises(RpcError) as refused:
        client.execute(str(root), task_start("three"), "r-3")
    assert refused.value.code == "CORRUPT_LEDGER"
    assert "loopstate verify" in refused.value.message
    assert refused.value.details["sequence"] == 1
    with pytest.raises(RpcError) as read:
        client.query(str(root), {"kind": "intent.tasks"})
    assert read.value.code == "CORRUPT_LEDGER"
    assert path.read_bytes() == corrupt
    assert client.query("/", {"kind": "intent.tasks"}) == []  # another project is fine


@pytest.mark.jsonl_only("makes the fault through the stream file")
def test_a_handler_fault_is_an_internal_error_and_the_server_keeps_serving(servers, root: Path, data_dir: Path) -> None:
    """A chain-valid record the domain cannot fold (say, written by a buggy tool) faults the handler."""
    writer = servers.start()
    started = writer.execute(str(root), task_start(), "r-1")
    path = Project(str(root), data_dir=data_dir).dir / "streams" / "intent.jsonl"
    at = Position(offset=path.stat().st_size, sequence=started.head.sequence, hash=started.head.hash)
    odd = dict(started.events[0], event_type="claim_added", payload={}, event_id="forged")
    _, line = seal(odd, INTENT_LAYOUT, at)
    with open(path, "ab") as out:
        out.write(line)
    client = servers.start()
    with pytest.raises(RpcError) as fault:
        client.query(str(root), {"kind": "intent.tasks"})
    assert fault.value.code == "INTERNAL_ERROR" and fault.value.number == -32603
    assert "still running" in fault.value.message and "traceback" not in str(fault.value.error.get("data"))
    assert client.query("/", {"kind": "intent.tasks"}) == []
    log = (servers.logs / "serve-1.log").read_text()
    assert "Traceback" in log and "KeyError" in log  # the fault is logged where the user can report it


HUGE = 10_000_000


@pytest.mark.parametrize("case", ["absolute root", "relative root", "method", "enum value", "literal kind",
                                  "jsonrpc", "topic"])
def test_an_error_quotes_at_most_a_few_hundred_characters_of_what_was_sent(shared, case: str) -> None:
    """A 10 MB value in a request makes an error of a few hundred characters that says how long it was
    (before, a 10 MB root came back twice: a 20 MB error)."""
    client, root = shared
    big = "a" * HUGE
    message: dict = {"jsonrpc": "2.0", "id": f"big-{case}", "method": methods.QUERY,
                     "params": {"root": str(root), "query": {"kind": "intent.tasks"}}}
    if case == "absolute root":
        message["params"]["root"] = "/" + big
    elif case == "relative root":
        message["params"]["root"] = big
    elif case == "method":
        message["method"] = big
    elif case == "enum value":
        message.update(method=methods.SUBSCRIBE, params={"root": str(root), "topic": "intent/snapshot", "deliver": big})
    elif case == "literal kind":
        message["params"]["query"]["kind"] = big
    elif case == "jsonrpc":
        message["jsonrpc"] = big
    elif case == "topic":
        message.update(method=methods.SUBSCRIBE, params={"root": str(root), "topic": big})
    client.send_frame(frame(message), expect_id=message["id"])
    error = client.response(message["id"])["error"]
    encoded = len(frame(error))
    assert encoded < 3000, (encoded, error["message"][:300])
    assert "characters" in error["message"], error["message"]
    for value in (error.get("data", {}).get("details") or {}).values():
        assert len(str(value)) <= 1100
    still_serving(client, root)
