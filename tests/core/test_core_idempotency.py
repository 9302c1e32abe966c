"""Idempotent mutations: an exact retry returns the first result, a changed one is refused.

Checked through the Ledger (what every domain writes through) and through the
Service with a minimal counter domain, including a retry from a fresh process's
point of view (a new Service that must find the request in the file).
"""

from __future__ import annotations

from typing import Any

import pytest

from corekit import event, read_all
from loopstate.core.chain import REQUEST_FINGERPRINT, REQUEST_ID
from loopstate.core.clock import FixedClock
from loopstate.core.errors import LoopstateError
from loopstate.core.idempotency import check_request_id, fingerprint
from loopstate.core.ids import SequentialIds
from loopstate.domains.base import Domain
from loopstate.service.engine import Service
from loopstate_protocol.base import Command, Query
from loopstate_protocol.errors import ErrorCode

from corekit import TEST_LAYOUT


def _apply(ledger, request_id: str, fp: str, bodies: list[dict]) -> tuple[list[dict], bool]:
    """What a service does: return the earlier result of an exact retry, or append."""
    with ledger.mutation() as tx:
        earlier = tx.earlier(request_id, fp)
        if earlier is not None:
            return [r.event for r in earlier], True
        return [r.event for r in tx.append(bodies, request_id=request_id, fp=fp)], False


def test_an_exact_retry_returns_the_same_events_and_appends_nothing(core_project, new_ledger):
    fp = fingerprint("core.note", {"n": [1, 2]})
    first, replayed = _apply(new_ledger(), "req-1", fp, [event(1), event(2)])
    assert not replayed
    size = (core_project.dir / "streams" / "core.jsonl").stat().st_size
    for ledger in (new_ledger(), new_ledger()):  # as a fresh process would see it
        again, replayed = _apply(ledger, "req-1", fp, [event(1), event(2)])
        assert replayed and again == first
    assert (core_project.dir / "streams" / "core.jsonl").stat().st_size == size
    events, _ = read_all(core_project, "core", TEST_LAYOUT)
    assert events == first
    assert all(e[REQUEST_ID] == "req-1" and e[REQUEST_FINGERPRINT] == fp for e in events)


def test_a_retry_with_changed_parameters_is_request_id_reused_and_appends_nothing(core_project, new_ledger):
    ledger = new_ledger()
    _apply(ledger, "req-1", fingerprint("core.note", {"n": 1}), [event(1)])
    data = (core_project.dir / "streams" / "core.jsonl").read_bytes()
    for changed in (fingerprint("core.note", {"n": 2}), fingerprint("core.other", {"n": 1})):
        for attempt in (ledger, new_ledger()):
            with pytest.raises(LoopstateError) as info:
                _apply(attempt, "req-1", changed, [event(2)])
            assert info.value.code is ErrorCode.REQUEST_ID_REUSED
            assert info.value.details == {"request_id": "req-1", "first_sequence": 1}
            assert "use a new request id" in info.value.message
    assert (core_project.dir / "streams" / "core.jsonl").read_bytes() == data


def test_the_fingerprint_covers_operation_and_normalized_params_but_stores_no_body():
    assert fingerprint("a", {"x": 1, "y": [1, 2]}) == fingerprint("a", {"y": [1, 2], "x": 1})
    assert fingerprint("a", {"x": 1}) != fingerprint("b", {"x": 1})
    assert fingerprint("a", {"x": 1}) != fingerprint("a", {"x": "1"})
    fp = fingerprint("a", {"secret": "hunter2"})
    assert len(fp) == 64 and "hunter2" not in fp


@pytest.mark.parametrize("bad", ["", "x" * 201, "line\nbreak", None, 7])
def test_request_ids_must_be_short_printable_strings(bad):
    with pytest.raises(LoopstateError) as info:
        check_request_id(bad)
    assert info.value.code is ErrorCode.INVALID_PARAMS


# -- through the Service, with a minimal domain ---------------------------------------


class Bump(Command, tag="counter.bump"):
    by: int


class Total(Query, tag="counter.total"):
    pass


class CounterDomain(Domain):
    """The smallest real Decider: a counter whose bumps carry a server-made id and time
    (subclassing Domain gives it every optional step's no-op default)."""

    name = "counter"
    stream_prefixes = ("counter",)
    layout = TEST_LAYOUT
    commands = (Bump,)
    queries = (Total,)
    views = ("total",)

    def stream_for(self, message: Any) -> str:
        return "counter"

    def stream_for_view(self, view: str, key: str | None) -> str:
        return "counter"

    def initial(self, stream: str) -> int:
        return 0

    def evolve(self, state: int, event: dict) -> int:
        return state + event["by"]

    def decide(self, state: int, command: Bump, ctx) -> list[dict]:
        return [{"schema_version": 1, "event_type": "bumped", "by": command.by, "bump_id": ctx.new_id(), "at": ctx.now.isoformat()}]

    def query(self, state: int, query: Total, ctx) -> int:
        return state

    def view(self, state: int, view: str, key: str | None, ctx) -> int:
        return state


def _service(data_dir) -> Service:
    return Service(data_dir=data_dir, clock=FixedClock("2026-01-01T00:00:00Z"), new_id=SequentialIds(), domains=[CounterDomain()])


def test_service_exact_retry_replays_the_first_outcome_even_from_a_new_process(data_dir, root):
    service = _service(data_dir)
    first = service.execute(str(root), Bump(by=2), "req-1")
    assert not first.replayed and first.head.sequence == 1
    again = service.execute(str(root), Bump(by=2), "req-1")
    fresh = _service(data_dir).execute(str(root), Bump(by=2), "req-1")
    for retry in (again, fresh):
        assert retry.replayed and retry.events == first.events and retry.head == first.head
    assert service.query(str(root), Total()) == 2
    assert _service(data_dir).query(str(root), Total()) == 2


def test_service_changed_retry_is_request_id_reused(data_dir, root):
    service = _service(data_dir)
    service.execute(str(root), Bump(by=2), "req-1")
    for svc in (service, _service(data_dir)):
        with pytest.raises(LoopstateError) as info:
            svc.execute(str(root), Bump(by=3), "req-1")
        assert info.value.code is ErrorCode.REQUEST_ID_REUSED
    assert service.query(str(root), Total()) == 2


def test_a_domain_that_does_not_subclass_domain_is_refused_naming_what_it_lacks() -> None:
    class Bare:
        name = "bare"
        commands: tuple = ()
        queries: tuple = ()

    with pytest.raises(TypeError) as info:
        Service(domains=[Bare()])  # type: ignore[list-item]
    assert "subclass loopstate.domains.base.Domain" in str(info.value) and "check" in str(info.value)
