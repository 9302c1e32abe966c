"""Retired claims kept as their places in the stream (domains/intent/retired.py), read back and checked.

A long-lived process holds a superseded or invalidated claim as a fixed-size
entry, not as its content: these tests check that what the audit shows after
a restart (a fresh CLI process, with and without the projection snapshot) is
exactly what a fold of the ledger's events in memory shows, that the snapshot
holds no retired claim's text, and that a byte changed under a retired claim
is reported as a corrupt ledger, never shown as if true.
"""

from __future__ import annotations

import datetime as dt
import json
import subprocess
import sys
from pathlib import Path

import msgspec
import pytest

from intentkit import Intent, ledger_events, user_claim
from loopstate_protocol import intent as p
from loopstate_protocol.errors import ErrorCode

from loopstate.core import canonical
from loopstate.core.errors import LoopstateError
from loopstate.core.project import Project
from loopstate.domains.intent import DOMAIN as INTENT
from loopstate.domains.intent import projections, retired
from loopstate.service import Service
from tests.conftest import snapshot_file, store_env

pytestmark = pytest.mark.both_stores  # docs/storage.md, *Which tests run on PostgreSQL*

LOOPSTATE = Path(sys.executable).parent / "loopstate"
NOW = dt.datetime(2026, 1, 2, tzinfo=dt.timezone.utc)


def cli(root: Path, data_dir: Path, *args: str) -> subprocess.CompletedProcess:
    env = {"LOOPSTATE_DATA_DIR": str(data_dir), "PATH": "/usr/bin:/bin", **store_env()}
    return subprocess.run([str(LOOPSTATE), *args, "--root", str(root)], capture_output=True, text=True, env=env, timeout=60)


def history(it: Intent) -> tuple[str, dict[str, str]]:
    """A task whose claims were superseded twice over, one invalidated with a reason, one still active."""
    task = it.start(user_claim("first wording of the rule"))
    first = it.audit(task).claims[0].claim_id
    second = it.replace(task, [first], "second wording of the rule")
    third = it.replace(task, [second], "third wording of the rule")
    dropped = it.add(task, "a rule dropped later", facets=("hard_constraint",))
    it.run(p.IntentClaimInvalidate(task_id=task, claim_id=dropped, reason="the user took it back"))
    return task, {"first": first, "second": second, "third": third, "dropped": dropped}


def in_memory_audit(data_dir: Path, project_id: str, task: str) -> dict:
    """The audit of a state folded from the ledger's events in memory (no places: every claim held whole)."""
    state = INTENT.initial("intent")
    for event in ledger_events(data_dir):
        INTENT.evolve(state, event)
    assert not state.section(task).retired  # the reference holds its claims, not places
    view = projections.audit(state, project_id, task, NOW, limit=100, cursor=None)
    return msgspec.to_builtins(view)


def without_stale(view: dict) -> dict:
    """A view without what depends on the reader's clock."""
    return {**view, "claims": [{k: v for k, v in c.items() if k != "stale"} for c in view["claims"]]}


def test_an_audit_after_a_restart_shows_the_retired_claims_exactly_as_written(it, svc, root, data_dir):
    task, ids = history(it)
    section = svc.folded(svc.project(str(root)), INTENT, "intent").state.section(task)
    assert len(section.retired) == 3 and len(bytes(section.retired)) == 3 * retired.SIZE and not section.kept  # three retired entries, no claim text
    assert list(section.active) == [ids["third"]]
    expected = without_stale(in_memory_audit(data_dir, svc.project(str(root)).project_id, task))
    by_id = {c["claim_id"]: c for c in expected["claims"]}
    assert by_id[ids["first"]]["statement"] == "first wording of the rule"
    assert by_id[ids["first"]]["superseded_by"] == ids["second"]
    assert by_id[ids["dropped"]]["invalidation_reason"] == "the user took it back"

    for moment in ("writer's snapshot or none", "after compact"):
        if moment == "after compact":
            assert cli(root, data_dir, "compact", "intent").returncode == 0
        done = cli(root, data_dir, "intent", "audit", "--task", task, "--json")
        assert done.returncode == 0, done.stderr
        shown = without_stale(json.loads(done.stdout))
        assert shown["claims"] == expected["claims"], moment
        assert shown["edges"] == expected["edges"] == [
            {"new": ids["second"], "old": ids["first"], "relation": "supersedes"},
            {"new": ids["third"], "old": ids["second"], "relation": "supersedes"},
        ]
    # In-process after a restart from that snapshot, too (a fresh Service reads it).
    fresh = Service(data_dir=data_dir, domains=[INTENT])
    assert without_stale(msgspec.to_builtins(fresh.query(str(root), p.IntentAudit(task_id=task))))["claims"] == expected["claims"]


