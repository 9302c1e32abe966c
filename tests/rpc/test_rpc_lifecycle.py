"""The LSP lifecycle over real stdio: initialize, initialized, shutdown, exit, end of input."""

from __future__ import annotations

import subprocess

import msgspec
import pytest

from loopstate_protocol import PROTOCOL_VERSION, methods
from loopstate_protocol.client import LoopstateClient, RpcError

from rpckit import SERVE, client, frame, servers, Servers, task_start  # noqa: F401 (fixtures)


def test_initialize_advertises_the_loopstate_capability(servers: Servers) -> None:
    client = servers.start(initialize=False)
    result = client.initialize()
    loopstate = result["capabilities"]["experimental"]["loopstate"]
    assert loopstate["protocolVersion"] == PROTOCOL_VERSION
    assert "intent" in loopstate["domains"]
    assert "intent/snapshot" in loopstate["topics"]
    assert loopstate["methods"] == list(methods.REQUESTS)
    assert result["serverInfo"]["name"] == "loopstate"
    assert "textDocumentSync" not in result["capabilities"]  # a sidecar wants no document content


def test_requests_before_initialize_are_refused_and_initialize_still_works(servers: Servers, root) -> None:
    client = servers.start(initialize=False)
    with pytest.raises(RpcError) as refused:
        client.query(str(root), {"kind": "intent.tasks"})
    assert refused.value.code == "SERVER_NOT_INITIALIZED"
    assert refused.value.number == -32002
    assert "initialize" in refused.value.message
    client.initialize()
    assert client.query(str(root), {"kind": "intent.tasks"}) == []


def test_initialize_with_params_that_do_not_decode_is_answered_and_can_be_retried(servers: Servers) -> None:
    client = servers.start(initialize=False)
    with pytest.raises(RpcError) as refused:
        client.request("initialize", {"processId": "not a number", "capabilities": {}})
    assert refused.value.code == "INVALID_PARAMS"
    assert "processId" in refused.value.message or "process_id" in refused.value.message
    assert "experimental" in client.initialize()["capabilities"]


def test_a_second_initialize_is_refused(client: LoopstateClient) -> None:
    with pytest.raises(RpcError) as refused:
        client.request("initialize", {"processId": None, "capabilities": {}})
    assert refused.value.code == "INVALID_REQUEST"


def test_shutdown_then_exit_exits_zero_and_requests_in_between_are_refused(client: LoopstateClient, root) -> None:
    assert client.request("shutdown") is None
    with pytest.raises(RpcError) as refused:
        client.execute(str(root), task_start())
    assert refused.value.code == "SERVER_SHUTTING_DOWN"
    assert "exit" in refused.value.message
    with pytest.raises(RpcError) as again:
        client.request("shutdown")
    assert again.value.code == "SERVER_SHUTTING_DOWN"
    assert client.exit() == 0


def test_exit_without_shutdown_exits_one(client: LoopstateClient) -> None:
    assert client.exit() == 1


def test_end_of_input_after_shutdown_exits_zero(client: LoopstateClient) -> None:
    client.shutdown()
    assert client.wait_exit() == 0


def test_end_of_input_without_shutdown_exits_one_cleanly(servers: Servers) -> None:
    client = servers.start()
    assert client.wait_exit() == 1
    log = (servers.logs / "serve-0.log").read_text()
    assert "Traceback" not in log
    assert "stdin closed before shutdown" in log


def test_shutdown_waits_for_requests_in_flight(client: LoopstateClient, root) -> None:
    ids = [client.send(methods.EXECUTE, {"root": str(root), "request_id": f"r{i}", "command": task_start(f"t{i}")})
           for i in range(5)]
    shutdown = client.send("shutdown")
    results = [client.wait(i) for i in ids]
    assert [r["head"]["sequence"] for r in results] == [1, 2, 3, 4, 5]
    assert client.wait(shutdown) is None
    assert client.exit() == 0


def test_unknown_notifications_and_lsp_notifications_are_ignored_quietly(client: LoopstateClient, root) -> None:
    client.notify("$/setTrace", {"value": "verbose"})
    client.notify("$/cancelRequest", {"id": 12345})
    client.notify("textDocument/didOpen", {"textDocument": {"uri": "file:///x", "languageId": "py", "version": 1, "text": ""}})
    client.notify("something/unknown", {"a": 1})
    client.notify("initialized", "not an object")
    assert client.query(str(root), {"kind": "intent.tasks"}) == []
    assert client.unmatched == []
    assert client.notifications.empty()


