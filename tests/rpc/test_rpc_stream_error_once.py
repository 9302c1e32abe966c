"""A broken stream is announced to a domain topic's subscriber once, however many times the
server wakes on it before it is recovered, so the recovered stream's change is the next thing
the subscriber gets (real `loopstate serve` on real stdio, the edits and `recover` from other
processes)."""

from __future__ import annotations

from pathlib import Path

from rpckit import client, run_cli, servers  # noqa: F401 (fixtures)

from loopstate_protocol.client import LoopstateClient
from loopstate_protocol.messages import ChangedNotification, StreamErrorNotification

from loopstate.core.project import Project

QUIET = 2.0  # seconds without a notification that show the repeated wakes were not announced


def overwrite(path: Path, at: int, byte: bytes) -> None:
    with open(path, "r+b") as out:
        out.seek(at)
        out.write(byte)


def test_repeated_wakes_of_a_broken_stream_send_one_stream_error_then_the_recovered_change(
        client: LoopstateClient, root: Path, data_dir: Path) -> None:
    r = str(root)
    for label in ("one", "two"):
        assert run_cli(data_dir, "intent", "start", "--root", r, "--label", label, "--request-id", label).returncode == 0
    sub = client.subscribe(r, "intent/tasks")
    path = Project(r, data_dir=data_dir).dir / "streams" / "intent.jsonl"
    at = path.read_bytes().index(b'"label":"two"') + len(b'"label":"t')
    overwrite(path, at, b"W")
    note = client.next_change(30)
    assert isinstance(note, StreamErrorNotification) and note.subscription_id == sub.subscription_id
    assert note.error.code == "CORRUPT_LEDGER"

    for byte in (b"X", b"W"):  # two more wakes, each a failed catch-up of the same broken stream
        overwrite(path, at, byte)
    try:
        extra = client.next_change(QUIET)
    except TimeoutError:
        extra = None
    assert extra is None, f"the same failure was announced again: {extra}"

    done = run_cli(data_dir, "recover", "--root", r)
    assert done.returncode == 0, done.stderr
    note = client.next_change(30)
    assert isinstance(note, ChangedNotification) and note.rewritten is True
    assert [t["label"] for t in note.snapshot] == ["one"]

    # Broken again after the recovery: that is a new failure, and it is announced.
    data = path.read_bytes()
    overwrite(path, data.index(b'"label":"one"') + len(b'"label":"o'), b"M")
    note = client.next_change(30)
    assert isinstance(note, StreamErrorNotification) and note.error.code == "CORRUPT_LEDGER"
