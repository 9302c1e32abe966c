"""core.prefix (ids by a unique prefix) and the request-derived run and grant ids, as plain values."""

from __future__ import annotations

import re

import pytest
from hypothesis import given, strategies as st

from loopstate_protocol.errors import ErrorCode

from loopstate.core.errors import LoopstateError
from loopstate.core.prefix import MIN_PREFIX, resolve_prefix
from loopstate.domains.runs import grant_id_for_request, run_id_for_request
from loopstate.domains.runs.grants import default_grant_id

IDS = ["c606d836-0000-4000-8000-000000000001", "c606d836-0000-4000-8000-000000000002",
       "d0000000-0000-4000-8000-000000000003"]
UUID4 = re.compile(r"^[0-9a-f]{8}-[0-9a-f]{4}-4[0-9a-f]{3}-[89ab][0-9a-f]{3}-[0-9a-f]{12}$")


def refusal(given_: str) -> LoopstateError:
    with pytest.raises(LoopstateError) as caught:
        resolve_prefix("run", given_, IDS)
    return caught.value


def test_a_unique_prefix_resolves_case_insensitively():
    assert resolve_prefix("run", "d000", IDS) == IDS[2]
    assert resolve_prefix("run", "C606D836-0000-4000-8000-0000000000", IDS[:1]) == IDS[0]


def test_an_ambiguous_prefix_names_every_candidate():
    error = refusal("c606d836")
    assert error.code is ErrorCode.INVALID_PARAMS and error.details["candidates"] == IDS[:2]
    assert IDS[0] in error.message and IDS[1] in error.message


def test_no_match_and_too_short_are_told_apart():
    assert refusal("e123").code is ErrorCode.NOT_FOUND
    short = refusal("c60")
    assert short.code is ErrorCode.INVALID_PARAMS and f"at least {MIN_PREFIX}" in short.message


def test_a_full_length_id_passes_through_for_the_command_to_judge():
    unknown = "ffffffff-0000-4000-8000-000000000009"
    assert resolve_prefix("run", unknown.upper(), IDS) == unknown


@given(st.text(min_size=1, max_size=40))
def test_request_derived_ids_are_uuid4_shaped_stable_and_distinct_per_kind(request_id):
    run_id, grant_id = run_id_for_request(request_id), grant_id_for_request(request_id)
    assert UUID4.match(run_id) and UUID4.match(grant_id) and UUID4.match(default_grant_id(run_id))
    assert run_id == run_id_for_request(request_id) and run_id != grant_id
    assert default_grant_id(run_id) == default_grant_id(run_id.upper())
