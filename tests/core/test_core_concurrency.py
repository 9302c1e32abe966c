"""Many real processes appending to one stream under the exclusive lock."""

from __future__ import annotations

import pytest

from corekit import read_all, spawn

from corekit import TEST_LAYOUT

WRITERS, EACH = 8, 200


@pytest.mark.slow
def test_eight_processes_each_appending_200_events_make_one_gapless_chain(core_project, data_dir):
    children = [spawn(data_dir, "append", core_project.root, "core", f"w{k}", str(EACH)) for k in range(WRITERS)]
    acked = []
    for child in children:
        out, err = child.communicate(timeout=240)
        assert child.returncode == 0, err
        acked += [line.split() for line in out.splitlines()]

    events, stream = read_all(core_project, "core", TEST_LAYOUT)  # the whole chain verifies from byte 0
    assert stream.torn is None
    assert len(events) == WRITERS * EACH == len(acked)
    assert [e["sequence"] for e in events] == list(range(1, WRITERS * EACH + 1))
    assert len({e["event_hash"] for e in events}) == len(events)
    assert {(e["writer"], e["i"]) for e in events} == {(f"w{k}", i) for k in range(WRITERS) for i in range(EACH)}
    # Each writer's events are in its own order, and each ack named the sequence that holds it.
    for k in range(WRITERS):
        mine = [e["i"] for e in events if e["writer"] == f"w{k}"]
        assert mine == sorted(mine)
    by_seq = {e["sequence"]: (e["writer"], e["i"]) for e in events}
    assert all(by_seq[int(s)] == (w, int(i)) for s, w, i in acked)
