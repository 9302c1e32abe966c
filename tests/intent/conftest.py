"""Fixtures for the intent domain: a Service with pinned clock and ids, and a check
that every event written during a test validates against the upstream schema."""

from __future__ import annotations

from pathlib import Path

import pytest

from intentkit import HAVE_CONFORMANCE, START, Intent, ledger_events, schema_errors
from loopstate.core.clock import FixedClock
from loopstate.core.ids import SequentialIds
from loopstate.domains.intent import DOMAIN
from loopstate.service import Service


@pytest.fixture(autouse=True)
def every_event_conforms(tmp_path: Path):
    """After each test, every intent event at rest must validate against the seed's schema.

    The schema is upstream's, in ../shared; a clone without it checks nothing here
    (test_intent_conformance.py then skips, and CI, which has it, fails on that skip)."""
    yield
    if not HAVE_CONFORMANCE:
        return
    for event in ledger_events(tmp_path / "data"):
        errors = schema_errors(event)
        assert not errors, f"{event['event_type']} does not conform: {errors}"


@pytest.fixture
def clock() -> FixedClock:
    return FixedClock(START)


@pytest.fixture
def svc(data_dir: Path, clock: FixedClock) -> Service:
    return Service(data_dir=data_dir, clock=clock, new_id=SequentialIds(), domains=[DOMAIN])


@pytest.fixture
def it(svc: Service, root: Path) -> Intent:
    return Intent(svc, root)
