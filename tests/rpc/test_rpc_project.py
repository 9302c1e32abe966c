"""The project messages over a real `loopstate serve` on real stdio: every project query, both
project commands and the three project topics, with changes made by other processes (the CLI)."""

from __future__ import annotations

import os
import re
from pathlib import Path

import msgspec
import pytest
from rpckit import client, run_cli, servers, Servers  # noqa: F401 (fixtures)

from loopstate_protocol import project as proto
from loopstate_protocol.client import LoopstateClient, RpcError
from loopstate_protocol.messages import ChangedNotification, StreamErrorNotification

from loopstate.core.project import Project

ACTOR = {"harness": "manual", "actor": "tester", "session_id": "s-1"}


def create_run(data_dir: Path, root: Path, objective: str) -> str:
    done = run_cli(data_dir, "run", "create", "--root", str(root), "--objective", objective, "--done-gate", "tests pass",
                   "--asset", "app")
    assert done.returncode == 0, done.stderr
    return done.stdout.strip()


def add_todo(data_dir: Path, root: Path, goal: str, title: str) -> None:
    done = run_cli(data_dir, "goals", "add", goal, title, "--root", str(root))
    assert done.returncode == 0, done.stderr


def next_change(client: LoopstateClient, sub_id: str, timeout: float = 30.0):
    """The next notification of this subscription; the others' are kept, in order, for their turn."""
    stash: dict[str, list] = client.__dict__.setdefault("project_stash", {})
    if stash.get(sub_id):
        return stash[sub_id].pop(0)
    while True:
        note = client.next_change(timeout)
        if note.subscription_id == sub_id:
            return note
        stash.setdefault(note.subscription_id, []).append(note)


def test_every_project_query_answers_as_the_cli_does(client: LoopstateClient, root: Path, data_dir: Path) -> None:
    run_id = create_run(data_dir, root, "first")
    add_todo(data_dir, root, "payments", "write the parser")
    r = str(root)

    info = msgspec.convert(client.query(r, {"kind": "project.root", "path": str(root)}), proto.RootInfo)
    cli_root = msgspec.json.decode(run_cli(data_dir, "root", str(root), "--json").stdout)
    assert msgspec.to_builtins(info) == cli_root
    assert info.exists and info.project_id == Project(r, data_dir=data_dir).project_id

    listed = msgspec.convert(client.query(r, {"kind": "project.runs"}), proto.RunList)
    cli_runs = msgspec.json.decode(run_cli(data_dir, "run", "list", "--json", "--root", r).stdout)
    assert [row.run_id for row in listed.runs] == [row["run_id"] for row in cli_runs["runs"]] == [run_id]
    assert listed.runs[0].objective == "first" and listed.total == 1 and listed.kill_switch.set is False
    assert msgspec.convert(client.query(r, {"kind": "project.runs", "status": ["complete"]}), proto.RunList).runs == []

    goals = msgspec.convert(client.query(r, {"kind": "project.goals"}), proto.GoalList)
    assert [g.goal_id for g in goals.goals] == ["payments"]
    assert goals.goals[0].status_counts and goals.goals[0].active_total == 1

    assert client.query(r, {"kind": "project.kill_switch"}) == {"set": False, "paths": [], "config_error": None,
                                                                  "shared": None}

    verified = client.query(r, {"kind": "project.verify"})
    cli_verify = msgspec.json.decode(run_cli(data_dir, "verify", "--json", "--root", r).stdout)
    assert verified == cli_verify and verified["ok"] is True

    stream = f"runs.{run_id}"
    page = msgspec.convert(client.query(r, {"kind": "project.log", "stream": stream, "limit": 1}), proto.LogPage)
    everything = msgspec.json.decode(run_cli(data_dir, "log", "--json", "--root", r, "--stream", stream).stdout)
    (whole,) = everything["streams"]
    assert page.event_count == whole["event_count"] and len(page.events) == 1
    assert page.events == whole["events"][:1]
    seen = list(page.events)
    while page.next_after is not None:
        page = msgspec.convert(client.query(r, {"kind": "project.log", "stream": stream, "after": page.next_after,
                                                "limit": 1}), proto.LogPage)
        seen += page.events
    assert seen == whole["events"]
    assert page.head.sequence == whole["head"]["sequence"]


