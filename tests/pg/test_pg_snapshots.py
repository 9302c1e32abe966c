"""Projection snapshots on PostgreSQL: this machine's cache of a fold, used only while the database
still holds the event it was folded through; request ids before it still found; progress of long reads.
Real server; the goals domain through the real service."""

from __future__ import annotations

import os

import msgspec
import psycopg
import pytest

from loopstate_protocol import goals as g
from loopstate_protocol.errors import ErrorCode

from loopstate.core import snapshot
from loopstate.core.errors import LoopstateError
from loopstate.core.postgres import snapshots as pg_snapshots
from loopstate.core.stores import close_opened, open_store
from loopstate.domains.goals import DOMAIN
from loopstate.domains.goals.state import state_checksum
from loopstate.service.front import stream_layout
from loopstate.service.goals_effects import load_state
from tests.goals.goalkit import Harness
from tests.pg.pgkit import backends, terminate

STREAM = "goals.g"


@pytest.fixture
def h(pg_url: str, data_dir, root, monkeypatch: pytest.MonkeyPatch):
    monkeypatch.setenv("LOOPSTATE_STORE", pg_url)
    yield Harness(data_dir, root)
    close_opened()


def many(h: Harness, count: int, start: int = 0) -> None:
    for number in range(start, start + count):
        h.run(g.AddTodo(goal_id="g", title=f"task {number} " + "x" * 250), f"add-{number}")


def path(h: Harness):
    return pg_snapshots.path_for(h.project, STREAM)


def rewrite(h: Harness, change) -> None:
    envelope = msgspec.msgpack.decode(path(h).read_bytes(), type=pg_snapshots.SnapshotFile)
    path(h).write_bytes(msgspec.msgpack.encode(change(envelope)))


def rows(pg_url: str, project_id: str) -> int:
    with psycopg.connect(pg_url, autocommit=True) as conn:
        (count,) = conn.execute("SELECT count(*) FROM loopstate.events WHERE project = %s AND stream = %s",
                                (project_id, STREAM)).fetchone()
    return int(count)


def test_a_writer_keeps_a_snapshot_on_this_machine_and_a_cold_reader_folds_only_what_follows(h: Harness):
    many(h, 200)  # ~100 KiB: past the first snapshot's tail
    binding = msgspec.msgpack.decode(path(h).read_bytes(), type=pg_snapshots.SnapshotFile).binding
    assert 0 < binding.sequence < 200 and binding.store == open_store(h.project).url
    assert path(h).stat().st_mode & 0o777 == 0o600
    many(h, 3, start=200)
    fast = load_state(h.project, "g")
    full = load_state(h.project, "g", use_snapshot=False)
    assert fast.snapshot_sequence == binding.sequence and fast.events_folded == 203 - binding.sequence
    assert (full.snapshot_sequence, full.events_folded) == (None, 203)
    assert state_checksum(fast.state) == state_checksum(full.state)


def test_compact_writes_the_snapshot_at_the_head_and_says_so(h: Harness):
    many(h, 5)
    done = h.service.compact(h.root, [STREAM])
    assert [written for _, written in done] == [True]
    loaded = load_state(h.project, "g")
    assert (loaded.snapshot_sequence, loaded.events_folded) == (5, 0) and len(loaded.state.todos) == 5


@pytest.mark.parametrize("change", ["state", "hash", "sequence", "store"])
def test_a_snapshot_that_does_not_match_the_database_is_ignored_never_trusted(h: Harness, change: str):
    many(h, 5)
    h.service.compact(h.root, [STREAM])
    if change == "state":
        rewrite(h, lambda env: msgspec.structs.replace(
            env, state=msgspec.Raw(bytes(env.state).replace(b"task 0", b"tamper"))))
    else:
        wrong = {"hash": "0" * 64, "sequence": 4, "store": "postgresql:///elsewhere"}[change]
        rewrite(h, lambda env: msgspec.structs.replace(env, binding=msgspec.structs.replace(env.binding, **{change: wrong})))
    loaded = load_state(h.project, "g")
    assert (loaded.snapshot_sequence, loaded.events_folded) == (None, 5)
    assert [t.title.split()[1] for t in loaded.state.todos.values()] == ["0", "1", "2", "3", "4"]


