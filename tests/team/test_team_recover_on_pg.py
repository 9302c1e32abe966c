"""`loopstate recover` on a team's PostgreSQL store, through the real CLI: a damaged stream is cut back to
its verified prefix by the store (the later rows move to its quarantine table), with the same dry run and the
same question before a stream would be left with nothing as on local files. Real server, real processes."""

from __future__ import annotations

import json

import psycopg
import pytest

from loopstate.core.project import Project
from tests.team.test_team_proofs_on_pg import five_events, on_pg  # noqa: F401 (a fixture)


def damage(pg_url: str, project_id: str, sequence: int) -> None:
    """Change one stored line's bytes (its hash no longer matches): what a hand edit of the table does."""
    with psycopg.connect(pg_url, autocommit=True) as conn:
        (line,) = conn.execute("SELECT line FROM loopstate.events WHERE project = %s AND stream = 'intent' "
                               "AND sequence = %s", (project_id, sequence)).fetchone()
        changed = bytes(line).replace(b"Constraint", b"Constrained", 1) if b"Constraint" in bytes(line) \
            else bytes(line).replace(b"Ship", b"Skip", 1)
        assert changed != bytes(line)
        conn.execute("UPDATE loopstate.events SET line = %s WHERE project = %s AND stream = 'intent' AND sequence = %s",
                     (changed, project_id, sequence))


def rows(pg_url: str, project_id: str, table: str) -> int:
    with psycopg.connect(pg_url, autocommit=True) as conn:
        (count,) = conn.execute(f"SELECT count(*) FROM loopstate.{table} WHERE project = %s AND stream = 'intent'",
                                (project_id,)).fetchone()
    return int(count)


@pytest.mark.slow
def test_recover_on_pg_keeps_the_verified_prefix_and_quarantines_the_rest_after_a_dry_run(on_pg, pg_url: str):
    five_events(on_pg)
    project_id = Project(str(on_pg.root), data_dir=on_pg.data_dir).project_id
    damage(pg_url, project_id, 4)
    assert not json.loads(on_pg("verify", "--json", ok=False).stdout)["ok"]

    planned = on_pg("recover", "--dry-run").stdout
    assert "would recover intent: keep 3 verified events; quarantine every event after sequence 3" in planned
    assert "dry run: nothing was written" in planned and rows(pg_url, project_id, "events") == 5

    done = json.loads(on_pg("recover", "--json").stdout)
    (intent,) = [s for s in done["streams"] if s["stream"] == "intent"]
    assert intent["action"] == "recovered" and intent["events"] == 3 and intent["quarantined_events"] == 2
    assert rows(pg_url, project_id, "events") == 3 and rows(pg_url, project_id, "quarantine") == 2
    assert json.loads(on_pg("verify", "--json").stdout)["ok"]
    task = json.loads(on_pg("intent", "tasks", "--json").stdout)["current_task_id"]
    on_pg("intent", "add", task, "After the recovery")  # the stream goes on from its kept head
    assert rows(pg_url, project_id, "events") == 4
    assert "ok        intent: chain holds (4 events)" in on_pg("recover").stdout  # a second run has nothing to do


@pytest.mark.slow
def test_recover_on_pg_asks_before_leaving_nothing_and_refuses_export(on_pg, pg_url: str):
    five_events(on_pg)
    project_id = Project(str(on_pg.root), data_dir=on_pg.data_dir).project_id
    refused = on_pg("recover", "--export", str(on_pg.root / "out"), ok=False)
    assert "--export" in refused.stderr and "loopstate store export" in refused.stderr
    damage(pg_url, project_id, 1)
    refused = on_pg("recover", ok=False)  # no terminal to ask on: refused, nothing cut
    assert "would keep 0 events of intent" in refused.stderr and "--yes" in refused.stderr
    assert rows(pg_url, project_id, "events") == 5 and rows(pg_url, project_id, "quarantine") == 0
    on_pg("recover", "--yes")
    assert rows(pg_url, project_id, "events") == 0 and rows(pg_url, project_id, "quarantine") == 5