def test_a_pipelined_shutdown_and_exit_still_answer_every_request_and_exit_zero(client: LoopstateClient, root) -> None:
    ids = [client.send(methods.EXECUTE, {"root": str(root), "request_id": f"p{i}", "command": task_start(f"p{i}")})
           for i in range(3)]
    shutdown = client.send("shutdown")
    client.notify("exit")  # without waiting for the shutdown response
    assert [client.wait(i)["head"]["sequence"] for i in ids] == [1, 2, 3]
    assert client.wait(shutdown) is None
    assert client.wait_exit() == 0


def test_a_session_read_from_a_file_is_served_whole(servers: Servers, root, tmp_path) -> None:
    """stdin may be a regular file (a replayed session): every request in it is answered."""
    session = tmp_path / "session.bin"
    messages = [
        {"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {"processId": None, "capabilities": {}}},
        {"jsonrpc": "2.0", "id": 2, "method": methods.EXECUTE,
         "params": {"root": str(root), "request_id": "f1", "command": task_start("from a file")}},
        {"jsonrpc": "2.0", "id": 3, "method": methods.QUERY, "params": {"root": str(root), "query": {"kind": "intent.tasks"}}},
        {"jsonrpc": "2.0", "id": 4, "method": "shutdown"},
        {"jsonrpc": "2.0", "method": "exit"},
    ]
    session.write_bytes(b"".join(b"Content-Length: %d\r\n\r\n" % len(frame(m)) + frame(m) for m in messages))
    with open(session, "rb") as stdin:
        done = subprocess.run(SERVE, stdin=stdin, capture_output=True, env=servers.env(), timeout=60)
    assert done.returncode == 0
    bodies = [b for b in done.stdout.split(b"Content-Length: ") if b]
    answered = [msgspec.json.decode(b.split(b"\r\n\r\n", 1)[1]) for b in bodies]
    assert [m["id"] for m in answered if "id" in m] == [1, 2, 3, 4]
    assert all("result" in m for m in answered if "id" in m)
    assert answered[[m.get("id") for m in answered].index(3)]["result"][0]["label"] == "from a file"


def test_a_loopstate_request_sent_as_a_notification_is_never_applied(client: LoopstateClient, root) -> None:
    client.notify(methods.EXECUTE, {"root": str(root), "request_id": "blind", "command": task_start("blind")})
    client.notify("shutdown")
    assert client.query(str(root), {"kind": "intent.tasks"}) == []  # nothing written, still serving
    assert client.unmatched == []


def test_the_client_reports_a_server_that_died_instead_of_waiting(client: LoopstateClient, root) -> None:
    client.process.kill()
    client.process.wait()
    with pytest.raises(ConnectionError):
        client.query(str(root), {"kind": "intent.tasks"})


def _serve_with_stdin(stdin, data_dir, tmp_path) -> subprocess.Popen:
    from tests.conftest import env_for_child

    return subprocess.Popen(SERVE, stdin=stdin, stdout=subprocess.PIPE, stderr=subprocess.PIPE, cwd=tmp_path,
                            env=env_for_child(data_dir))


@pytest.mark.slow
@pytest.mark.parametrize("source", ["devnull", "closed_pipe", "terminal_hangup"])
def test_end_of_input_ends_the_server_whatever_stdin_is(source: str, data_dir, tmp_path) -> None:
    """`loopstate serve </dev/null`, a pipe whose writer closes, a terminal that hangs up: each ends the server
    (exit 1: no shutdown came), with no traceback, within seconds."""
    import os
    import pty

    if source == "devnull":
        with open(os.devnull, "rb") as null:
            child = _serve_with_stdin(null, data_dir, tmp_path)
    elif source == "closed_pipe":
        child = _serve_with_stdin(subprocess.PIPE, data_dir, tmp_path)
        child.stdin.close()
    else:
        leader, follower = pty.openpty()
        child = _serve_with_stdin(follower, data_dir, tmp_path)
        os.close(follower)
        import time

        time.sleep(1.0)  # the server is reading the terminal when it hangs up
        os.close(leader)
    try:
        assert child.wait(timeout=30) == 1
    finally:
        if child.poll() is None:
            child.kill()
    stderr = child.stderr.read().decode()
    assert "Traceback" not in stderr and "stdin closed before shutdown" in stderr, stderr
