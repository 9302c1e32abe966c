"""Helpers for the goals tests: a goals-only service with pinned time, raw stream access."""

from __future__ import annotations

import itertools
from pathlib import Path
from typing import Any

from loopstate.core import canonical
from loopstate.core.clock import FixedClock
from loopstate.core.project import Project
from loopstate.domains.goals import DOMAIN
from loopstate.service.engine import Service
from tests.conftest import stored_lines

START = "2026-03-02T12:00:00Z"
FIXTURE = Path(__file__).resolve().parents[1] / "fixtures" / "goals" / "ACTIVE_GOAL_STATE.md"


class Harness:
    """A service over a private data dir and root, with request ids r1, r2, ..."""

    def __init__(self, data_dir: Path, root: Path) -> None:
        self.data_dir = data_dir
        self.root = str(root)
        self.clock = FixedClock(START)
        self.service = Service(data_dir=data_dir, clock=self.clock, domains=[DOMAIN])
        self._ids = itertools.count(1)

    def run(self, command: Any, request_id: str | None = None):
        return self.service.execute(self.root, command, request_id or f"r{next(self._ids)}")

    def ask(self, query: Any) -> Any:
        return self.service.query(self.root, query)

    def fresh(self) -> Service:
        """Another service (as another process would be): it replays from the files."""
        return Service(data_dir=self.data_dir, clock=self.clock, domains=[DOMAIN])

    @property
    def project(self) -> Project:
        return Project(self.root, data_dir=self.data_dir)

    def stream_path(self, goal_id: str) -> Path:
        return self.project.dir / "streams" / f"goals.{goal_id}.jsonl"

    def stream_bytes(self, goal_id: str) -> bytes:
        return self.stream_path(goal_id).read_bytes()

    def events(self, goal_id: str) -> list[dict[str, Any]]:
        return [canonical.decode(line) for line in stored_lines(self.project, f"goals.{goal_id}")]
