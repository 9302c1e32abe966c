"""Schema versions: newer schemas are refused on read and on mutation; the v1 fixture pins the encoding.

The fixture tests/fixtures/core/v1_ledger.jsonl is a small real v1 stream in the
envelope of seed 000 (plus loopstate's sequence, request_id and
request_fingerprint), written once through Ledger by ``PYTHONPATH=tests python
tests/core/test_core_schema.py`` from the bodies in ``fixture_bodies``.
It is checked in so that a change in the canonical encoding or the hash rule
shows up as a failing test instead of as old ledgers that no longer verify.
"""

from __future__ import annotations

import os
import shutil
from pathlib import Path

import pytest

from corekit import event, read_all, sealed_lines, write_stream
from loopstate.core import canonical
from loopstate.core.chain import ChainError
from loopstate.core.errors import LoopstateError
from loopstate.core.ledger import Ledger
from loopstate_protocol.errors import ErrorCode

from corekit import TEST_LAYOUT

FIXTURE = Path(__file__).resolve().parents[1] / "fixtures" / "core" / "v1_ledger.jsonl"
PROJECT_ID = "4f6c1f0c9a0b7e3d2c1b0a99887766554433221100ffeeddccbbaa9988776655"
TASK_ID = "00000000-0000-4000-8000-000000000001"


def fixture_bodies() -> list[tuple[str, dict]]:
    """(request_id, body) of each event in the fixture, in order."""
    def ev(n: int, event_type: str, actor: str, payload: dict) -> dict:
        return {
            "schema_version": 1, "event_id": f"00000000-0000-4000-8000-{n:012d}", "event_type": event_type,
            "project_id": PROJECT_ID, "task_id": TASK_ID, "occurred_at": f"2026-01-01T00:00:{n:02d}Z",
            "actor": actor, "payload": payload,
        }
    return [
        ("req-1", ev(1, "task_started", "user", {"label": "make appends durable", "mode": "on"})),
        ("req-2", ev(2, "claim_added", "user", {"claim_id": "c1", "statement": "appends must survive a crash",
                                                   "epistemic_status": "explicit", "facets": ["hard_constraint"]})),
        ("req-3", ev(3, "claim_added", "agent", {"claim_id": "c2", "statement": "fsync per append is acceptable",
                                                    "epistemic_status": "inferred", "confidence": 0.6, "facets": ["tradeoff"]})),
        ("req-4", ev(4, "claim_invalidated", "user", {"claim_id": "c2", "reason": "the user disagreed: «too slow»"})),
    ]


def write_fixture_events(ledger: Ledger) -> None:
    for request_id, body in fixture_bodies():
        with ledger.mutation() as tx:
            tx.append([body], request_id=request_id, fp=canonical.digest({"operation": "fixture", "params": request_id}))


def test_the_fixture_is_what_the_core_writes_today(core_project):
    """Re-writing the fixture's events through Ledger gives the checked-in bytes exactly."""
    write_fixture_events(Ledger(core_project, "intent", TEST_LAYOUT))
    assert (core_project.dir / "streams" / "intent.jsonl").read_bytes() == FIXTURE.read_bytes()


def _future_stream(core_project):
    events, lines = sealed_lines([event(1), event(2, schema_version=2)], TEST_LAYOUT)
    return write_stream(core_project, "core", b"".join(lines)), lines


def test_a_future_schema_is_refused_on_read_and_on_mutation(core_project):
    path, lines = _future_stream(core_project)
    data = path.read_bytes()
    for attempt in (lambda: read_all(core_project, "core", TEST_LAYOUT),
                    lambda: Ledger(core_project, "core", TEST_LAYOUT).refresh(),
                    lambda: Ledger(core_project, "core", TEST_LAYOUT).mutation().__enter__()):
        with pytest.raises(LoopstateError) as info:
            attempt()
        assert info.value.code is ErrorCode.FUTURE_SCHEMA
        assert "upgrade loopstate" in info.value.message
    assert path.read_bytes() == data


@pytest.mark.parametrize("schema", ["1", None, 0, 1.5])
def test_an_unknown_schema_value_is_corrupt_ledger(core_project, schema):
    events, lines = sealed_lines([event(1, schema_version=schema)], TEST_LAYOUT)
    write_stream(core_project, "core", b"".join(lines))
    with pytest.raises(ChainError) as info:
        read_all(core_project, "core", TEST_LAYOUT)
    assert info.value.offset == 0 and "schema_version" in info.value.reason


def _regenerate() -> None:
    import tempfile

    from loopstate.core.project import Project

    with tempfile.TemporaryDirectory() as tmp:
        (Path(tmp) / "ws").mkdir()
        project = Project(os.path.join(tmp, "ws"), data_dir=Path(tmp) / "data")
        write_fixture_events(Ledger(project, "intent", TEST_LAYOUT))
        FIXTURE.parent.mkdir(parents=True, exist_ok=True)
        shutil.copyfile(project.dir / "streams" / "intent.jsonl", FIXTURE)
    print(f"wrote {FIXTURE}")


if __name__ == "__main__":
    _regenerate()