def test_bad_project_queries_are_refused_with_what_to_do(client: LoopstateClient, root: Path) -> None:
    r = str(root)
    with pytest.raises(RpcError) as missing:
        client.query(r, {"kind": "project.log", "stream": "runs.nope"})
    assert missing.value.code == "NOT_FOUND" and "loopstate log" in missing.value.message
    with pytest.raises(RpcError) as limit:
        client.query(r, {"kind": "project.log", "stream": "intent", "limit": 0})
    assert limit.value.code == "INVALID_PARAMS"
    with pytest.raises(RpcError) as status:
        client.query(r, {"kind": "project.runs", "status": ["sleeping"]})
    assert status.value.code == "INVALID_PARAMS"
    with pytest.raises(RpcError) as path:
        client.query(r, {"kind": "project.root", "path": str(root / "not-there")})
    assert path.value.code == "INVALID_ROOT" and "does not exist" in path.value.message
    with pytest.raises(RpcError) as topic:
        client.subscribe(r, "project/nothing")
    assert topic.value.code == "INVALID_PARAMS" and "project/runs" in topic.value.message
    with pytest.raises(RpcError) as since:
        client.subscribe(r, "project/runs", since=0)
    assert since.value.code == "INVALID_PARAMS"
    with pytest.raises(RpcError) as events:
        client.subscribe(r, "project/runs", deliver="events")
    assert events.value.code == "INVALID_PARAMS"
    with pytest.raises(RpcError) as actor:
        client.execute(r, {"kind": "project.stop", "actor": {"harness": "nobody"}})
    assert actor.value.code == "VALIDATION_FAILED"
    assert not (root / ".loopstate" / "STOP").exists(), "a refused stop sets no switch"


@pytest.mark.jsonl_only("expects the STOP file alone removed; on a shared store run unstop lifts the shared stop too (tests/team)")
def test_stop_and_resume_over_the_wire_with_the_topics_pushed(client: LoopstateClient, root: Path, data_dir: Path) -> None:
    r = str(root)
    run_id = create_run(data_dir, root, "to halt")
    runs_sub = client.subscribe(r, "project/runs")
    switch_sub = client.subscribe(r, "project/kill_switch")
    assert runs_sub.snapshot["kill_switch"]["set"] is False and runs_sub.head.sequence == 1
    assert runs_sub.head.stream == "project/runs"

    stopped = client.execute(r, {"kind": "project.stop", "actor": ACTOR}, "stop-1")
    assert stopped.head is None and stopped.events == []
    outcome = stopped.project
    assert isinstance(outcome, proto.StopOutcome)
    assert outcome.halted == [run_id] and outcome.state.set and (root / ".loopstate" / "STOP").exists()
    again = client.execute(r, {"kind": "project.stop", "actor": ACTOR}, "stop-1")
    assert again.replayed is True and again.project.halted == [run_id]

    note = next_change(client, switch_sub.subscription_id)
    assert note.snapshot["set"] is True and note.previous_sequence == 1 and note.head.sequence == 2
    while True:
        note = next_change(client, runs_sub.subscription_id)
        if note.snapshot["runs"][0]["status"] == "halted_kill_switch" and note.snapshot["kill_switch"]["set"]:
            break

    resumed = client.execute(r, {"kind": "project.resume", "actor": ACTOR}, "resume-1")
    assert isinstance(resumed.project, proto.ResumeOutcome)
    assert resumed.project.removed == [str(root / ".loopstate" / "STOP")] and resumed.project.state.set is False
    assert resumed.project.halted_runs == [run_id] and "runs.resume" in resumed.project.note
    note = next_change(client, switch_sub.subscription_id)
    assert note.snapshot["set"] is False

    # By hand, as a user does: the topic follows the file.
    (root / ".loopstate" / "STOP").write_text("by hand\n")
    assert next_change(client, switch_sub.subscription_id).snapshot["set"] is True
    os.unlink(root / ".loopstate" / "STOP")
    assert next_change(client, switch_sub.subscription_id).snapshot["set"] is False


def test_a_switch_outside_loopstate_is_reported_not_removed(client: LoopstateClient, root: Path) -> None:
    seed = root / ".the-loop" / "STOP"
    seed.parent.mkdir()
    seed.write_text("the user's own\n")
    (root / ".loopstate").mkdir()
    (root / ".loopstate" / "STOP").write_text("ours\n")
    resumed = client.execute(str(root), {"kind": "project.resume"}, "resume-outside")
    assert resumed.project.removed == [str(root / ".loopstate" / "STOP")]
    assert [k.path for k in resumed.project.kept] == [str(seed)] and "yourself" in resumed.project.kept[0].reason
    assert seed.exists() and resumed.project.state.set is True


