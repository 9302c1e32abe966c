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
