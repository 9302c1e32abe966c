"""Bad header blocks: each is answered once with PARSE_ERROR, and the stream resynchronises.

Every case sends a bad header block with a body after it (what a client with a
framing bug sends), then well-formed requests written straight after it: those
must be answered. A reader that lost step after the bad block would read the
stray body and the next header as one header line, and every later frame with it.
"""

from __future__ import annotations

from pathlib import Path
from typing import Iterator

import msgspec
import pytest

from loopstate_protocol import methods
from loopstate_protocol.client import LoopstateClient

from rpckit import module_server

# The body sent after each bad header block; it must never be run.
STRAY = msgspec.json.encode({"jsonrpc": "2.0", "id": "stray", "method": methods.QUERY,
                             "params": {"root": "/", "query": {"kind": "intent.tasks"}}})


@pytest.fixture(scope="module")
def served(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[LoopstateClient, Path, Path]]:
    """One server for every case: each must leave it reading frames in step."""
    with module_server(tmp_path_factory, "framing") as (client, base):
        yield client, base / "workspace", base / "serve.log"
        assert client.close() == 0
        assert "Traceback" not in (base / "serve.log").read_text()


def request(msg_id: str, root: Path) -> bytes:
    body = msgspec.json.encode({"jsonrpc": "2.0", "id": msg_id, "method": methods.QUERY,
                                "params": {"root": str(root), "query": {"kind": "intent.tasks"}}})
    return b"Content-Length: %d\r\n\r\n" % len(body) + body


def send_raw(client: LoopstateClient, data: bytes, *ids: str) -> None:
    """Write ``data`` as it is; ``ids``: the requests in it, whose answers ``client.wait`` may take."""
    with client._cond:
        client._sent_ids.update(ids)
    client.send_frame(b"", header=data)


BAD_BLOCKS = {
    "no Content-Length": (b"Content-Type: application/vscode-jsonrpc; charset=utf-8\r\n\r\n" + STRAY,
                          "no Content-Length"),
    "a word for a length": (b"Content-Length: ten\r\n\r\n" + STRAY, "'ten' is not a whole number"),
    "a negative length": (b"Content-Length: -%d\r\n\r\n" % len(STRAY) + STRAY, "'-"),
    "a signed length": (b"Content-Length: +%d\r\n\r\n" % len(STRAY) + STRAY, "is not a whole number"),
    "a fractional length": (b"Content-Length: %d.0\r\n\r\n" % len(STRAY) + STRAY, "is not a whole number"),
    "an empty length": (b"Content-Length:\r\n\r\n" + STRAY, "'' is not a whole number"),
    "two numbers": (b"Content-Length: %d 1\r\n\r\n" % len(STRAY) + STRAY, "is not a whole number"),
    "a huge length": (b"Content-Length: 99999999999999999999\r\n\r\n" + STRAY, "larger than the"),
    "a length of 5,000 digits": (b"Content-Length: " + b"9" * 5000 + b"\r\n\r\n" + STRAY, "larger than the"),
    "a length past the 64 MiB limit": (b"Content-Length: %d\r\n\r\n" % (64 << 20 | 1) + STRAY, "larger than the"),
    "a garbage line": (b"this is not a header\r\n\r\n" + STRAY, "is not 'Name: value'"),
    "binary garbage": (b"\x00\xff\xfe\x01\r\n\r\n" + STRAY, "is not 'Name: value'"),
    "a space before the colon": (b"Content-Length : %d\r\n\r\n" % len(STRAY) + STRAY, "is not 'Name: value'"),
    "a garbage line after the length": (b"Content-Length: %d\r\nnot a header\r\n\r\n" % len(STRAY) + STRAY,
                                        "is not 'Name: value'"),
    "a missing blank line": (b"Content-Length: %d\r\n" % len(STRAY) + STRAY, "is not 'Name: value'"),
    "the body on the header line": (b"Content-Length: %d" % len(STRAY) + STRAY, "is not a whole number"),
    "a second Content-Length, the same": (b"Content-Length: %d\r\nContent-Length: %d\r\n\r\n" % (len(STRAY), len(STRAY))
                                          + STRAY, "second Content-Length"),
    "a second Content-Length, another": (b"Content-Length: 3\r\nContent-Length: %d\r\n\r\n" % len(STRAY) + STRAY,
                                         "second Content-Length"),
    "a second Content-Length, other case": (b"Content-Length: %d\r\ncontent-length: %d\r\n\r\n" % (len(STRAY), len(STRAY))
                                            + STRAY, "second Content-Length"),
    "an overlong header line": (b"X-Long: " + b"a" * 100_000 + b"\r\n\r\n" + STRAY, "longer than"),
}


