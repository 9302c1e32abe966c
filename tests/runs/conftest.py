"""Fixtures for the runs domain: a real Service on a real store, with pinned time and ids."""

from __future__ import annotations

import itertools
import json
from pathlib import Path
from typing import Any

import pytest

from loopstate_protocol import runs as proto

from loopstate.core import canonical
from loopstate.core.clock import FixedClock
from loopstate.core.ids import SequentialIds
from loopstate.service.engine import Service
from tests.conftest import stored_lines, stored_streams

T0 = "2026-08-16T08:00:00Z"
AGENT = {"harness": "codex", "actor": "synthetic-agent", "session_id": "session-1"}
OTHER = {"harness": "claude_code", "actor": "other-agent", "session_id": "session-2"}
USER = {"harness": "manual", "actor": "synthetic-user", "session_id": "terminal"}
ASSET = {"name": "synthetic-asset", "root": ".", "track": "code", "boundaries": ["repository-local files"]}
LOCAL_SCOPE = {"assets": ["synthetic-asset"], "actions": ["local_write"], "destinations": ["repository"], "exclusions": []}


class Harness:
    """A Service with a FixedClock and SequentialIds, and shorthands for the common commands."""

    def __init__(self, root: Path, data_dir: Path) -> None:
        self.root = str(root)
        self.data_dir = data_dir
        self.clock = FixedClock(T0)
        self.ids = SequentialIds(prefix=7)
        self.service = Service(data_dir=data_dir, clock=self.clock, new_id=self.ids, lock_timeout=10)
        self._requests = itertools.count(1)
        self.schema_sweep = True  # teardown checks every written event against the seed's schemas
        self.record_sweep = True  # ... and against loopstate's own validator (off where a test forges events)

    def request_id(self) -> str:
        return f"req-{next(self._requests)}"

    def run(self, command, request_id: str | None = None):
        return self.service.execute(self.root, command, request_id or self.request_id())

    def types(self, command) -> list[str]:
        return [e["type"] for e in self.run(command).events]

    def status(self, run_id: str) -> proto.RunStatus:
        return self.service.query(self.root, proto.Status(run_id=run_id))

    def grant(self, *, scope: dict | None = None, level: str = "bounded", expires: str = "2026-08-16T18:00:00Z") -> str:
        grant_id = self.ids()
        self.run(proto.AuthorityGrant(
            grant_id=grant_id, level=level, actor="synthetic-user", scope=scope or LOCAL_SCOPE,
            risks_shown=["Local files may change."], confirmation_text="CONFIRM", expires_at=expires,
        ))
        return grant_id

    def create(self, grant_id: str | None = None, budgets: dict | None = None) -> str:
        grant_id = grant_id or self.grant()
        run_id = self.ids()
        self.run(proto.Create(run_id=run_id, asset=ASSET, objective="Produce one synthetic artifact.",
                              done_gate=["The check passes."], authority_grant_id=grant_id, actor=USER, budgets=budgets))
        return run_id

    def acquire(self, run_id: str, owner: dict = AGENT) -> dict:
        self.run(proto.Acquire(run_id=run_id, owner=owner))
        return self.status(run_id).lease

    def leased(self, budgets: dict | None = None, grant_id: str | None = None) -> tuple[str, dict]:
        run_id = self.create(grant_id, budgets)
        return run_id, self.acquire(run_id)

    def events(self, run_id: str) -> list[dict[str, Any]]:
        return [canonical.decode(line) for line in stored_lines(self.service.project(self.root), f"runs.{run_id}")]


def lease_args(lease: dict) -> dict:
    return {"lease_id": lease["lease_id"], "generation": lease["generation"]}


def check_store_against_schemas(harness: Harness) -> None:
    """Every event loopstate wrote, and every projection file, validates against the seed's schemas."""
    from loopstate.domains.runs import records
    from tests.runs.schemas import schema_errors

    project = harness.service.project(harness.root)
    for stream in stored_streams(project):
        if stream.startswith("grants."):
            for line in stored_lines(project, stream):
                errors = schema_errors("grant", canonical.decode(line)["grant"])
                assert not errors, (stream, errors)
            projection = project.dir / "grants" / f"{stream[len('grants.'):]}.json"
            assert json.loads(projection.read_text()) == canonical.decode(line)["grant"]
        if not stream.startswith("runs."):
            continue
        for event in harness.events(stream[len("runs."):]):
            errors = schema_errors("audit_event", event)
            assert not errors, (event["sequence"], event["type"], errors)
            if harness.record_sweep:  # `loopstate validate audit_event` accepts what loopstate writes
                records.validate_written_event(event)
        folder = project.dir / "runs" / stream[len("runs."):]
        for name, kind in (("run.json", "run"), ("lease.json", "lease"), ("issues.json", "issue_ledger")):
            if (folder / name).exists():
                errors = schema_errors(kind, json.loads((folder / name).read_text()))
                assert not errors, (name, errors)
                records.validate(kind, json.loads((folder / name).read_text()))
        for path in sorted((folder / "evidence").glob("*.json")):
            errors = schema_errors("evidence", json.loads(path.read_text()))
            assert not errors, (path.name, errors)


@pytest.fixture
def h(root: Path, data_dir: Path):
    harness = Harness(root, data_dir)
    yield harness
    if harness.schema_sweep:
        check_store_against_schemas(harness)


def write_json(path: Path, value: Any) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(value))
    return path


CHILD = Path(__file__).with_name("runs_child.py")


def spawn(harness: Harness, *args: str):
    """Start runs_child.py as a real separate process on the same store."""
    import subprocess
    import sys

    from tests.conftest import REPO, env_for_child

    return subprocess.Popen(
        [sys.executable, str(CHILD), *args], stdin=subprocess.PIPE, stdout=subprocess.PIPE,
        stderr=subprocess.PIPE, text=True, env=env_for_child(harness.data_dir), cwd=REPO,
    )


def as_json(command) -> str:
    import msgspec

    return msgspec.json.encode(command).decode()
