"""Schema versions: newer schemas are refused on read, and the identity v1 migration.

The fixture tests/fixtures/core/v1_ledger.jsonl is a small real v1 stream in the
envelope of seed 000 (plus loopstate's sequence, request_id and
request_fingerprint), written once through Ledger by ``PYTHONPATH=tests python
tests/core/test_core_schema.py`` from the bodies in ``fixture_bodies``.
It is checked in so that a change in the canonical encoding or the hash rule
shows up as a failing test instead of as old ledgers that no longer verify.
"""

from __future__ import annotations

import json
import os
import shutil
from pathlib import Path

import pytest

from corekit import event, read_all, sealed_lines, write_stream
from loopstate.core import canonical
from loopstate.core.chain import ChainError, ChainLayout
from loopstate.core.clock import FixedClock
from loopstate.core.errors import LoopstateError
from loopstate.core.ledger import Ledger
from loopstate.core.migrate import migrate_stream
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


def test_identity_v1_migration_of_the_fixture_yields_identical_bytes_and_a_manifest(core_project):
    path = write_stream(core_project, "intent", FIXTURE.read_bytes())
    inode = path.stat().st_ino
    manifest = migrate_stream(core_project, "intent", TEST_LAYOUT, target_version=1, clock=FixedClock("2026-02-01T00:00:00Z"))
    assert path.read_bytes() == FIXTURE.read_bytes()
    assert path.stat().st_ino != inode  # really rewritten beside and swapped in, not left alone
    assert oct(path.stat().st_mode & 0o777) == "0o600"
    (written,) = (core_project.dir / "migrations").iterdir()
    assert written.name == "intent.to-v1.2026-02-01T000000Z.json"
    assert json.loads(written.read_bytes()) == manifest
    described = {"bytes": len(FIXTURE.read_bytes()), "sha256": canonical.sha256_hex(FIXTURE.read_bytes()),
                 "events": 4, "head_hash": read_all(core_project, "intent", TEST_LAYOUT)[0][-1]["event_hash"]}
    assert manifest == {"stream": "intent", "from_versions": [1], "to_version": 1, "identical": True,
                        "migrated_at": "2026-02-01T00:00:00Z", "source": described, "target": described}
    assert not list((core_project.dir / "streams").glob("*tmp*"))


def _v2(value):
    return "ok" if value in (1, 2) and type(value) is int else ("future" if type(value) is int and value > 2 else "invalid")


def test_a_migration_step_re_chains_every_event(core_project):
    layout2 = ChainLayout("sequence", "prev_hash", "event_hash", "schema_version", _v2)
    write_stream(core_project, "intent", FIXTURE.read_bytes())
    manifest = migrate_stream(core_project, "intent", layout2, target_version=2,
                              steps={1: (2, lambda body: {**body, "actor_kind": body["actor"]})})
    events, stream = read_all(core_project, "intent", layout2)
    assert [e["schema_version"] for e in events] == [2, 2, 2, 2]
    assert [e["actor_kind"] for e in events] == ["user", "user", "agent", "user"]
    assert manifest["identical"] is False and manifest["target"]["head_hash"] == stream.position.hash
    with pytest.raises(LoopstateError) as info:  # this version's readers now refuse it
        read_all(core_project, "intent", TEST_LAYOUT)
    assert info.value.code is ErrorCode.FUTURE_SCHEMA


def test_a_migration_with_no_path_to_the_target_is_refused_and_changes_nothing(core_project):
    layout2 = ChainLayout("sequence", "prev_hash", "event_hash", "schema_version", _v2)
    path = write_stream(core_project, "intent", FIXTURE.read_bytes())
    with pytest.raises(LoopstateError) as info:
        migrate_stream(core_project, "intent", layout2, target_version=2)
    assert info.value.code is ErrorCode.INVALID_PARAMS and "no migration path" in info.value.message
    assert path.read_bytes() == FIXTURE.read_bytes()
    assert not (core_project.dir / "migrations").exists()


def test_a_migration_refuses_a_corrupt_chain_and_changes_nothing(core_project):
    data = FIXTURE.read_bytes().replace(b"survive a crash", b"survive a crush")
    path = write_stream(core_project, "intent", data)
    with pytest.raises(ChainError):
        migrate_stream(core_project, "intent", TEST_LAYOUT, target_version=1)
    assert path.read_bytes() == data
    assert not (core_project.dir / "migrations").exists()


def test_a_migration_refuses_a_torn_tail_until_it_is_quarantined(core_project):
    path = write_stream(core_project, "intent", FIXTURE.read_bytes() + b'{"sche')
    with pytest.raises(LoopstateError) as info:
        migrate_stream(core_project, "intent", TEST_LAYOUT, target_version=1)
    assert info.value.code is ErrorCode.CONFLICT and "partial line" in info.value.message
    assert path.read_bytes().endswith(b'{"sche')


def _future_stream(core_project):
    events, lines = sealed_lines([event(1), event(2, schema_version=2)], TEST_LAYOUT)
    return write_stream(core_project, "core", b"".join(lines)), lines


def test_a_future_schema_is_refused_on_read_and_on_mutation(core_project):
    path, lines = _future_stream(core_project)
    data = path.read_bytes()
    for attempt in (lambda: read_all(core_project, "core", TEST_LAYOUT),
                    lambda: Ledger(core_project, "core", TEST_LAYOUT).refresh(),
                    lambda: Ledger(core_project, "core", TEST_LAYOUT).mutation().__enter__(),
                    lambda: migrate_stream(core_project, "core", TEST_LAYOUT, target_version=1)):
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