def test_a_stream_cut_back_and_written_again_under_a_snapshot_is_folded_from_its_first_event(
        h: Harness, pg_url: str):
    """Another machine's recover (or import) leaves another event at the snapshot's sequence."""
    many(h, 5)
    h.service.compact(h.root, [STREAM])
    with psycopg.connect(pg_url, autocommit=True) as conn:
        conn.execute("DELETE FROM loopstate.events WHERE project = %s AND stream = %s AND sequence > 3",
                     (h.project.project_id, STREAM))
    writer = h.fresh()  # no snapshot: it writes events 4 and 5 anew, other ones
    writer.execute(h.root, g.AddTodo(goal_id="g", title="other 3"), "o3")
    writer.execute(h.root, g.AddTodo(goal_id="g", title="other 4"), "o4")
    loaded = load_state(h.project, "g")
    assert (loaded.snapshot_sequence, loaded.events_folded) == (None, 5)
    assert [t.title.split()[:2] for t in loaded.state.todos.values()][-2:] == [["other", "3"], ["other", "4"]]


def test_a_snapshot_ahead_of_the_database_is_ignored(h: Harness, pg_url: str):
    many(h, 5)
    h.service.compact(h.root, [STREAM])
    with psycopg.connect(pg_url, autocommit=True) as conn:  # a database restored from an older backup
        conn.execute("DELETE FROM loopstate.events WHERE project = %s AND stream = %s AND sequence > 3",
                     (h.project.project_id, STREAM))
    loaded = load_state(h.project, "g")
    assert (loaded.snapshot_sequence, loaded.events_folded) == (None, 3)


def test_a_process_that_started_from_a_snapshot_still_answers_an_earlier_request_exactly(h: Harness, pg_url: str):
    first = h.run(g.AddTodo(goal_id="g", title="the first"), "req-first")
    many(h, 4)
    h.service.compact(h.root, [STREAM])
    later = h.fresh()  # another process: it starts from the snapshot, with no request id folded
    again = later.execute(h.root, g.AddTodo(goal_id="g", title="the first"), "req-first")
    assert [e["event_hash"] for e in again.events] == [e["event_hash"] for e in first.events]
    ledger = later.folded(h.project, later.domains["goals"], STREAM).ledger
    assert ledger.started_from == 5 and rows(pg_url, h.project.project_id) == 5
    with pytest.raises(LoopstateError) as reused:
        later.execute(h.root, g.AddTodo(goal_id="g", title="another"), "req-first")
    assert reused.value.code is ErrorCode.REQUEST_ID_REUSED
    later.execute(h.root, g.AddTodo(goal_id="g", title="new"), "req-new")  # the index is filled from the table now
    assert ledger._requests_partial is False  # noqa: SLF001 - the switch from table lookups to the index
    third = later.execute(h.root, g.AddTodo(goal_id="g", title="the first"), "req-first")
    assert [e["event_hash"] for e in third.events] == [e["event_hash"] for e in first.events]
    with pytest.raises(LoopstateError) as reused_again:
        later.execute(h.root, g.AddTodo(goal_id="g", title="another"), "req-first")
    assert reused_again.value.code is ErrorCode.REQUEST_ID_REUSED
    assert rows(pg_url, h.project.project_id) == 6


def test_another_machine_without_a_snapshot_folds_in_full_once_and_then_starts_from_its_own(
        h: Harness, tmp_path, root):
    many(h, 200)
    other = Harness(tmp_path / "machine-b", root)  # its own data dir: none of this machine's files
    assert not pg_snapshots.path_for(other.project, STREAM).exists()
    cold = load_state(other.project, "g")
    assert (cold.snapshot_sequence, cold.events_folded) == (None, 200)
    assert pg_snapshots.path_for(other.project, STREAM).exists()  # the cold reader kept its long fold
    warm = load_state(other.project, "g")
    assert warm.snapshot_sequence == 200 and warm.events_folded == 0
    assert state_checksum(warm.state) == state_checksum(cold.state)


