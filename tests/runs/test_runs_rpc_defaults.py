"""Over a real sidecar on stdio: the server's default grant for a create that names none, the
kill switch in a run's status, and runs.stop setting the switch whatever the config (the same
service the CLI drives)."""

from __future__ import annotations

import uuid
from pathlib import Path

import pytest

from loopstate_protocol.client import RpcError

from loopstate.domains.runs.grants import default_grant_id
from tests.rpc.rpckit import Servers, servers  # noqa: F401 (fixture)

USER = {"harness": "manual", "actor": "synthetic-user", "session_id": "terminal"}
ASSET = {"name": "synthetic-asset", "root": ".", "track": "code", "boundaries": ["repository-local files"]}


def test_a_create_without_a_grant_gets_the_default_local_authority_and_status_shows_the_switch(
        servers: Servers, root: Path) -> None:
    client = servers.start()
    run_id = str(uuid.uuid4())
    command = {"kind": "runs.create", "run_id": run_id, "asset": ASSET, "objective": "One artifact.",
               "done_gate": ["The check passes."], "actor": USER}
    created = client.execute(str(root), command, request_id="create-1")
    granted = [e for e in created.events if e["type"] == "authority_granted"]
    assert granted and granted[0]["data"]["grant_id"] == default_grant_id(run_id)
    grant = client.query(str(root), {"kind": "runs.grant_show", "grant_id": default_grant_id(run_id)})
    assert grant["level"] == "attended" and grant["scope"]["assets"] == ["synthetic-asset"]
    assert grant["scope"]["actions"] == ["local_write"] and grant["scope"]["destinations"] == ["repository"]
    again = client.execute(str(root), command, request_id="create-1")
    assert again.replayed is True and again.events == created.events

    status = client.query(str(root), {"kind": "runs.status", "run_id": run_id})
    assert status["kill_switch"] == {"set": False, "paths": [], "config_error": None, "shared": None}
    (root / ".loopstate").mkdir()
    (root / ".loopstate" / "STOP").write_text("")
    status = client.query(str(root), {"kind": "runs.status", "run_id": run_id})
    assert status["kill_switch"] == {"set": True, "paths": [".loopstate/STOP"], "config_error": None, "shared": None}


def test_runs_stop_sets_the_switch_even_when_the_config_is_invalid(servers: Servers, root: Path) -> None:
    client = servers.start()
    run_id = str(uuid.uuid4())
    client.execute(str(root), {"kind": "runs.create", "run_id": run_id, "asset": ASSET, "objective": "One artifact.",
                               "done_gate": ["The check passes."], "actor": USER}, request_id="create-2")
    (root / ".loopstate").mkdir()
    (root / ".loopstate" / "config.json").write_text('{"default_mode": "sometimes"}')
    with pytest.raises(RpcError) as refused:
        client.execute(str(root), {"kind": "runs.stop", "run_id": run_id, "actor": USER}, request_id="stop-1")
    assert refused.value.code == "VALIDATION_FAILED"
    assert (root / ".loopstate" / "STOP").is_file()
