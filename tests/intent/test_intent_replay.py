"""Replay and concurrency: the ledger alone rebuilds every view; purge keeps a verifiable chain;
private-session ownership holds across processes."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import msgspec
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from intentkit import Intent, ledger_events, user_claim
from loopstate.core.clock import FixedClock
from loopstate.core.ids import SequentialIds
from loopstate.domains.intent import DOMAIN
from loopstate.service import Service
from loopstate_protocol import intent as p
from tests.conftest import store_env


def fresh(data_dir: Path, root: Path) -> Intent:
    intent = Intent(Service(data_dir=data_dir, clock=FixedClock("2026-01-01T00:00:00Z"), new_id=SequentialIds(5),
                            domains=[DOMAIN]), root)
    intent.n = 1000
    return intent


def encoded(value) -> str:
    """Content, not key order: in-process state keeps decide's dicts, a reader the canonical ones."""
    return json.dumps(msgspec.to_builtins(value), sort_keys=True)


def test_a_new_process_folds_the_same_views_from_the_ledger(it: Intent, data_dir, root):
    task = it.start(user_claim("Keep the API stable", "hard_constraint"))
    a = it.add(task, "Use tabs")
    it.replace(task, [a], "Use spaces")
    it.add(task, "Which CI?", actor="agent", status="unknown", facets=("unknown",))
    it.add(task, "Needs a cache", status="disputed", facets=("disagreement",))
    other = fresh(data_dir, root)
    for query in (p.IntentSnapshot(task_id=task), p.IntentAudit(), p.IntentCompact(task_id=task),
                  p.IntentHookContext(task_id=task), p.IntentTasks(), p.IntentExport()):
        assert encoded(other.ask(query)) == encoded(it.ask(query)), type(query).__name__


OPS = st.lists(
    st.tuples(st.sampled_from(["add", "replace", "invalidate", "task"]), st.integers(0, 50), st.integers(0, 50)),
    min_size=1, max_size=14,
)


@pytest.mark.jsonl_only("purge rewrites the intent file; on PostgreSQL it is refused (tests/team/test_team_proofs_on_pg.py)")
@pytest.mark.slow
@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(ops=OPS, victim=st.integers(0, 50), whole_task=st.booleans())
def test_purge_leaves_a_chain_that_verifies_and_views_without_the_victim(tmp_path_factory, ops, victim, whole_task):
    base = tmp_path_factory.mktemp("purge")
    root = base / "ws"
    root.mkdir()
    data_dir = base / "data"
    it = Intent(Service(data_dir=data_dir, clock=FixedClock("2026-01-01T00:00:00Z"), new_id=SequentialIds(),
                        domains=[DOMAIN]), root)
    tasks = [it.start()]
    live: list[tuple[str, str]] = []  # (task, claim)
    for n, (op, pick, acting) in enumerate(ops):
        if op == "task":
            tasks.append(it.start(user_claim(f"initial {n}", scope="project")))
            live.extend((tasks[-1], c.claim_id) for c in it.audit(tasks[-1]).claims)
        elif op == "add" or not live:
            task = tasks[pick % len(tasks)]
            live.append((task, it.add(task, f"claim {n}", scope="project")))
        elif op == "replace":  # possibly from another task: a later task overriding a project rule
            _, old = live.pop(pick % len(live))
            task = tasks[acting % len(tasks)]
            live.append((task, it.replace(task, [old], f"replacement {n}", scope="project")))
        else:
            _, old = live.pop(pick % len(live))
            it.run(p.IntentClaimInvalidate(task_id=tasks[acting % len(tasks)], claim_id=old))
    everything = it.audit().claims
    if whole_task:
        target = tasks[victim % len(tasks)]
        it.run(p.IntentPurge(target="task", id=target, confirm=True))
        gone = {c.claim_id for c in everything if c.task_id == target} | {target}
    else:
        target = everything[victim % len(everything)].claim_id if everything else tasks[0]
        kind = "claim" if everything else "task"
        it.run(p.IntentPurge(target=kind, id=target, confirm=True))
        gone = {target}
    events = ledger_events(data_dir)
    assert [e["sequence"] for e in events] == list(range(1, len(events) + 1))
    text = "".join(json.dumps(e) for e in events)
    assert not any(g in text for g in gone)
    # A new process verifies every hash from the first byte and agrees with this one.
    other = fresh(data_dir, root)
    assert encoded(other.audit()) == encoded(it.audit())
    assert not gone & {c.claim_id for c in other.audit().claims}
    survivors = {c.claim_id: c for c in other.audit().claims}
    for claim in everything:
        if claim.claim_id in survivors and claim.state != "active":
            assert survivors[claim.claim_id].state != "active"  # a purge never revives a claim


CHILD = """
import sys
from loopstate.core.errors import LoopstateError
from loopstate.domains.intent import DOMAIN
from loopstate.service import Service
from loopstate_protocol import intent as p
try:
    Service(domains=[DOMAIN]).execute(sys.argv[1], p.IntentTaskStart(mode="private", host_session_id="shared-session"),
                                      "start-" + sys.argv[2])
    print("won")
except LoopstateError as exc:
    print(exc.code.value)
"""


def test_private_session_ownership_is_compare_and_set_across_processes(root, data_dir):
    env = {"LOOPSTATE_DATA_DIR": str(data_dir), "PATH": "/usr/bin:/bin", **store_env()}
    children = [
        subprocess.Popen([sys.executable, "-c", CHILD, str(root), str(n)], stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                         text=True, env=env)
        for n in range(4)
    ]
    results = sorted(child.communicate(timeout=120)[0].strip() for child in children)
    assert results == ["CONFLICT", "CONFLICT", "CONFLICT", "won"]
    assert len(list(data_dir.glob("projects/*/private-sessions/*.json"))) == 1
