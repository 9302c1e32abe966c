"""The ends of the stream: input that stops inside a frame, and a client that closes our stdout."""

from __future__ import annotations

import os
import subprocess
import time
from pathlib import Path

import msgspec
import pytest

from loopstate_protocol import methods
from loopstate_protocol.client import LoopstateClient

from loopstate.core.project import Project

from rpckit import SERVE, task_start


@pytest.mark.slow
@pytest.mark.parametrize("tail, fragment", [
    (b"Content-Length: 100\r\n\r\n{\"jsonrpc\": \"2.0\", ", "inside a 100-byte body"),
    (b"Content-Length: 100\r\n", "inside a header block"),
    (b"Content-Len", "inside a header block"),
])
def test_input_that_ends_inside_a_frame_is_answered_before_the_server_exits(data_dir: Path, tmp_path: Path,
                                                                              tail: bytes, fragment: str) -> None:
    log = tmp_path / "serve.log"
    with open(log, "wb") as stderr:
        client = LoopstateClient(SERVE, env=dict(os.environ, LOOPSTATE_DATA_DIR=str(data_dir)), stderr=stderr).start()
    client.initialize()
    client.send_frame(b"", header=tail)
    assert client.wait_exit() == 1  # stdin closed before shutdown and exit
    assert client._reader is not None
    client._reader.join(10)
    (answer,) = client.unmatched
    assert answer["id"] is None and answer["error"]["data"]["code"] == "PARSE_ERROR"
    assert fragment in answer["error"]["message"]
    assert "Traceback" not in log.read_text()


def frame(message: dict) -> bytes:
    body = msgspec.json.encode(message)
    return b"Content-Length: %d\r\n\r\n" % len(body) + body


def read_answer(stdout, msg_id: int) -> dict:
    """Read frames from the server's stdout until the answer to ``msg_id`` (no reader thread:
    the test closes this pipe later)."""
    while True:
        length = None
        while (line := stdout.readline().rstrip(b"\r\n")) or length is None:
            if line.lower().startswith(b"content-length:"):
                length = int(line.split(b":")[1])
        message = msgspec.json.decode(stdout.read(length))
        if message.get("id") == msg_id:
            return message


def wait_for_line(log: Path, text: str, timeout: float = 30.0) -> None:
    deadline = time.monotonic() + timeout
    while text not in log.read_text():
        assert time.monotonic() < deadline, f"{text!r} never logged: {log.read_text()}"
        time.sleep(0.02)


@pytest.mark.slow
def test_a_client_that_closes_our_stdout_gets_exit_1_and_a_clean_stderr(data_dir: Path, root: Path,
                                                                      tmp_path: Path) -> None:
    """Input that arrives after the client closed our stdout (while a request is still
    finishing) is not read: before, asyncio's pipe reader fed it to a stream already
    ended, and printed ``AssertionError: feed_data after feed_eof`` with a traceback."""
    log = tmp_path / "serve.log"
    with open(log, "wb") as stderr:
        server = subprocess.Popen(SERVE, stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=stderr,
                                  env=dict(os.environ, LOOPSTATE_DATA_DIR=str(data_dir)), bufsize=0)
    assert server.stdin is not None and server.stdout is not None
    query = {"root": str(root), "query": {"kind": "intent.tasks"}}
    server.stdin.write(frame({"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {"capabilities": {}}}))
    server.stdin.write(frame({"jsonrpc": "2.0", "method": "initialized", "params": {}}))
    server.stdin.write(frame({"jsonrpc": "2.0", "id": 2, "method": methods.EXECUTE,
                              "params": {"root": str(root), "request_id": "r-1", "command": task_start()}}))
    assert "result" in read_answer(server.stdout, 2)
    # A request that cannot finish yet: the stream's lock is held here.
    with Project(str(root), data_dir=data_dir).lock("intent").exclusive():
        server.stdin.write(frame({"jsonrpc": "2.0", "id": 3, "method": methods.EXECUTE,
                                  "params": {"root": str(root), "request_id": "r-2", "command": task_start("b")}}))
        server.stdin.write(frame({"jsonrpc": "2.0", "id": 4, "method": "loopstate/nope"}))
        assert "error" in read_answer(server.stdout, 4)  # answered in order: request 3 was read
        server.stdout.close()
        wait_for_line(log, "stdin closed before shutdown and exit")
        for n in range(20):  # the server is still finishing request 3; this must not be read
            server.stdin.write(frame({"jsonrpc": "2.0", "id": 10 + n, "method": methods.QUERY, "params": query}))
        time.sleep(0.5)  # not an assertion: time for a reader that still reads to read it
    assert server.wait(30) == 1
    text = log.read_text()
    assert "Traceback" not in text and "feed_data after feed_eof" not in text, text
