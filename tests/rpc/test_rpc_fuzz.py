"""Random and mutated messages: the server never crashes and answers every request id exactly once."""

from __future__ import annotations

import itertools
import os
import threading
from collections import Counter
from typing import Any, Iterator

import msgspec
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from rpckit import SERVE

from loopstate_protocol import methods
from loopstate_protocol.client import LoopstateClient

TEXT = st.text(st.characters(blacklist_categories=("Cs",)), max_size=12)
SCALARS = st.none() | st.booleans() | st.integers(-(2**53), 2**53) | st.floats(allow_nan=False, allow_infinity=False) | TEXT
JSON = st.recursive(SCALARS, lambda inner: st.lists(inner, max_size=4) | st.dictionaries(TEXT, inner, max_size=4), max_leaves=12)
# Methods a fuzzer may not send: they end the session being fuzzed.
ENDING = {"exit", "shutdown"}
METHOD_NAMES = st.sampled_from([*methods.REQUESTS, "initialize", "loopstate/other", "$/cancelRequest", "textDocument/hover"]) | TEXT


def templates(root: str) -> list[dict[str, Any]]:
    return [
        {"method": methods.QUERY, "params": {"root": root, "query": {"kind": "intent.tasks"}}},
        {"method": methods.QUERY, "params": {"root": root, "query": {"kind": "intent.snapshot"}}},
        {"method": methods.EXECUTE, "params": {"root": root, "request_id": "fuzz", "command": {"kind": "intent.task_start", "label": "f"}}},
        {"method": methods.SUBSCRIBE, "params": {"root": root, "topic": "intent/snapshot", "since": 0}},
        {"method": methods.UNSUBSCRIBE, "params": {"subscription_id": "sub-1"}},
    ]


@st.composite
def frames(draw, root: str) -> bytes:
    """One frame body: a valid request, a mutation of one, or arbitrary JSON or bytes."""
    choice = draw(st.integers(0, 9))
    if choice == 0:
        return draw(st.binary(max_size=40))
    if choice == 1:
        return msgspec.json.encode(draw(JSON))
    message = {"jsonrpc": "2.0", "id": "ID", **draw(st.sampled_from(templates(root)))}
    message["params"] = msgspec.json.decode(msgspec.json.encode(message["params"]))
    if 5 <= choice <= 7:  # mostly the params: what reaches the handlers
        targets = st.sampled_from(["param", "param", "params", "notify"])
    else:
        targets = st.sampled_from(["drop", "jsonrpc", "id", "method", "params", "param", "notify"])
    for _ in range(0 if choice < 5 else draw(st.integers(1, 3))):
        target = draw(targets)
        if target == "drop":
            message.pop(draw(st.sampled_from(sorted(message))), None)
        elif target == "method":
            message["method"] = draw(METHOD_NAMES.filter(lambda m: m not in ENDING) | JSON)
        elif target == "param" and isinstance(message.get("params"), dict) and message["params"]:
            message["params"][draw(st.sampled_from(sorted(message["params"])))] = draw(JSON)
        elif target == "notify":
            message.pop("id", None)
        else:
            message[target] = draw(JSON)
    body = msgspec.json.encode(message)
    if choice == 9:
        body = body[: draw(st.integers(0, max(0, len(body) - 1)))]
    return body


def expected_answer(body: bytes) -> tuple[bool, Any]:
    """(answered?, the id it is answered with) for one frame, by the JSON-RPC 2.0 rules."""
    try:
        message = msgspec.json.decode(body)
    except msgspec.DecodeError:
        return True, None
    if not isinstance(message, dict):
        return True, None
    if "id" in message:
        msg_id = message["id"]
        if type(msg_id) not in (int, str):
            return True, None
        is_response = message.get("jsonrpc") == "2.0" and "method" not in message and ("result" in message or "error" in message)
        return (not is_response), msg_id
    is_notification = message.get("jsonrpc") == "2.0" and isinstance(message.get("method"), str)
    return (not is_notification), None


