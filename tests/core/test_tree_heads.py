"""The kept Merkle tree (service/tree_heads.py): grown from where it was, never trusted past a replaced file."""

from __future__ import annotations

from pathlib import Path

import pytest

from loopstate.core import merkle
from loopstate.core.project import Project
from loopstate.core.stream import Stream
from loopstate.service import Service, transparency, tree_heads
from loopstate.service.front import stream_layout
from loopstate_protocol import intent as p


def claims(service: Service, root: Path, count: int, start: int = 0) -> None:
    """``count`` claims on the task the fixture started: one event each."""
    for n in range(start, start + count):
        service.execute(str(root), p.IntentClaimAdd(task_id=service.task_id, actor="user", claim=p.ClaimInput(
            statement=f"Claim {n}", role="user", epistemic_status="explicit", facets=["outcome"])), f"c{n}")


@pytest.fixture
def service(data_dir: Path, root: Path) -> Service:
    svc = Service(data_dir=data_dir)
    svc.task_id = svc.execute(str(root), p.IntentTaskStart(label="t"), "start").events[0]["task_id"]
    return svc


def stream_of(project: Project) -> Stream:
    stream = Stream(project.dir, "intent", stream_layout("intent"))
    for _ in stream.read_new():
        pass
    return stream


def test_the_kept_tree_grows_from_where_it_was_to_the_root_of_the_whole_file(service: Service, root: Path,
                                                                             data_dir: Path) -> None:
    project = Project(root, data_dir=data_dir)
    claims(service, root, 5)
    stream = stream_of(project)
    kept = tree_heads.extend(stream, tree_heads.KeptTree(), stream.position.offset)
    kept, _ = tree_heads.sign_and_keep(project, "intent", kept)
    claims(service, root, 7, start=5)
    stream = stream_of(project)
    loaded = tree_heads.load(project, stream)
    assert loaded.size == 6 and loaded.signed_size == 6
    grown = tree_heads.extend(stream, loaded, stream.position.offset)
    full = transparency.read_tree(project, "intent")
    assert grown.size == len(full.leaves) == 13
    assert grown.compact().root() == merkle.root(full.leaves)


def test_a_kept_tree_of_a_replaced_file_is_dropped_and_the_tree_rebuilt(service: Service, root: Path,
                                                                         data_dir: Path) -> None:
    project = Project(root, data_dir=data_dir)
    claims(service, root, 3)
    stream = stream_of(project)
    tree_heads.sign_and_keep(project, "intent", tree_heads.extend(stream, tree_heads.KeptTree(), stream.position.offset))
    path = project.dir / "streams" / "intent.jsonl"
    lines = path.read_bytes().splitlines(keepends=True)
    path.write_bytes(b"".join(lines[:2]))  # as if a recover cut the stream: the kept tree's last line is gone
    assert tree_heads.load(project, Stream(project.dir, "intent", stream_layout("intent"))).size == 0
    tree_heads.tree_path(project, "intent").write_bytes(b"not msgpack")
    assert tree_heads.load(project, stream).size == 0


@pytest.mark.parametrize(("events", "seconds", "appended", "elapsed", "expected"), [
    ("3", "0", 3, 0, True), ("3", "0", 2, 1000, False), ("0", "60", 1, 61, True), ("0", "60", 1, 59, False),
    ("0", "0", 500, 10_000, False), ("", "", 256, 0, True), ("junk", "", 255, 0, False),
])
def test_a_checkpoint_is_due_after_so_many_events_or_seconds(monkeypatch: pytest.MonkeyPatch, events: str, seconds: str,
                                                             appended: int, elapsed: float, expected: bool) -> None:
    monkeypatch.setenv("LOOPSTATE_CHECKPOINT_EVENTS", events)
    monkeypatch.setenv("LOOPSTATE_CHECKPOINT_SECONDS", seconds)
    kept = tree_heads.KeptTree(size=10 + appended, signed_size=10, signed_at=1000.0)
    assert tree_heads.due(kept, 1000.0 + elapsed) is expected
    assert tree_heads.due(tree_heads.KeptTree(size=4, signed_size=4), 10**9) is False


def test_every_append_grows_the_tree_and_a_checkpoint_is_signed_when_due(data_dir: Path, root: Path,
                                                                        monkeypatch: pytest.MonkeyPatch) -> None:
    """Through the engine: the service signs on its own, and each note holds the file it was signed of."""
    monkeypatch.setenv("LOOPSTATE_CHECKPOINT_EVENTS", "4")
    monkeypatch.setenv("LOOPSTATE_CHECKPOINT_SECONDS", "0")
    tree_heads._kept.clear()
    service = Service(data_dir=data_dir)
    service.task_id = service.execute(str(root), p.IntentTaskStart(label="t"), "start").events[0]["task_id"]
    project = Project(root, data_dir=data_dir)
    note_file = project.dir / "transparency" / "intent.checkpoint"
    signed = []
    for n in range(9):
        claims(service, root, 1, start=n)
        if note_file.exists() and note_file.read_text() not in signed:
            signed.append(note_file.read_text())
    assert [note.split("\n")[1] for note in signed] == ["4", "8"]  # the start and 3 claims, then 4 more
    for note in signed:
        old, stream = transparency.read_checkpoint(project, note)
        assert transparency.check_against(project, old, stream)["ok"]


def test_no_checkpoint_is_signed_before_one_is_due(service: Service, root: Path, data_dir: Path) -> None:
    """The defaults: a young stream signs nothing (no key is made) until 256 events."""
    claims(service, root, 20)
    assert not (data_dir / "keys").exists()
    assert not (Project(root, data_dir=data_dir).dir / "transparency").exists()


def test_a_failure_to_sign_never_fails_the_append(service: Service, root: Path, data_dir: Path,
                                                  monkeypatch: pytest.MonkeyPatch, caplog) -> None:
    monkeypatch.setenv("LOOPSTATE_CHECKPOINT_EVENTS", "1")
    (data_dir / "keys").write_text("a file where the key folder should be")
    claims(service, root, 2)
    assert "could not keep the Merkle tree of intent" in caplog.text
    assert len(transparency.read_tree(Project(root, data_dir=data_dir), "intent").leaves) == 3