@pytest.mark.parametrize("kind", sorted(BAD_BLOCKS))
def test_a_bad_header_block_is_answered_once_and_the_frames_after_it_are_read(served, kind: str) -> None:
    client, root, _ = served
    block, fragment = BAD_BLOCKS[kind]
    good = f"after {kind}"
    send_raw(client, block + request(good, root) + request(good + " again", root), good, good + " again")
    assert client.wait(good) == []
    assert client.wait(good + " again") == []
    with client._cond:
        answered = list(client.unmatched)
        client.unmatched.clear()
    assert len(answered) == 1, answered  # the PARSE_ERROR; the stray body is never run
    error = answered[0]["error"]
    assert answered[0]["id"] is None and error["code"] == -32700 and error["data"]["code"] == "PARSE_ERROR"
    assert fragment in error["message"], error["message"]
    assert "Content-Length" in error["message"] and len(error["message"]) < 600


def test_a_duplicate_content_length_is_refused_not_last_one_wins(served) -> None:
    client, root, _ = served
    body = request("dup", root).split(b"\r\n\r\n", 1)[1]
    send_raw(client, b"Content-Length: 7\r\nContent-Length: %d\r\n\r\n" % len(body) + body + request("next", root),
             "dup", "next")
    assert client.wait("next") == []
    with client._cond:
        assert "dup" not in client._responses
        (error,) = [m["error"] for m in client.unmatched]
        client.unmatched.clear()
    assert error["data"]["code"] == "PARSE_ERROR" and "second Content-Length" in error["message"]


def test_a_length_shorter_than_the_body_costs_that_frame_only(served) -> None:
    client, root, _ = served
    body = request("short", root).split(b"\r\n\r\n", 1)[1]
    send_raw(client, b"Content-Length: 10\r\n\r\n" + body + request("after short", root), "after short")
    assert client.wait("after short") == []
    with client._cond:
        errors = [m["error"] for m in client.unmatched]
        client.unmatched.clear()
    # The first 10 bytes are not JSON; the rest of the body runs into the next header.
    assert [e["data"]["code"] for e in errors] == ["PARSE_ERROR", "PARSE_ERROR"]
    assert "not valid JSON" in errors[0]["message"] and "is not 'Name: value'" in errors[1]["message"]


@pytest.mark.parametrize("header", [
    b"Content-Length: %d\n\n",  # bare LF line endings
    b"\r\n\r\nContent-Length: %d\r\n\r\n",  # blank lines between frames
    b"content-length: %d\r\ncontent-type: application/vscode-jsonrpc; charset=utf-8\r\n\r\n",
    b"Content-Type: application/json\r\nContent-Length:\t%d \r\nX-Other: 1\r\n\r\n",
    b"Content-Length: 000%d\r\n\r\n",
])
def test_well_formed_header_variants_are_read(served, header: bytes) -> None:
    client, root, _ = served
    body = request("variant", root).split(b"\r\n\r\n", 1)[1]
    send_raw(client, header % len(body) + body, "variant")
    assert client.wait("variant") == []
    assert client.unmatched == []