class Recorder:
    def __init__(self) -> None:
        self.received: list[dict[str, Any]] = []
        self.cond = threading.Condition()

    def __call__(self, direction: str, body: bytes) -> None:
        if direction == "recv":
            message = msgspec.json.decode(body)
            if "method" not in message:
                with self.cond:
                    self.received.append(message)
                    self.cond.notify_all()


@pytest.fixture(scope="module")
def fuzzed(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[LoopstateClient, Recorder, str]]:
    base = tmp_path_factory.mktemp("fuzz")
    (base / "workspace").mkdir()
    recorder = Recorder()
    env = dict(os.environ, LOOPSTATE_DATA_DIR=str(base / "data"))
    with open(base / "serve.log", "wb") as log:
        client = LoopstateClient(SERVE, env=env, stderr=log, trace=recorder).start()
    client.initialize()
    recorder.received.clear()
    yield client, recorder, str(base / "workspace")
    assert client.process.poll() is None, "the server died during fuzzing"
    client.shutdown()
    assert client.exit() == 0
    assert "Traceback" not in (base / "serve.log").read_text()


counter = itertools.count()


@settings(max_examples=80, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow])
@given(data=st.data())
def test_every_request_id_is_answered_exactly_once_whatever_is_sent(fuzzed, data) -> None:
    client, recorder, root = fuzzed
    batch = next(counter)
    bodies = data.draw(st.lists(frames(root), min_size=1, max_size=8))
    expected: Counter = Counter()
    for n, body in enumerate(bodies):
        body = body.replace(b'"ID"', b'"b%d-%d"' % (batch, n))
        answered, msg_id = expected_answer(body)
        if answered:
            expected[msg_id] += 1
        client.send_frame(body)
    sentinel = f"sentinel-{batch}"
    client.send_frame(msgspec.json.encode({"jsonrpc": "2.0", "id": sentinel, "method": methods.QUERY,
                                           "params": {"root": root, "query": {"kind": "intent.tasks"}}}))
    expected[sentinel] += 1
    total = sum(expected.values())
    with recorder.cond:
        assert recorder.cond.wait_for(lambda: len(recorder.received) >= total, 30), (bodies, recorder.received)
        got = Counter(m.get("id") for m in recorder.received)
        answers = list(recorder.received)
        recorder.received.clear()
    assert got == expected, (bodies, answers)
    for answer in answers:
        assert ("result" in answer) != ("error" in answer)
        if "error" in answer:
            assert isinstance(answer["error"]["data"]["code"], str) and answer["error"]["message"]
    assert next(a for a in answers if a["id"] == sentinel).get("result") is not None


# Frames no decoder should be trusted with, and header blocks no reader should guess at. ----------

DEPTHS = st.sampled_from([513, 1_000, 10_000])


def query_body(msg_id: str, root: str) -> bytes:
    return msgspec.json.encode({"jsonrpc": "2.0", "id": msg_id, "method": methods.QUERY,
                                "params": {"root": root, "query": {"kind": "intent.tasks"}}})


def framed(body: bytes) -> bytes:
    return b"Content-Length: %d\r\n\r\n" % len(body) + body


def deep_frame(where: str, levels: int, msg_id: str) -> tuple[bytes, Any]:
    """A frame nesting ``levels`` deep; the id its answer carries (None: id null; ... : no answer)."""
    deep = b"[" * levels + b"]" * levels
    if where == "params":
        return b'{"jsonrpc":"2.0","id":"%s","method":"%s","params":%s}' % (msg_id.encode(), methods.QUERY.encode(), deep), msg_id
    if where == "id":
        return b'{"jsonrpc":"2.0","id":%s,"method":"%s"}' % (deep, methods.QUERY.encode()), None
    if where == "notification":
        return b'{"jsonrpc":"2.0","method":"$/progress","params":%s}' % deep, ...
    return b'{"a":' * levels + b"1" + b"}" * levels, None  # the whole message


