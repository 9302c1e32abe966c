"""Helpers for the intent tests: terse Service calls and the upstream schema check."""

from __future__ import annotations

import datetime as dt
import functools
import json
import os
from pathlib import Path
from typing import Any

import jsonschema

from loopstate.core.project import Project
from loopstate.domains.intent.records import CURRENT_TASK_SET
from loopstate.service import Service
from loopstate_protocol import intent as p

from tests.conftest import CONFORMANCE, HAVE_CONFORMANCE, stored_lines, stored_streams  # noqa: F401 (re-exported)

SCHEMA_PATH = CONFORMANCE / "intent-loop" / "ledger-event.schema.json"
LOOPSTATE_ADDED = ("sequence", "request_fingerprint", "batch")
START = "2026-01-01T00:00:00Z"

_formats = jsonschema.FormatChecker()


@_formats.checks("date-time", raises=ValueError)
def _date_time(value: object) -> bool:
    if not isinstance(value, str) or "T" not in value:
        raise ValueError("not a date-time")
    dt.datetime.fromisoformat(value.replace("Z", "+00:00"))
    return True


@functools.cache
def _validator() -> jsonschema.Draft202012Validator:
    return jsonschema.Draft202012Validator(json.loads(SCHEMA_PATH.read_text()), format_checker=_formats)


def conformant(event: dict[str, Any]) -> dict[str, Any]:
    """The event without loopstate's own fields, as the upstream schema sees it. loopstate's own event type
    (current_task_set, which the seed's closed enum cannot name) is checked as a seed envelope: every other
    field must conform as it stands."""
    kept = {k: v for k, v in event.items() if k not in LOOPSTATE_ADDED}
    if kept.get("event_type") == CURRENT_TASK_SET:
        kept["event_type"] = "source_observed"
    return kept


def schema_errors(event: dict[str, Any]) -> list[str]:
    """The upstream schema's complaints (callers check HAVE_CONFORMANCE first: the file is in ../shared)."""
    return [e.message for e in _validator().iter_errors(conformant(event))]


def ledger_events(data_dir: Path, root: Path | None = None) -> list[dict[str, Any]]:
    """Every intent event at rest: on the JSONL store, every project's file below ``data_dir``, read
    as bytes (a test may have torn one); on another store, the stream of the project at ``root``
    (default: the conftest's ``workspace`` beside ``data_dir``), read through the store."""
    if not os.environ.get("LOOPSTATE_STORE"):
        out = []
        for path in sorted(data_dir.glob("projects/*/streams/intent.jsonl")):
            out.extend(json.loads(line) for line in path.read_text().splitlines() if line)
        return out
    root = root if root is not None else data_dir.parent / "workspace"
    if not root.is_dir():
        return []
    project = Project(str(root), data_dir=data_dir)
    if "intent" not in stored_streams(project):
        return []
    return [json.loads(line) for line in stored_lines(project, "intent")]


class Intent:
    """Terse calls through the Service, with a fresh request id per mutation."""

    def __init__(self, svc: Service, root: Path) -> None:
        self.svc = svc
        self.root = str(root)
        self.n = 0

    def run(self, command: Any, request_id: str | None = None):
        self.n += 1
        return self.svc.execute(self.root, command, request_id or f"req-{self.n}")

    def ask(self, query: Any) -> Any:
        return self.svc.query(self.root, query)

    def start(self, *claims: p.ClaimInput, **kw: Any) -> str:
        outcome = self.run(p.IntentTaskStart(initial_claims=list(claims), **kw))
        return outcome.events[0]["task_id"]

    def add(self, task_id: str, statement: str, *, actor: str = "user", status: str = "explicit",
            facets: tuple[str, ...] = ("outcome",), source: p.SourceInput | None = None, **kw: Any) -> str:
        claim = p.ClaimInput(statement=statement, role=actor, epistemic_status=status, facets=list(facets), **kw)
        outcome = self.run(p.IntentClaimAdd(task_id=task_id, actor=actor, claim=claim, source=source))
        return outcome.events[0]["payload"]["claim"]["claim_id"]

    def replace(self, task_id: str, old: list[str], statement: str, *, actor: str = "user", status: str = "explicit",
                facets: tuple[str, ...] = ("outcome",), source: p.SourceInput | None = None, **kw: Any) -> str:
        claim = p.ClaimInput(statement=statement, role=actor, epistemic_status=status, facets=list(facets), **kw)
        outcome = self.run(p.IntentClaimReplace(task_id=task_id, supersedes=old, actor=actor, claim=claim, source=source))
        return outcome.events[0]["payload"]["claim"]["claim_id"]

    def snapshot(self, task_id: str | None = None) -> p.CurrentView:
        return self.ask(p.IntentSnapshot(task_id=task_id))

    def audit(self, task_id: str | None = None) -> p.AuditView:
        return self.ask(p.IntentAudit(task_id=task_id))

    def active_ids(self, task_id: str | None = None) -> set[str]:
        """Every active claim of the view, walking every page of the snapshot."""
        found: set[str] = set()
        cursor = None
        while True:
            view = self.ask(p.IntentSnapshot(task_id=task_id, cursor=cursor))
            found |= {c.claim_id for by_status in view.by_facet.values() for claims in by_status.values() for c in claims}
            if view.next_cursor is None:
                assert len(found) == view.active_count
                return found
            cursor = view.next_cursor


def user_claim(statement: str, *facets: str, **kw: Any) -> p.ClaimInput:
    return p.ClaimInput(statement=statement, role="user", epistemic_status="explicit", facets=list(facets or ("outcome",)), **kw)