def test_the_snapshot_holds_places_not_the_retired_claims_text(it, root, data_dir):
    task, _ = history(it)
    assert cli(root, data_dir, "compact", "intent").returncode == 0
    held = snapshot_file(Project(str(root), data_dir=data_dir), "intent")[0].read_bytes()
    assert b"third wording of the rule" in held  # the active claim
    for retired_text in (b"first wording", b"second wording", b"a rule dropped later", b"the user took it back"):
        assert retired_text not in held


def stream_file(data_dir: Path) -> Path:
    (path,) = data_dir.glob("projects/*/streams/intent.jsonl")
    return path


def edit_line(path: Path, needle: bytes, change, *, rehash: bool) -> None:
    """Change the line holding ``needle`` in place, the same number of bytes (with a valid hash when ``rehash``)."""
    lines = path.read_bytes().split(b"\n")
    (at,) = [i for i, line in enumerate(lines) if needle in line]
    edited = change(lines[at])
    if rehash:
        event = canonical.decode(edited)
        event.pop("event_hash")
        event["event_hash"] = canonical.sha256_hex(canonical.encode(event))
        edited = canonical.encode(event)
    assert len(edited) == len(lines[at])
    lines[at] = edited
    path.write_bytes(b"\n".join(lines))


@pytest.mark.jsonl_only("edits the stream file")
@pytest.mark.parametrize("rehash", [False, True], ids=["byte changed", "line rewritten with a valid hash"])
def test_a_changed_record_under_a_retired_claim_is_reported_never_shown(it, svc, root, data_dir, rehash):
    task, _ = history(it)
    assert cli(root, data_dir, "compact", "intent").returncode == 0
    state = svc.folded(svc.project(str(root)), INTENT, "intent").state
    edit_line(stream_file(data_dir), b"first wording", lambda line: line.replace(b"first wording", b"FIRST wording"),
              rehash=rehash)

    # The long-lived process's state reads its retired claims back from the stream: the change is caught there...
    with pytest.raises(LoopstateError) as caught:
        state.task_claims(task)
    assert caught.value.code == ErrorCode.CORRUPT_LEDGER
    # ...and on every path a read takes: the service's own read, a fresh CLI process.
    with pytest.raises(LoopstateError) as caught:
        it.audit(task)
    assert caught.value.code == ErrorCode.CORRUPT_LEDGER
    done = cli(root, data_dir, "intent", "audit", "--task", task, "--json")
    assert done.returncode != 0 and "FIRST" not in done.stdout
    assert "CORRUPT_LEDGER" in done.stdout + done.stderr or "corrupt" in (done.stdout + done.stderr).lower()


def test_a_refusal_on_a_retired_claim_reads_it_back(it, root):
    task, ids = history(it)
    with pytest.raises(LoopstateError) as refused:
        it.run(p.IntentClaimInvalidate(task_id=task, claim_id=ids["first"]))
    assert refused.value.code == ErrorCode.INVALID_TRANSITION
    assert "already superseded" in refused.value.message


@pytest.mark.jsonl_only("purge rewrites the intent file; on PostgreSQL it is refused (tests/team/test_team_proofs_on_pg.py)")
def test_after_a_purge_rewrites_the_stream_the_retired_claims_are_read_from_the_new_file(it, svc, root, data_dir):
    """A purge re-chains the stream (every later line moves): the state is folded again, so no place dangles."""
    doomed = it.start(user_claim("a task the user wants forgotten"))
    it.replace(doomed, [it.audit(doomed).claims[0].claim_id], "its second wording")
    task, ids = history(it)
    before = without_stale(msgspec.to_builtins(it.audit(task)))
    it.run(p.IntentPurge(target="task", id=doomed, confirm=True))
    assert b"a task the user wants forgotten" not in stream_file(data_dir).read_bytes()
    after = without_stale(msgspec.to_builtins(it.audit(task)))
    assert after["claims"] == before["claims"] and after["edges"] == before["edges"]
    assert {c["statement"] for c in after["claims"]} >= {"first wording of the rule", "a rule dropped later"}
    done = cli(root, data_dir, "intent", "audit", "--task", task, "--json")
    assert done.returncode == 0, done.stderr
    assert without_stale(json.loads(done.stdout))["claims"] == before["claims"]
