"""``project.log`` pages: from a cursor without verifying from byte 0 while the verified mark holds, and honest
about a broken middle whatever page is asked for (service/log_pages.py)."""

from __future__ import annotations

import os
import time

import pytest
from loopstate_protocol import intent as i
from loopstate_protocol import project as proto

from loopstate.core.clock import FixedClock
from loopstate.core.errors import LoopstateError
from loopstate.core.ids import SequentialIds
from loopstate.core.stream import Stream
from loopstate.service import log_pages
from loopstate.service.engine import Service
from loopstate.service.front import stream_layout

pytestmark = pytest.mark.jsonl_only("pages the JSONL file from its verified mark")

EVENTS = 240


@pytest.fixture
def store(tmp_path):
    root = tmp_path / "workspace"
    root.mkdir()
    service = Service(data_dir=tmp_path / "data", clock=FixedClock("2026-08-16T08:00:00Z"), new_id=SequentialIds(prefix=3))
    task = service.execute(str(root), i.IntentTaskStart(label="pages"), "req-0").events[0]["task_id"]
    for n in range(EVENTS - 1):
        claim = i.ClaimInput(statement=f"claim {n}: " + "keep the public API stable " * (n % 5 + 1), role="user",
                             epistemic_status="explicit", facets=["outcome"])
        service.execute(str(root), i.IntentClaimAdd(task_id=task, claim=claim), f"req-{n + 1}")
    project = service.project(str(root))
    (name,) = [n for n in project.stream_names() if n.startswith("intent")]
    return service, str(root), project, name


QUERIES = [dict(), dict(limit=1), dict(after=100, limit=7), dict(after=EVENTS - 3), dict(after=EVENTS),
           dict(after=5, before=9), dict(after=5, before=6), dict(tail=True, limit=10), dict(tail=True, before=50, limit=3),
           dict(tail=True, after=230, before=236, limit=50), dict(after=1, limit=500), dict(tail=True, limit=500)]


def test_pages_from_the_mark_equal_pages_verified_from_the_first_byte(store):
    service, root, project, name = store
    stream = Stream(project.dir, name, stream_layout(name))
    for fields in QUERIES:
        query = proto.ProjectLog(stream=name, **fields)
        with project.lock(name).shared():
            marked = log_pages.from_mark(stream, query)
            whole = log_pages.verified_from_start(Stream(project.dir, name, stream_layout(name)), query)
        assert marked is not None, f"the mark did not hold for {fields}"
        assert marked == whole, fields
        assert service.query(root, query) == whole, fields
    # paging on from a cursor, both ways, gives every event once
    seen, page = [], service.query(root, proto.ProjectLog(stream=name, limit=17))
    seen += page.events
    while page.next_after is not None:
        page = service.query(root, proto.ProjectLog(stream=name, after=page.next_after, limit=17))
        seen += page.events
    assert [e["sequence"] for e in seen] == list(range(1, EVENTS + 1))


def test_a_page_from_a_cursor_reads_its_own_lines_not_the_stream(store, monkeypatch):
    service, root, project, name = store
    size = os.path.getsize(project.dir / "streams" / f"{name}.jsonl")
    read = [0]
    real = os.pread

    def counted(fd, n, offset):
        data = real(fd, n, offset)
        read[0] += len(data)
        return data

    monkeypatch.setattr(log_pages.os, "pread", counted)
    page = service.query(root, proto.ProjectLog(stream=name, after=200, limit=5))
    assert [e["sequence"] for e in page.events] == [201, 202, 203, 204, 205]
    # a few 4 KiB reads near each search step and the page; the whole stream would be all of it, hashed
    assert 0 < read[0] < size // 4, (read[0], size)


def test_a_page_after_a_corrupt_middle_still_says_so(store):
    service, root, project, name = store
    path = project.dir / "streams" / f"{name}.jsonl"
    data = path.read_bytes()
    middle = data.index(b"claim 60:")
    time.sleep(0.05)  # past the file system's timestamp tick: the edit moves ctime (core/verified_mark.py)
    with open(path, "r+b") as handle:  # same size, same inode, in place
        handle.seek(middle)
        handle.write(b"Claim")
    for fields in (dict(after=200, limit=5), dict(tail=True, limit=3), dict(limit=2)):
        with pytest.raises(LoopstateError) as broken:
            service.query(root, proto.ProjectLog(stream=name, **fields))
        assert broken.value.code.value == "CORRUPT_LEDGER", fields
