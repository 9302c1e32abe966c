"""Issue 29: one stage of a run is open at a time.

Starting another stage while one is open (started, not completed) is refused,
naming the open stage and the command that completes it; starting the open
stage again is a retry. A stream written before the rule, whose stages overlap,
still folds, verifies and reads, and its later start is the open stage. The
run state's projection snapshot carries a layout, so a snapshot from before the
open stage was folded is never read as a state with no open stage.
"""

from __future__ import annotations

from pathlib import Path

import msgspec
import pytest

from loopstate_protocol import runs as proto

from loopstate.core import snapshot
from loopstate.domains.runs import DOMAIN, decide, run_stream
from loopstate.domains.runs.state import RunSnapshot, RunState
from loopstate.service.engine import Service
from tests.conftest import snapshot_file
from tests.runs.clikit import Cli
from tests.runs.conftest import lease_args


@pytest.fixture
def cli(root: Path, data_dir: Path) -> Cli:
    return Cli(root, data_dir)


def verify_clean(cli: Cli) -> None:
    report = cli.json("verify")
    assert report["ok"] is True, report


def test_a_second_stage_is_refused_while_the_first_is_open_and_the_open_one_may_be_retried(cli):
    run_id = cli.create()
    held = cli.acquire(run_id)
    cli.ok("run", "stage", "start", run_id, "build", *held)
    error = cli.refused("run", "stage", "start", run_id, "test", *held)
    assert error["code"] == "INVALID_TRANSITION"
    assert "stage build open" in error["message"]
    assert f"loopstate run stage complete {run_id} build --outcome" in error["message"]
    verify_clean(cli)
    # The human form says the same on stderr, exit 1, nothing written.
    done = cli("run", "stage", "start", run_id, "test", *held)
    assert done.returncode == 1 and "stage build open" in done.stderr and "complete it first" in done.stderr
    status = cli.status(run_id)
    assert status["run"]["stage"] == "build" and status["run"]["usage"]["stage_attempts"]["test"] == 0
    verify_clean(cli)
    # A retry of the open stage is allowed (it uses an attempt); completing it frees the run for the next.
    cli.ok("run", "stage", "start", run_id, "build", *held)
    assert cli.status(run_id)["run"]["usage"]["stage_attempts"]["build"] == 2
    cli.ok("run", "stage", "complete", run_id, "build", "--outcome", "passed", *held)
    cli.ok("run", "stage", "start", run_id, "test", *held)
    assert cli.status(run_id)["run"]["stage"] == "test"
    verify_clean(cli)


@pytest.mark.jsonl_only("writes a stream file of an older layout")
def test_a_stream_with_overlapping_stages_written_before_the_rule_still_folds(cli, root, data_dir, monkeypatch):
    """The overlapping start is written by the real service with the check switched off, as
    loopstate wrote streams before it had the rule; fresh CLI processes with the rule then
    verify it, read it and refuse a new overlap against its later start."""
    run_id = cli.create()
    held = cli.acquire(run_id)
    cli.ok("run", "stage", "start", run_id, "build", *held)
    lease = cli.status(run_id)["lease"]
    monkeypatch.setattr(decide, "require_stage_free", lambda *args: None)
    Service(data_dir=data_dir).execute(str(root), proto.StageStart(
        run_id=run_id, stage="test", lease_id=lease["lease_id"], generation=lease["generation"]), "old-writer-1")
    monkeypatch.undo()
    verify_clean(cli)
    status = cli.status(run_id)
    assert status["run"]["stage"] == "test" and status["run"]["usage"]["stage_attempts"]["test"] == 1
    error = cli.refused("run", "stage", "start", run_id, "build", *held)
    assert "stage test open" in error["message"], error
    cli.ok("run", "stage", "complete", run_id, "test", "--outcome", "failed", *held)
    cli.ok("run", "stage", "start", run_id, "build", *held)
    verify_clean(cli)


def test_the_fold_tracks_the_open_stage(h):
    run_id, lease = h.leased()
    state = RunState(run_id=run_id)
    opened = []
    h.run(proto.StageStart(run_id=run_id, stage="build", **lease_args(lease)))
    h.run(proto.StageComplete(run_id=run_id, stage="build", outcome="passed", **lease_args(lease)))
    h.run(proto.StageStart(run_id=run_id, stage="test", **lease_args(lease)))
    for event in h.events(run_id):
        state = DOMAIN.evolve(state, event)
        opened.append(state.open_stage)
    assert state.broken is None
    types = [e["type"] for e in h.events(run_id)]
    assert opened[types.index("stage_started")] == "build"
    assert opened[types.index("stage_completed")] is None
    assert opened[-1] == "test" and state.open_stage_sequence == len(types)


def test_a_run_snapshot_of_the_layout_before_open_stages_is_not_decoded(h):
    run_id, lease = h.leased()
    h.run(proto.StageStart(run_id=run_id, stage="build", **lease_args(lease)))
    stream = run_stream(run_id)
    path, kind = snapshot_file(h.service.project(h.root), stream)
    for number in range(400):  # a snapshot is due once the stream has grown enough past the last one
        if path.exists():
            break
        h.run(proto.IssueOpen(run_id=run_id, title=f"issue {number}", severity="low", blocking=False, **lease_args(lease)))
    assert path.exists(), "the service wrote no run snapshot"
    codec = snapshot.codec_for(DOMAIN, stream, lambda: None, lambda state: None)
    data = path.read_bytes()
    binding, wrapped = snapshot.decode(data, stream, codec, kind)
    assert isinstance(wrapped, RunSnapshot) and wrapped.state.open_stage == "build"
    # The same state as the earlier layout wrote it: bare, with no open-stage fields.
    bare = msgspec.msgpack.decode(msgspec.msgpack.encode(wrapped.state), type=dict)
    del bare["open_stage"], bare["open_stage_sequence"]
    old = snapshot.Pending(stream, "runs", binding, msgspec.msgpack.encode(bare)).encode()
    assert snapshot.decode(old, stream, codec, kind) is None