def bad_block(kind: str, body: bytes) -> bytes:
    """A header block the reader must refuse, with the body a client would send after it."""
    n = len(body)
    return {
        "missing": b"Content-Type: application/json\r\n\r\n" + body,
        "non-numeric": b"Content-Length: twelve\r\n\r\n" + body,
        "negative": b"Content-Length: -%d\r\n\r\n" % n + body,
        "huge": b"Content-Length: 123456789012345678901234567890\r\n\r\n" + body,
        "over the limit": b"Content-Length: %d\r\n\r\n" % (100 << 20) + body,
        "garbage line": b"garbage\r\n\r\n" + body,
        "garbage after the length": b"Content-Length: %d\r\n\x01\x02\r\n\r\n" % n + body,
        "missing blank line": b"Content-Length: %d\r\n" % n + body,
        "body on the header line": b"Content-Length: %d" % n + body,
        "duplicate, same": b"Content-Length: %d\r\nContent-Length: %d\r\n\r\n" % (n, n) + body,
        "duplicate, different": b"Content-Length: %d\r\nContent-Length: %d\r\n\r\n" % (n + 3, n) + body,
        "overlong line": b"X-Pad: " + b"p" * 70_000 + b"\r\n\r\n" + body,
        # The search for the next frame starts inside the bad line: a Content-Length after
        # it starts a frame, so this body is read and answered.
        "garbage before the length": b"garbage\r\nContent-Length: %d\r\n\r\n" % n + body,
        "overlong line before the length": b"X-Pad: " + b"p" * 70_000 + b"\r\nContent-Length: %d\r\n\r\n" % n + body,
    }[kind]


RUNS_THE_BODY = {"garbage before the length", "overlong line before the length"}


BAD_KINDS = ["missing", "non-numeric", "negative", "huge", "over the limit", "garbage line", "garbage after the length",
             "missing blank line", "body on the header line", "duplicate, same", "duplicate, different", "overlong line",
             *sorted(RUNS_THE_BODY)]
SEGMENTS = st.one_of(
    st.tuples(st.just("good")),
    st.tuples(st.just("deep"), st.sampled_from(["params", "id", "notification", "whole"]), DEPTHS),
    st.tuples(st.just("bad"), st.sampled_from(BAD_KINDS)),
)


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow])
@given(segments=st.lists(SEGMENTS, min_size=1, max_size=6))
def test_deep_frames_and_bad_headers_leave_every_id_answered_exactly_once(fuzzed, segments) -> None:
    """Deep nesting (513 to 10,000 levels) in the id, the params or the whole message, and each
    kind of bad header block (a refused frame's body is never run), each followed by good frames:
    the server stays up and answers every id exactly once."""
    client, recorder, root = fuzzed
    batch = next(counter)
    expected: Counter = Counter()
    data = b""
    for n, segment in enumerate(segments):
        msg_id = f"h{batch}-{n}"
        if segment[0] == "good":
            data += framed(query_body(msg_id, root))
            expected[msg_id] += 1
        elif segment[0] == "deep":
            body, answered = deep_frame(segment[1], segment[2], msg_id)
            data += framed(body)
            if answered is not ...:
                expected[answered] += 1
        else:
            # A refused block's body is not run (unless a Content-Length follows the bad line);
            # a good frame follows each bad block.
            data += bad_block(segment[1], query_body(f"stray-{msg_id}", root)) + framed(query_body(msg_id, root))
            expected[None] += 1
            expected[msg_id] += 1
            if segment[1] in RUNS_THE_BODY:
                expected[f"stray-{msg_id}"] += 1
    sentinel = f"sentinel-h{batch}"
    data += framed(query_body(sentinel, root))
    expected[sentinel] += 1
    client.send_frame(b"", header=data)
    with recorder.cond:
        assert recorder.cond.wait_for(lambda: any(m.get("id") == sentinel for m in recorder.received), 60), segments
        answers = list(recorder.received)
        recorder.received.clear()
    assert Counter(m.get("id") for m in answers) == expected, (segments, answers)
    for answer in answers:
        if answer["id"] is None:
            assert answer["error"]["data"]["code"] in {"PARSE_ERROR", "INVALID_REQUEST"}
        elif answer["id"].startswith("h") and "error" in answer:
            assert "deeper than 512 levels" in answer["error"]["message"]
    assert client.process.poll() is None
