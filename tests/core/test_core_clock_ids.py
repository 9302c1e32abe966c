"""Injected time and ids: RFC 3339 with Z only, aware UTC, deterministic ids."""

from __future__ import annotations

import datetime as dt
import uuid

import pytest

from loopstate.core.clock import FixedClock, format_time, parse_time
from loopstate.core.errors import LoopstateError
from loopstate.core.ids import SequentialIds, derived_uuid, random_uuid
from loopstate_protocol.errors import ErrorCode

UTC = dt.timezone.utc


@pytest.mark.parametrize("moment, text", [
    (dt.datetime(2026, 1, 2, 3, 4, 5, tzinfo=UTC), "2026-01-02T03:04:05Z"),
    (dt.datetime(2026, 1, 2, 3, 4, 5, 120, tzinfo=UTC), "2026-01-02T03:04:05.000120Z"),
    (dt.datetime(2026, 1, 2, 5, 4, 5, tzinfo=dt.timezone(dt.timedelta(hours=2))), "2026-01-02T03:04:05Z"),
])
def test_format_time_writes_utc_with_z_and_round_trips(moment, text):
    assert format_time(moment) == text
    assert parse_time(text) == moment
    assert parse_time(text).tzinfo == UTC


def test_format_time_refuses_a_naive_datetime():
    with pytest.raises(LoopstateError) as info:
        format_time(dt.datetime(2026, 1, 1))
    assert info.value.code is ErrorCode.VALIDATION_FAILED


@pytest.mark.parametrize("text", ["2026-01-01T00:00:00", "2026-01-01T00:00:00+00:00", "2026-01-01T02:00:00+02:00", "", "yesterday", "2026-13-01T00:00:00Z", None])
def test_parse_time_requires_z(text):
    with pytest.raises(LoopstateError) as info:
        parse_time(text, field="occurred_at")
    assert info.value.code is ErrorCode.VALIDATION_FAILED
    assert "occurred_at" in info.value.message


def test_parse_time_may_accept_offsets_when_asked_but_never_naive():
    assert parse_time("2026-01-01T02:00:00+02:00", require_z=False) == dt.datetime(2026, 1, 1, tzinfo=UTC)
    with pytest.raises(LoopstateError):
        parse_time("2026-01-01T02:00:00", require_z=False)


def test_fixed_clock_is_pinned_until_moved():
    clock = FixedClock("2026-01-01T00:00:00Z")
    assert clock() == clock() == dt.datetime(2026, 1, 1, tzinfo=UTC)
    clock.advance(90)
    assert format_time(clock()) == "2026-01-01T00:01:30Z"
    clock.set("2027-01-01T00:00:00Z")
    assert clock().year == 2027


def test_sequential_ids_are_deterministic_uuid4_shaped():
    a, b = SequentialIds(), SequentialIds()
    first = [a() for _ in range(3)]
    assert first == [b() for _ in range(3)]
    assert len(set(first)) == 3
    assert all(uuid.UUID(x).version == 4 for x in first)
    assert SequentialIds(prefix=1)() != SequentialIds()()


def test_derived_uuid_is_a_deterministic_uuid5():
    x = derived_uuid("project-abc", "request-1")
    assert x == derived_uuid("project-abc", "request-1")
    assert x != derived_uuid("project-abc", "request-2") != derived_uuid("project-abd", "request-1")
    assert uuid.UUID(x).version == 5


def test_random_uuid_is_random_uuid4():
    a, b = random_uuid(), random_uuid()
    assert a != b and uuid.UUID(a).version == 4
