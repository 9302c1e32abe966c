"""`run create` writes its two events as one batch, and `loopstate validate audit_event`
accepts the marker loopstate writes and refuses a malformed one."""

from __future__ import annotations

import pytest

import json

from loopstate.cli.main import main
from loopstate.core import canonical
from loopstate.service.engine import Service


@pytest.mark.jsonl_only("reads and edits the stream file")
def test_run_create_is_one_batch_and_validate_checks_the_marker(root, data_dir, capsys, tmp_path):
    assert main(["run", "create", "--root", str(root), "--objective", "o", "--done-gate", "g", "--asset", "app", "--json"]) == 0
    run_id = json.loads(capsys.readouterr().out)["run_id"]
    path = Service().project(str(root)).dir / "streams" / f"runs.{run_id}.jsonl"
    events = [canonical.decode(line) for line in path.read_bytes().splitlines()]
    assert [(e["type"], e["batch"]) for e in events] == [("run_created", [1, 2]), ("authority_granted", [2, 2])]
    written = tmp_path / "event.json"
    written.write_text(json.dumps(events[1]))
    assert main(["validate", "audit_event", str(written)]) == 0
    capsys.readouterr()
    for bad in ([2, 1], [1, 1], [0, 2], ["1", 2], [1, 2, 3], "1/2", [True, 2]):
        written.write_text(json.dumps({**events[1], "batch": bad}))
        assert main(["validate", "audit_event", str(written)]) == 1, bad
        assert "$.batch" in capsys.readouterr().err

