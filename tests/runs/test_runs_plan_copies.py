"""The runs Plan's copies and counts (domains/runs/plan.py): a JSON copy as deep as deepcopy, and the blocking
count kept from the folded run plus the issues a command changed, equal to a count over every issue."""

from __future__ import annotations

import copy
import datetime as dt

from hypothesis import given, settings
from hypothesis import strategies as st

from loopstate.domains.base import Context
from loopstate.domains.runs.plan import Plan, json_copy
from loopstate.domains.runs.state import RunState

JSON = st.recursive(st.none() | st.booleans() | st.integers() | st.floats(allow_nan=False) | st.text(max_size=5),
                    lambda inner: st.lists(inner, max_size=4) | st.dictionaries(st.text(max_size=3), inner, max_size=4),
                    max_leaves=30)


def _containers(value, out):
    if isinstance(value, (dict, list)):
        out.append(id(value))
        for item in (value.values() if isinstance(value, dict) else value):
            _containers(item, out)
    return out


@settings(max_examples=300, deadline=None)
@given(JSON)
def test_a_json_copy_equals_the_value_and_shares_no_container_with_it(value):
    copied = json_copy(value)
    assert copied == value == copy.deepcopy(value)
    assert not set(_containers(copied, [])) & set(_containers(value, []))


def test_what_is_not_json_is_copied_by_deepcopy():
    value = {"a": ({"inner": [1]},), "s": {1, 2}}
    copied = json_copy(value)
    assert copied == value and copied["a"][0] is not value["a"][0] and copied["s"] is not value["s"]


def _full(issues):
    return sum(1 for i in issues.values() if i["blocking"] and i["status"] != "closed")


ISSUE = st.tuples(st.integers(0, 6), st.booleans(), st.sampled_from(["open", "acknowledged", "closed"]))


@settings(max_examples=300, deadline=None)
@given(st.lists(ISSUE, max_size=8), st.lists(ISSUE, min_size=1, max_size=5))
def test_the_blocking_count_from_the_folded_run_and_the_changes_equals_a_full_count(before, changes):
    issues = {f"i{n}": {"issue_id": f"i{n}", "blocking": b, "status": status} for n, b, status in before}
    state = RunState(run_id="r", run={"open_blocking_issues": _full(issues), "updated_at": None}, issues=issues)
    plan = Plan(state, Context(now=dt.datetime(2026, 8, 16, tzinfo=dt.timezone.utc), new_id=lambda: "x",
                               project_id="p", project_root="/", request_id="q"))
    for n, b, status in changes:
        plan.issues[f"i{n}"] = {"issue_id": f"i{n}", "blocking": b, "status": status}
        plan.recount_blocking()
        assert plan.run["open_blocking_issues"] == _full(plan.issues)
    assert state.issues == issues and state.run["open_blocking_issues"] == _full(issues)  # the state is untouched


def test_a_run_without_a_plain_count_is_counted_in_full():
    issues = {"a": {"blocking": True, "status": "open"}, "b": {"blocking": True, "status": "closed"}}
    state = RunState(run_id="r", run={"open_blocking_issues": None}, issues=issues)
    plan = Plan(state, Context(now=dt.datetime(2026, 8, 16, tzinfo=dt.timezone.utc), new_id=lambda: "x",
                               project_id="p", project_root="/", request_id="q"))
    plan.issues["c"] = {"blocking": True, "status": "open"}
    plan.recount_blocking()
    assert plan.run["open_blocking_issues"] == 2
