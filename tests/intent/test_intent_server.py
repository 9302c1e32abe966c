"""The intent domain through a real `loopstate serve` over stdio: the purge reaches subscribers."""

from __future__ import annotations

import os
import sys
from pathlib import Path

import pytest

from loopstate_protocol.client import LoopstateClient, RpcError

pytestmark = pytest.mark.both_stores  # docs/storage.md, *Which tests run on PostgreSQL*

SERVE = [sys.executable, "-m", "loopstate.cli.main", "serve"]
DOOMED = "The launch codename is Bluebird"


@pytest.fixture
def server(data_dir: Path, tmp_path: Path):
    log = open(tmp_path / "serve.log", "wb")
    client = LoopstateClient(SERVE, env=dict(os.environ, LOOPSTATE_DATA_DIR=str(data_dir)), stderr=log).start()
    log.close()
    client.initialize()
    yield client
    client.close()


def claim(task_id: str, statement: str) -> dict:
    return {"kind": "intent.claim_add", "task_id": task_id, "claim": {
        "statement": statement, "role": "user", "epistemic_status": "explicit", "facets": ["outcome"]}}


def statements(snapshot: dict) -> set[str]:
    return {c["statement"] for by_status in snapshot["by_facet"].values() for claims in by_status.values() for c in claims}


@pytest.mark.jsonl_only("purge rewrites the intent file; on PostgreSQL it is refused (tests/team/test_team_proofs_on_pg.py)")
def test_a_snapshot_subscriber_sees_claims_arrive_and_a_purge_take_one_away(server: LoopstateClient, root: Path):
    task = server.execute(str(root), {"kind": "intent.task_start", "label": "live"}, "r1").events[0]["task_id"]
    sub = server.subscribe(str(root), f"intent/snapshot/{task}")
    assert statements(sub.snapshot) == set()
    server.execute(str(root), claim(task, DOOMED), "r2")
    server.execute(str(root), claim(task, "Ship on Monday"), "r3")
    seen = server.next_change(timeout=30)
    while statements(seen.snapshot) != {DOOMED, "Ship on Monday"}:
        seen = server.next_change(timeout=30)
    doomed = next(c["claim_id"] for c in server.query(str(root), {"kind": "intent.audit"})["claims"] if c["statement"] == DOOMED)
    server.execute(str(root), {"kind": "intent.purge", "target": "claim", "id": doomed, "confirm": True}, "r4")
    after = server.next_change(timeout=30)
    assert statements(after.snapshot) == {"Ship on Monday"}
    assert after.head.sequence == 2


def start_server(data_dir: Path, log_path: Path) -> LoopstateClient:
    log = open(log_path, "wb")
    client = LoopstateClient(SERVE, env=dict(os.environ, LOOPSTATE_DATA_DIR=str(data_dir)), stderr=log).start()
    log.close()
    client.initialize()
    return client


def test_private_events_live_in_the_sidecar_and_die_with_it(server: LoopstateClient, root: Path, data_dir: Path,
                                                            tmp_path: Path):
    start = {"kind": "intent.task_start", "mode": "private", "host_session_id": "codex-session-7",
             "initial_claims": [{"statement": DOOMED, "role": "user", "epistemic_status": "explicit", "facets": ["outcome"]}]}
    result = server.execute(str(root), start, "p1")
    task = result.events[0]["task_id"]
    assert result.head.sequence == 0
    view = server.query(str(root), {"kind": "intent.snapshot", "task_id": task})
    assert statements(view) == {DOOMED}
    at_rest = b"".join(f.read_bytes() for f in data_dir.rglob("*") if f.is_file())
    assert DOOMED.encode() not in at_rest and b"codex-session-7" not in at_rest
    server.close()
    again = start_server(data_dir, tmp_path / "serve-2.log")
    try:
        with pytest.raises(RpcError) as refused:
            again.execute(str(root), claim(task, "after the restart"), "p2")
        assert refused.value.code == "PRIVACY_VIOLATION"
        recovered = again.execute(str(root), {"kind": "intent.private_recover", "host_session_id": "codex-session-7",
                                              "action": "durable_on"}, "p3")
        assert recovered.events[0]["payload"] == {"mode": "on", "label": None, "initial_claims": [], "reenabled_from_private": True}
        assert statements(again.query(str(root), {"kind": "intent.snapshot", "task_id": task})) == set()
    finally:
        again.close()
