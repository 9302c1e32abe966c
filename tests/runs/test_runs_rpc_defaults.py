"""Over a real sidecar on stdio: the server's default grant for a create that names none, and the
kill switch in a run's status (the same service the CLI drives)."""

from __future__ import annotations

import uuid
from pathlib import Path

from tests.rpc.rpckit import Servers, servers  # noqa: F401 (fixture)
from loopstate.domains.runs.grants import default_grant_id

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
    assert status["kill_switch"] == {"set": False, "paths": [], "config_error": None}
    (root / ".loopstate").mkdir()
    (root / ".loopstate" / "STOP").write_text("")
    status = client.query(str(root), {"kind": "runs.status", "run_id": run_id})
    assert status["kill_switch"] == {"set": True, "paths": [".loopstate/STOP"], "config_error": None}
