"""A long-lived `loopstate serve` must not build on bytes that changed under it.

Each test lets real servers verify a stream over real stdio, changes bytes they
already verified (in place, by truncating and rewriting, by replacing the file),
and checks that from then on every server refuses to mutate the stream, refuses
to answer queries from it and tells its subscribers, all with CORRUPT_LEDGER;
and that plain growth by another process is still just news.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Callable

import pytest
from rpckit import changes_until, run_cli, servers, Servers, task_start  # noqa: F401 (fixtures)

from loopstate_protocol.client import LoopstateClient, RpcError
from loopstate_protocol.messages import StreamErrorNotification

from loopstate.core import canonical
from loopstate.core.chain import Position, seal
from loopstate.core.project import Project
from loopstate.domains.intent import LAYOUT as INTENT

pytestmark = pytest.mark.jsonl_only("changes the stream file's bytes under running servers")

GOOD, BAD = b'"label":"two"', b'"label":"tw0"'


def stream_path(data_dir: Path, root: Path) -> Path:
    return Project(str(root), data_dir=data_dir).dir / "streams" / "intent.jsonl"


def overwrite_in_place(path: Path, tmp: Path) -> None:
    """One byte of the second record, written through a descriptor on the same inode, same size."""
    before = os.stat(path)
    at = path.read_bytes().index(GOOD)
    with open(path, "r+b") as out:
        out.seek(at)
        out.write(BAD)
    after = os.stat(path)
    assert (after.st_ino, after.st_size) == (before.st_ino, before.st_size)


def truncate_and_rewrite(path: Path, tmp: Path) -> None:
    """The whole file written again (O_TRUNC), one byte different: same inode, same size."""
    before = os.stat(path)
    path.write_bytes(path.read_bytes().replace(GOOD, BAD))
    after = os.stat(path)
    assert (after.st_ino, after.st_size) == (before.st_ino, before.st_size)


def replace_file(path: Path, tmp: Path) -> None:
    """Another file renamed over the stream: a copy with one byte different."""
    before = os.stat(path)
    copy = tmp / "intent.copy"
    copy.write_bytes(path.read_bytes().replace(GOOD, BAD))
    os.chmod(copy, 0o600)
    os.replace(copy, path)
    assert os.stat(path).st_ino != before.st_ino


def delete_and_recreate(path: Path, tmp: Path) -> None:
    """The stream deleted and written anew, one byte different. With no descriptor left on
    the old file, ext4 mostly hands the new one the freed inode number: the same device,
    inode and size as the verified file (a check of those alone sees nothing)."""
    data = path.read_bytes().replace(GOOD, BAD)
    os.unlink(path)
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
    try:
        os.write(fd, data)
    finally:
        os.close(fd)


CHANGES = [overwrite_in_place, truncate_and_rewrite, replace_file, delete_and_recreate]


def corruption(client: LoopstateClient, timeout: float = 30.0) -> StreamErrorNotification:
    """The next loopstate/streamError this client gets (changes announced before it are skipped)."""
    while True:
        note = client.next_change(timeout)
        if isinstance(note, StreamErrorNotification):
            return note


def assert_refused(client: LoopstateClient, root: Path, request_id: str) -> RpcError:
    with pytest.raises(RpcError) as refused:
        client.execute(str(root), task_start("after"), request_id)
    assert refused.value.code == "CORRUPT_LEDGER", refused.value.message
    assert "loopstate verify" in refused.value.message
    with pytest.raises(RpcError) as read:
        client.query(str(root), {"kind": "intent.tasks"})
    assert read.value.code == "CORRUPT_LEDGER", read.value.message
    assert read.value.details == refused.value.details
    return refused.value


LABELS = ("one", "two", "three")


def three_tasks(client: LoopstateClient, root: Path) -> None:
    for label in LABELS:
        client.execute(str(root), task_start(label), f"r-{label}")


def three_tasks_by_cli(data_dir: Path, root: Path) -> None:
    """Written by short-lived processes: no server holds a descriptor on the stream file."""
    for label in LABELS:
        done = run_cli(data_dir, "intent", "start", "--root", str(root), "--label", label, "--request-id", f"r-{label}")
        assert done.returncode == 0, done.stderr


@pytest.mark.slow
@pytest.mark.parametrize("change", CHANGES, ids=lambda f: f.__name__)
def test_verified_bytes_changed_under_running_servers_stop_mutations_queries_and_tell_subscribers(
        servers: Servers, root: Path, data_dir: Path, tmp_path: Path, change: Callable[[Path, Path], None]) -> None:
    watching, writer = servers.start(), servers.start()
    three_tasks_by_cli(data_dir, root)
    sub = watching.subscribe(str(root), "intent/tasks")
    assert [t["label"] for t in writer.query(str(root), {"kind": "intent.tasks"})] == list(LABELS)
    path = stream_path(data_dir, root)

    change(path, tmp_path)
    changed = path.read_bytes()

    # The writer has no subscription, so no watcher: its next mutation is what notices.
    refused = assert_refused(writer, root, "r-after-writer")
    assert (refused.details["stream"], refused.details["sequence"]) == ("intent", 2)  # the changed record
    note = corruption(watching)
    assert note.subscription_id == sub.subscription_id and note.error.code == "CORRUPT_LEDGER"
    assert note.error.details["stream"] == "intent"
    assert_refused(watching, root, "r-after-watching")
    assert path.read_bytes() == changed  # nothing was appended after the changed bytes
    assert run_cli(data_dir, "verify", "--root", str(root)).returncode != 0
    assert watching.query("/", {"kind": "intent.tasks"}) == []  # both keep serving other projects


@pytest.mark.slow
def test_a_changed_head_record_with_a_chained_line_appended_after_it_is_caught(
        servers: Servers, root: Path, data_dir: Path) -> None:
    """Growth does not hide an edit of the last verified record: a forger who edits it in
    place and appends a line properly chained to the old head still gets CORRUPT_LEDGER."""
    client = servers.start()
    three_tasks(client, root)
    path = stream_path(data_dir, root)
    data = path.read_bytes()
    *_, last = data.splitlines()
    head = canonical.decode(last)
    forged = {k: v for k, v in head.items() if k not in ("sequence", "prev_hash", "event_hash")}
    forged["event_id"] = forged["event_id"][:-1] + ("0" if forged["event_id"][-1] != "0" else "1")
    _, line = seal(forged, INTENT, Position(len(data), head["sequence"], head["event_hash"]))
    at = data.rindex(b'"label":"three"')
    with open(path, "r+b") as out:
        out.seek(at)
        out.write(b'"label":"thr3e"')
        out.seek(0, os.SEEK_END)
        out.write(line)
    assert_refused(client, root, "r-after")


@pytest.mark.slow
def test_bytes_put_back_as_they_were_verified_serve_again(servers: Servers, root: Path, data_dir: Path, tmp_path: Path) -> None:
    client = servers.start()
    three_tasks(client, root)
    path = stream_path(data_dir, root)
    original = path.read_bytes()
    overwrite_in_place(path, tmp_path)
    assert_refused(client, root, "r-refused")
    with open(path, "r+b") as out:
        out.write(original)
    assert [t["label"] for t in client.query(str(root), {"kind": "intent.tasks"})] == list(LABELS)
    client.execute(str(root), task_start("four"), "r-four")
    assert run_cli(data_dir, "verify", "--root", str(root)).returncode == 0


@pytest.mark.slow
def test_recover_after_a_change_was_noticed_leaves_the_server_on_the_kept_prefix(
        servers: Servers, root: Path, data_dir: Path, tmp_path: Path) -> None:
    client = servers.start()
    three_tasks(client, root)
    sub = client.subscribe(str(root), "intent/tasks")
    overwrite_in_place(stream_path(data_dir, root), tmp_path)
    assert_refused(client, root, "r-refused")
    done = run_cli(data_dir, "recover", "--root", str(root))
    assert done.returncode == 0, done.stderr
    assert [t["label"] for t in client.query(str(root), {"kind": "intent.tasks"})] == ["one"]
    client.execute(str(root), task_start("again"), "r-again")
    while True:  # the subscriber hears of the change, then of the rewritten stream
        note = client.next_change(30)
        if not isinstance(note, StreamErrorNotification) and note.head.sequence == 2:
            break
    assert note.subscription_id == sub.subscription_id
    assert [t["label"] for t in note.snapshot] == ["one", "again"]


@pytest.mark.slow
def test_plain_growth_by_another_process_is_still_news(servers: Servers, root: Path, data_dir: Path) -> None:
    client = servers.start()
    three_tasks(client, root)
    sub = client.subscribe(str(root), "intent/snapshot", deliver="events")
    chmodded = stream_path(data_dir, root)
    os.chmod(chmodded, 0o600)  # a changed ctime alone, no changed byte: not a corruption
    for i in range(3):
        done = run_cli(data_dir, "intent", "start", "--root", str(root), "--label", f"cli-{i}", "--request-id", f"c{i}")
        assert done.returncode == 0, done.stderr
    changes = changes_until(client, sub.subscription_id, 6)
    assert [e["sequence"] for c in changes for e in c.events] == [4, 5, 6]
    client.execute(str(root), task_start("mine"), "r-mine")
    labels = [t["label"] for t in client.query(str(root), {"kind": "intent.tasks"})]
    assert labels == ["one", "two", "three", "cli-0", "cli-1", "cli-2", "mine"]
    assert run_cli(data_dir, "verify", "--root", str(root)).returncode == 0
