"""A client that stops reading costs the server one pending notification per subscription."""

from __future__ import annotations

import os
import subprocess
from pathlib import Path

import msgspec
import pytest
from rpckit import SERVE, start_writer, stream_log

from loopstate_protocol import methods

pytestmark = pytest.mark.both_stores  # docs/storage.md, *Which tests run on PostgreSQL*

WRITES = 800
# What can be in flight when the client resumes: the pipe (64 KiB), the server's
# write buffer (high water 256 KiB) and one pending notification per subscription
# (a snapshot of 800 tasks is ~150 KiB). The writer pauses between commands so
# that each one is seen on its own: unbounded queues would then hold hundreds of
# growing snapshots, tens of MB.
MAX_BACKLOG_BYTES = 2 << 20
MAX_RSS_GROWTH_KB = 25 << 10


class RawClient:
    """Blocking reads and writes on the server's pipes, so the test decides when to read."""

    def __init__(self, proc: subprocess.Popen[bytes]) -> None:
        self.proc = proc
        self.bytes_read = 0

    def send(self, message: dict) -> None:
        body = msgspec.json.encode(message)
        self.proc.stdin.write(b"Content-Length: %d\r\n\r\n" % len(body) + body)
        self.proc.stdin.flush()

    def read(self) -> dict:
        length = None
        while True:
            line = self.proc.stdout.readline()
            assert line, "server closed stdout"
            self.bytes_read += len(line)
            if line == b"\r\n":
                break
            name, _, value = line.partition(b":")
            if name.lower() == b"content-length":
                length = int(value)
        body = self.proc.stdout.read(length)
        self.bytes_read += len(body)
        return msgspec.json.decode(body)

    def call(self, msg_id: int, method: str, params: dict) -> dict:
        self.send({"jsonrpc": "2.0", "id": msg_id, "method": method, "params": params})
        while True:
            message = self.read()
            if message.get("id") == msg_id:
                assert "result" in message, message
                return message["result"]


def status_kb(pid: int, field: str) -> int:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith(field + ":"):
            return int(line.split()[1])
    raise AssertionError(field)


@pytest.mark.slow
def test_a_subscriber_that_stops_reading_does_not_grow_the_server(root: Path, data_dir: Path, tmp_path: Path) -> None:
    env = dict(os.environ, LOOPSTATE_DATA_DIR=str(data_dir))
    with open(tmp_path / "serve.log", "wb") as log:
        proc = subprocess.Popen(SERVE, stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=log, env=env)
    try:
        raw = RawClient(proc)
        raw.call(1, "initialize", {"processId": None, "capabilities": {}})
        raw.send({"jsonrpc": "2.0", "method": "initialized", "params": {}})
        events_sub = raw.call(2, methods.SUBSCRIBE, {"root": str(root), "topic": "intent/snapshot", "deliver": "events"})
        snapshot_sub = raw.call(3, methods.SUBSCRIBE, {"root": str(root), "topic": "intent/snapshot"})
        baseline = status_kb(proc.pid, "VmRSS")

        # The client stops reading while another process writes.
        assert start_writer(data_dir, root, WRITES, "w", pause=0.002).wait(300) == 0
        head = stream_log(data_dir, root)["head"]
        assert head["sequence"] == WRITES

        raw.bytes_read = 0
        seen: dict[str, list[dict]] = {events_sub["subscription_id"]: [], snapshot_sub["subscription_id"]: []}
        while any(not got or got[-1]["head"]["sequence"] < WRITES for got in seen.values()):
            message = raw.read()
            assert message["method"] == methods.CHANGED
            seen[message["params"]["subscription_id"]].append(message["params"])
        peak_growth = status_kb(proc.pid, "VmHWM") - baseline
    finally:
        proc.kill()
        proc.wait()

    assert raw.bytes_read < MAX_BACKLOG_BYTES
    assert peak_growth < MAX_RSS_GROWTH_KB
    for notes in seen.values():
        assert len(notes) < WRITES  # coalesced
        previous = 0
        for note in notes:  # no gap goes unannounced: each starts where the last ended
            assert note["previous_sequence"] == previous
            previous = note["head"]["sequence"]
        assert notes[-1]["head"] == {"stream": "intent", **head}
    events = seen[events_sub["subscription_id"]]
    skipped = [n for n in events if n["events"] is None]
    assert skipped and all(n["snapshot"] is not None for n in skipped)  # the backlog outgrew its bound
    for note in events:
        if note["events"] is not None:
            assert [e["sequence"] for e in note["events"]] == list(range(note["previous_sequence"] + 1, note["head"]["sequence"] + 1))
    assert len(seen[snapshot_sub["subscription_id"]][-1]["snapshot"]["tasks"]) == WRITES
