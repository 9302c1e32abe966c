"""A create that names no grant is two commands: the default grant, then the create.

The grant is recorded as a command of its own, with no lock of the run's stream
(nor the project's founding lock) held while it runs; then the create is applied
again. A process killed between the two leaves the grant durable and no run; the
create's exact retry binds to that grant and records no second one.
"""

from __future__ import annotations

import pytest

import signal
import subprocess
import sys
import uuid
from pathlib import Path

from loopstate_protocol import runs as proto

from loopstate.core import canonical
from loopstate.core.clock import FixedClock
from loopstate.core.project import Project
from loopstate.domains.runs.grants import default_grant_id
from loopstate.service.engine import Service
from tests.conftest import REPO, env_for_child
from tests.runs.conftest import ASSET, T0, USER

# Run in a child: a create without a grant. Just before the grant command runs, another
# process probes the run stream's lock and the project's founding lock; just after the
# grant is durable, the child kills itself with SIGKILL (no cleanup, no finally).
CHILD = r'''
import os, signal, subprocess, sys
from loopstate_protocol import runs as proto
from loopstate.core.clock import FixedClock
from loopstate.service.engine import Service

root, run_id, request_id, asset, user, now = sys.argv[1:7]
PROBE = """
import fcntl, os, sys
for path in sys.argv[1:]:
    try:
        fd = os.open(path, os.O_RDONLY)
    except FileNotFoundError:
        continue
    try:
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except BlockingIOError:
        print("held", path); sys.exit()
    finally:
        os.close(fd)
print("free")
"""
service = Service(clock=FixedClock(now), lock_timeout=10)
inner = Service.execute

def execute(self, root_, command, rid):
    if not isinstance(command, proto.AuthorityGrant):
        return inner(self, root_, command, rid)
    project = self.project(root_)
    run_lock = project.dir / "locks" / f"runs.{run_id}.lock"
    probe = subprocess.run([sys.executable, "-c", PROBE, str(run_lock), root_], capture_output=True, text=True)
    print("probe", probe.stdout.strip(), flush=True)
    outcome = inner(self, root_, command, rid)
    print("granted", len(outcome.events), flush=True)
    os.kill(os.getpid(), signal.SIGKILL)

Service.execute = execute
import json
service.execute(root, proto.Create(run_id=run_id, asset=json.loads(asset), objective="One artifact.",
                                   done_gate=["The check passes."], actor=json.loads(user)), request_id)
print("not killed", flush=True)
'''


def stream_events(project: Project, stream: str) -> list[dict]:
    path = project.dir / "streams" / f"{stream}.jsonl"
    return [canonical.decode(line) for line in path.read_bytes().splitlines()] if path.exists() else []


def create(run_id: str) -> proto.Create:
    return proto.Create(run_id=run_id, asset=ASSET, objective="One artifact.", done_gate=["The check passes."],
                        actor=USER)


@pytest.mark.jsonl_only("probes the stream's and the founding lock files")
def test_a_crash_between_the_default_grant_and_the_create_is_finished_by_the_exact_retry(
        root: Path, data_dir: Path) -> None:
    import json

    run_id, request_id = str(uuid.uuid4()), "create-after-crash"
    child = subprocess.run(
        [sys.executable, "-c", CHILD, str(root), run_id, request_id, json.dumps(ASSET), json.dumps(USER), T0],
        cwd=REPO, env=env_for_child(data_dir), capture_output=True, text=True, timeout=120,
    )
    assert child.returncode == -signal.SIGKILL, child.stdout + child.stderr
    assert "probe free" in child.stdout, child.stdout  # no lock of the create held while the grant ran
    assert "granted 1" in child.stdout and "not killed" not in child.stdout

    project = Project(str(root), data_dir=data_dir)
    grant_stream = f"grants.{default_grant_id(run_id)}"
    granted = stream_events(project, grant_stream)
    assert [e["type"] for e in granted] == ["grant_recorded"]
    assert stream_events(project, f"runs.{run_id}") == []  # the create never landed

    service = Service(data_dir=data_dir, clock=FixedClock(T0), lock_timeout=10)
    outcome = service.execute(str(root), create(run_id), request_id)
    assert outcome.replayed is False and outcome.events[0]["type"] == "run_created"
    status = service.query(str(root), proto.Status(run_id=run_id))
    assert status.run["authority_grant_id"] == default_grant_id(run_id)
    assert stream_events(project, grant_stream) == granted  # the retry found the grant: none recorded again

    again = Service(data_dir=data_dir, clock=FixedClock(T0), lock_timeout=10).execute(str(root), create(run_id), request_id)
    assert again.replayed is True and again.events == outcome.events


def test_the_default_grant_is_recorded_as_its_own_command_before_the_create(root: Path, data_dir: Path) -> None:
    """Listeners hear the grant's stream, then the run's: two commands, each heard once."""
    service = Service(data_dir=data_dir, clock=FixedClock(T0), lock_timeout=10)
    heard: list[tuple[str, list[str]]] = []
    service.add_listener(lambda project, stream, news: heard.append((stream, [r.event["type"] for r in news.records])))
    run_id = str(uuid.uuid4())
    outcome = service.execute(str(root), create(run_id), "create-1")
    grant_stream = f"grants.{default_grant_id(run_id)}"
    assert heard == [(grant_stream, ["grant_recorded"]), (f"runs.{run_id}", [e["type"] for e in outcome.events])]


def test_a_create_refused_against_its_default_grant_records_no_grant(root: Path, data_dir: Path) -> None:
    (root / ".loopstate").mkdir()
    (root / ".loopstate" / "STOP").write_text("")
    service = Service(data_dir=data_dir, clock=FixedClock(T0), lock_timeout=10)
    run_id = str(uuid.uuid4())
    try:
        service.execute(str(root), create(run_id), "create-under-stop")
    except Exception as exc:  # the standing kill switch refuses the create
        refused = exc
    else:
        raise AssertionError("a create under a standing kill switch passed")
    assert getattr(refused, "code", None) is not None
    project = Project(str(root), data_dir=data_dir)
    assert stream_events(project, f"grants.{default_grant_id(run_id)}") == []