def test_project_topics_follow_runs_and_goals_created_by_other_processes(
        client: LoopstateClient, root: Path, data_dir: Path) -> None:
    r = str(root)
    runs_sub = client.subscribe(r, "project/runs")
    goals_sub = client.subscribe(r, "project/goals")
    assert runs_sub.snapshot["runs"] == [] and goals_sub.snapshot == {"goals": []}
    run_id = create_run(data_dir, root, "from the cli")
    while True:
        note = next_change(client, runs_sub.subscription_id)
        if note.snapshot["runs"]:
            break
    assert note.snapshot["runs"][0]["run_id"] == run_id
    add_todo(data_dir, root, "g1", "first todo")
    while True:
        note = next_change(client, goals_sub.subscription_id)
        if note.snapshot["goals"]:
            break
    assert note.snapshot["goals"][0]["goal_id"] == "g1"


@pytest.mark.jsonl_only("corrupts the stream file")
def test_a_corrupt_run_stream_is_a_stream_error_then_recover_pushes_rewritten(
        client: LoopstateClient, root: Path, data_dir: Path) -> None:
    r = str(root)
    run_id = create_run(data_dir, root, "will break")
    assert run_cli(data_dir, "run", "acquire", run_id[:8], "--root", r).returncode == 0
    sub = client.subscribe(r, "project/runs")
    path = Project(r, data_dir=data_dir).dir / "streams" / f"runs.{run_id}.jsonl"
    data = path.read_bytes()
    last = data.rstrip(b"\n").rindex(b"\n") + 1  # the second record: the first is kept by recover
    digit = re.search(rb"[0-9a-f]{64}", data[last:])
    assert digit is not None
    at = last + digit.start()
    with open(path, "r+b") as out:  # one hex digit of a hash in the last record, still valid JSON
        out.seek(at)
        out.write(b"0" if data[at:at + 1] != b"0" else b"1")
    while True:
        note = client.next_change(30)
        if isinstance(note, StreamErrorNotification) and note.subscription_id == sub.subscription_id:
            break
    assert note.error.code == "CORRUPT_LEDGER"
    done = run_cli(data_dir, "recover", "--root", r)
    assert done.returncode == 0, done.stderr
    while True:
        note = client.next_change(30)
        if isinstance(note, ChangedNotification) and note.subscription_id == sub.subscription_id:
            break
    assert note.rewritten is True and [row["run_id"] for row in note.snapshot["runs"]] == [run_id]
    create_run(data_dir, root, "after recover")  # and the subscription goes on
    while True:
        note = next_change(client, sub.subscription_id)
        if len(note.snapshot["runs"]) == 2:
            break
    assert note.rewritten is False


def test_initialize_advertises_the_project_topics(servers: Servers) -> None:
    c = servers.start(initialize=False)
    caps = c.initialize()["capabilities"]["experimental"]["loopstate"]
    assert {"project/runs", "project/goals", "project/kill_switch"} <= set(caps["topics"])


@pytest.mark.jsonl_only("corrupts the stream file")
def test_a_domain_topic_after_a_stream_error_gets_the_recovered_stream_as_rewritten(
        client: LoopstateClient, root: Path, data_dir: Path) -> None:
    """The same recovery for a domain topic: streamError, then `loopstate recover` in another process,
    then changed with rewritten: true and the kept prefix, and the subscription goes on."""
    r = str(root)
    for label in ("one", "two"):
        assert run_cli(data_dir, "intent", "start", "--root", r, "--label", label, "--request-id", label).returncode == 0
    sub = client.subscribe(r, "intent/tasks")
    path = Project(r, data_dir=data_dir).dir / "streams" / "intent.jsonl"
    data = path.read_bytes()
    at = data.index(b'"label":"two"') + len(b'"label":"t')
    with open(path, "r+b") as out:
        out.seek(at)
        out.write(b"W")
    while True:
        note = client.next_change(30)
        if isinstance(note, StreamErrorNotification) and note.subscription_id == sub.subscription_id:
            break
    assert note.error.code == "CORRUPT_LEDGER"
    done = run_cli(data_dir, "recover", "--root", r)
    assert done.returncode == 0, done.stderr
    note = next_change(client, sub.subscription_id)
    assert isinstance(note, ChangedNotification) and note.rewritten is True
    assert [t["label"] for t in note.snapshot] == ["one"] and note.head.sequence == 1
    assert run_cli(data_dir, "intent", "start", "--root", r, "--label", "three", "--request-id", "3").returncode == 0
    note = next_change(client, sub.subscription_id)
    assert note.rewritten is False and [t["label"] for t in note.snapshot] == ["one", "three"]