def test_long_reads_report_their_progress_up_to_the_whole(h: Harness):
    many(h, 30)
    store = open_store(h.project)
    seen: list[tuple[int, int]] = []
    report = store.verify_stream(STREAM, stream_layout(STREAM), lambda done, whole: seen.append((done, whole)))
    assert report["ok"] and seen and seen[-1] == (report["bytes"], report["bytes"])
    caught: list[tuple[int, int]] = []
    ledger = store.open_ledger(STREAM, stream_layout(STREAM))
    ledger.catch_up(lambda done, whole: caught.append((done, whole)))
    assert caught and caught[-1] == (report["bytes"], report["bytes"])
    assert [done for done, _ in caught] == sorted(done for done, _ in caught)


def test_the_snapshot_envelope_is_the_one_every_store_uses():
    """One envelope, one checksum rule: only the binding is the store's own."""
    codec = snapshot.Codec(domain="test", state_type=dict, capture=lambda: {"a": 1}, restore=lambda obj: None)
    binding = pg_snapshots.Binding("postgresql:///db", 3, "a" * 64, 300)
    data = snapshot.Pending("s", "test", binding, msgspec.msgpack.encode({"a": 1})).encode()
    assert snapshot.decode(data, "s", codec, pg_snapshots.SnapshotFile) == (binding, {"a": 1})
    assert snapshot.decode(data, "s", codec) is None  # not a JSONL file's checkpoint binding


def test_an_idle_server_keeps_the_snapshot_of_what_another_machine_appended(h: Harness, tmp_path, root):
    """``Service.snapshot_idle`` (what an idle `loopstate serve` runs): the tail others appended is due."""
    many(h, 3)
    served = h.fresh()
    served.query(h.root, g.GetBoard(goal_id="g"))  # a long-lived reader holds the stream, nothing due
    assert served.snapshot_idle(lambda: False) == []
    many(Harness(tmp_path / "machine-b", root), 200, start=3)  # another machine's writes: not this one's files
    served.query(h.root, g.GetBoard(goal_id="g"))
    before = path(h).stat().st_mtime_ns if path(h).exists() else None
    assert served.snapshot_idle(lambda: False) == [STREAM]
    binding = msgspec.msgpack.decode(path(h).read_bytes(), type=pg_snapshots.SnapshotFile).binding
    assert binding.sequence == 203 and path(h).stat().st_mtime_ns != before
    assert served.snapshot_idle(lambda: False) == []  # nothing more is due
    cold = load_state(h.project, "g")
    assert (cold.snapshot_sequence, cold.events_folded) == (203, 0) and len(cold.state.todos) == 203


def test_a_connection_lost_on_the_read_that_checks_the_snapshot_loses_nothing(h: Harness, pg_url: str):
    """The first read of a ledger that loaded a snapshot fails (its server process killed): the error names
    the store, nothing is restored, and the next read checks the head, restores and folds as if uninterrupted."""
    many(h, 5)
    h.service.compact(h.root, [STREAM])
    many(h, 2, start=5)
    store = open_store(h.project)
    store.head(STREAM, stream_layout(STREAM))  # the connection is open
    terminate(pg_url, backends(pg_url, f"loopstate % pid {os.getpid()}"))
    folded: list[int] = []
    codec = snapshot.codec_for(DOMAIN, STREAM, lambda: None, lambda state: folded.append(-1))
    ledger = store.open_ledger(STREAM, stream_layout(STREAM), snapshots=codec,
                               on_record=lambda record: folded.append(record.event["append_sequence"]))
    with pytest.raises(LoopstateError) as lost:
        ledger.catch_up()
    assert lost.value.code is ErrorCode.STORE_IO_ERROR and store.url in lost.value.message
    assert folded == [] and ledger.started_from is None
    ledger.catch_up()
    assert folded == [-1, 6, 7] and ledger.started_from == 5 and ledger.head[0] == 7


def test_a_temp_file_left_by_a_writer_killed_mid_snapshot_is_swept_by_the_next_writer(h: Harness):
    many(h, 5)
    h.service.compact(h.root, [STREAM])
    orphan = path(h).with_name(path(h).name + ".loopstate-tmp-0123456789abcdef")
    other = path(h).with_name("goals.other.msgpack.loopstate-tmp-0123456789abcdef")  # another stream's: kept
    orphan.write_bytes(b"half a snapshot")
    other.write_bytes(b"being written")
    h.fresh().execute(h.root, g.AddTodo(goal_id="g", title="next"), "after-the-kill")
    assert not orphan.exists() and other.exists() and path(h).exists()
