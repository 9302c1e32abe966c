"""Seed 002's records: every conformance fixture, and each rule refused with its field and rule named."""

from __future__ import annotations

import copy
import json
from decimal import Decimal
from pathlib import Path

import pytest
from hypothesis import given
from hypothesis import strategies as st

from loopstate_protocol.errors import ErrorCode

from loopstate.core.errors import LoopstateError
from loopstate.domains.runs import records
from loopstate.domains.runs.money import add_money, format_money, parse_money
from tests.runs.schemas import THE_LOOP, schema_errors
from tests.conftest import needs_conformance, require_conformance

VALID = sorted((THE_LOOP / "fixtures" / "valid").glob("*.json"))
INVALID = sorted((THE_LOOP / "fixtures" / "invalid").glob("*.json"))


def load(name: str) -> dict:
    require_conformance()
    return json.loads((THE_LOOP / "fixtures" / "valid" / f"{name}.json").read_text())


def refused(kind: str, record) -> LoopstateError:
    with pytest.raises(LoopstateError) as info:
        records.validate(kind, record)
    assert info.value.code == ErrorCode.VALIDATION_FAILED
    return info.value


@needs_conformance
@pytest.mark.parametrize("path", VALID, ids=lambda p: p.stem)
def test_every_valid_conformance_fixture_is_accepted(path: Path):
    record = records.validate(path.stem, json.loads(path.read_text()))
    assert records.to_dict(record) == json.loads(path.read_text())


@needs_conformance
@pytest.mark.parametrize("path", INVALID, ids=lambda p: p.stem)
def test_every_invalid_conformance_fixture_is_refused_naming_field_and_rule(path: Path):
    kind = path.stem.split("-", 1)[1].replace("-", "_")
    error = refused(kind, json.loads(path.read_text()))
    assert error.details["field"].startswith("$.")
    assert error.details["rule"]
    assert error.details["field"] in error.message and error.details["rule"] in error.message


@needs_conformance
def test_invalid_enum_config_names_default_mode_and_enum():
    error = refused("config", json.loads((THE_LOOP / "fixtures/invalid/enum-config.json").read_text()))
    assert (error.details["field"], error.details["rule"]) == ("$.default_mode", "enum")


@needs_conformance
def test_state_root_escaping_the_project_is_refused():
    error = refused("config", json.loads((THE_LOOP / "fixtures/invalid/path-config.json").read_text()))
    assert (error.details["field"], error.details["rule"]) == ("$.state_root", "path_inside_project")
    for escape in ("/etc", "~/x", "a/../../b", "C:/x"):
        config = {**load("config"), "state_root": escape}
        assert refused("config", config).details["rule"] == "path_inside_project"


@pytest.mark.parametrize("seconds", [14, 601, 0])
def test_config_heartbeat_outside_15_to_600_is_refused(seconds):
    config = {**load("config"), "heartbeat_seconds": seconds, "lease_seconds": 700}
    error = refused("config", config)
    assert error.details["field"] == "$.heartbeat_seconds"


@pytest.mark.parametrize("seconds", [15, 600])
def test_config_heartbeat_bounds_15_and_600_are_accepted(seconds):
    records.validate("config", {**load("config"), "heartbeat_seconds": seconds, "lease_seconds": 601})


def test_config_lease_must_be_longer_than_heartbeat():
    error = refused("config", {**load("config"), "heartbeat_seconds": 120, "lease_seconds": 120})
    assert (error.details["field"], error.details["rule"]) == ("$.lease_seconds", "lease_longer_than_heartbeat")


def test_config_telemetry_must_be_false():
    error = refused("config", {**load("config"), "telemetry": True})
    assert error.details["field"] == "$.telemetry"


def test_missing_required_field_is_an_error_never_inferred():
    run = load("run")
    del run["owner"]
    error = refused("run", run)
    assert (error.details["field"], error.details["rule"]) == ("$.owner", "required")


def test_unknown_field_is_refused_not_dropped():
    error = refused("lease", {**load("lease"), "holder": "x"})
    assert (error.details["field"], error.details["rule"]) == ("$.holder", "unknown_field")


def test_grant_missing_a_permanent_invariant_is_refused():
    grant = load("grant")
    grant["permanent_invariants"] = grant["permanent_invariants"][:-1]
    error = refused("grant", grant)
    assert (error.details["field"], error.details["rule"]) == ("$.permanent_invariants", "permanent_invariants")
    assert "no_silent_elevation" in error.message


def test_grant_that_never_expires_is_refused():
    grant = {**load("grant"), "expires_at": load("grant")["confirmed_at"]}
    assert refused("grant", grant).details["rule"] == "grant_expires"


def test_grant_revocation_needs_both_time_and_revoker():
    grant = {**load("grant"), "revoked_at": "2026-08-16T09:00:00Z"}
    assert refused("grant", grant).details["rule"] == "revocation_pair"


def test_passed_evidence_needs_a_procedure():
    evidence = {**load("evidence"), "procedure": []}
    assert refused("evidence", evidence).details["rule"] == "passed_needs_procedure"


def test_passed_evidence_needs_a_result_reference_or_manual_observation():
    evidence = {**load("evidence"), "artifact_refs": []}
    assert refused("evidence", evidence).details["rule"] == "passed_needs_result"
    records.validate("evidence", {**evidence, "manual_observation": "Looked at the screen."})
    records.validate("evidence", {**evidence, "outcome": "failed"})


def test_route_selected_failed_candidate_is_refused():
    route = load("route")
    route["candidates"][0]["behavior_status"] = "failed"
    assert refused("route", route).details["rule"] == "selected_not_failed"


def test_route_verified_selection_needs_a_matching_typed_observation():
    route = load("route")
    route["candidates"][0]["behavior_observations"][0]["capability"] = "lifecycle.build"
    assert refused("route", route).details["rule"] == "verified_needs_observation"


def test_route_latest_matching_observation_must_have_passed():
    route = load("route")
    newer = {**route["candidates"][0]["behavior_observations"][0], "outcome": "denied", "observed_at": "2026-08-16T08:01:00Z"}
    route["candidates"][0]["behavior_observations"].append(newer)
    assert refused("route", route).details["rule"] == "latest_observation_passed"


def test_route_newer_pass_supersedes_an_older_failure_which_stays_visible():
    route = load("route")
    older = {**route["candidates"][0]["behavior_observations"][0], "outcome": "failed", "observed_at": "2026-08-16T07:00:00Z",
             "evidence_id": "99999999-9999-4999-8999-999999999998"}
    route["candidates"][0]["behavior_observations"].insert(0, older)
    assert len(records.validate("route", route).candidates[0].behavior_observations) == 2


def test_route_observations_tied_at_the_latest_time_are_refused():
    route = load("route")
    twin = {**route["candidates"][0]["behavior_observations"][0], "evidence_id": "99999999-9999-4999-8999-999999999998"}
    route["candidates"][0]["behavior_observations"].append(twin)
    assert refused("route", route).details["rule"] == "latest_observation_unique"


def test_route_verified_at_must_equal_the_observation_time():
    route = {**load("route"), "verified_at": "2026-08-16T08:00:01Z"}
    assert refused("route", route).details["rule"] == "verified_at_matches_observation"


def test_audit_event_data_is_checked_by_type():
    event = load("audit_event")
    event["data"] = {"objective": ""}
    assert refused("audit_event", event).details["field"] == "$.data.objective"
    event = load("audit_event")
    event["type"] = "lease_acquired"
    assert refused("audit_event", event).details["field"].startswith("$.data.")


def test_harness_enum_covers_the_five_adapters():
    config = load("config")
    status = {"installed": True, "version": "1", "discovery": "verified", "behavior": "unverified", "skill_roots": [],
              "collisions": [], "checked_at": "2026-08-16T08:00:00Z", "evidence_id": None}
    for harness in ("codex", "claude_code", "kimi_code", "opencode", "deepseek_harness"):
        records.validate("config", {**config, "harnesses": {harness: status}})
    assert refused("config", {**config, "harnesses": {"vim": status}}).details["field"].startswith("$.harnesses")


def test_timestamps_need_the_z_suffix():
    assert refused("lease", {**load("lease"), "expires_at": "2026-08-16T08:06:00+00:00"}).details["rule"] == "timestamp"


def test_unknown_kind_is_refused_with_the_list_of_kinds():
    with pytest.raises(LoopstateError) as info:
        records.validate("spaceship", {})
    assert info.value.code == ErrorCode.INVALID_PARAMS and "config" in info.value.message


# money -------------------------------------------------------------------------------------------

def test_cost_point_one_plus_point_two_is_exactly_point_three():
    assert add_money("0.1", "0.2", "cost") == "0.3"
    assert add_money(None, "0.000001", "cost") == "0.000001"
    assert add_money("999999999.999999", "0.000001", "cost") == "1000000000"


@pytest.mark.parametrize("text", ["1e-3", "1E3", "-1", "+1", "01", "0.1234567", ".5", "5.", "", " 1", "NaN", "Infinity"])
def test_cost_spellings_other_than_fixed_point_are_refused(text):
    with pytest.raises(LoopstateError) as info:
        parse_money(text, "max_cost_usd")
    assert info.value.details == {"field": "max_cost_usd", "rule": "money"}


def test_cost_as_a_json_number_is_refused():
    with pytest.raises(LoopstateError):
        parse_money(0.3, "cost_usd")
    budgets = {"max_duration_seconds": 1, "max_stage_attempts": 1, "max_mutations": 0, "max_external_actions": 0,
               "max_cost_usd": 0.5}
    with pytest.raises(LoopstateError):
        records.decode("budgets", records.Budgets, budgets)


def test_money_is_written_canonically():
    assert format_money(parse_money("1.500000", "x")) == "1.5"
    assert format_money(parse_money("0", "x")) == "0"


def test_budget_defaults_are_the_seeds():
    from loopstate.domains.runs.config import default_config

    assert default_config()["budgets"] == records.DEFAULT_BUDGETS == {
        "max_duration_seconds": 7200, "max_stage_attempts": 3, "max_mutations": 100, "max_external_actions": 0,
        "max_cost_usd": None,
    }


@needs_conformance
@pytest.mark.parametrize("field", list(records.DEFAULT_BUDGETS))
def test_a_budget_object_missing_a_field_is_refused_not_defaulted(field):
    for kind in ("config", "run"):
        record = load(kind)
        del record["budgets"][field]
        error = refused(kind, record)
        assert (error.details["field"], error.details["rule"]) == (f"$.budgets.{field}", "required")
        assert schema_errors(kind, record)


def test_usage_stage_attempts_is_a_complete_map():
    run = load("run")
    del run["usage"]["stage_attempts"]["close"]
    error = refused("run", run)
    assert (error.details["field"], error.details["rule"]) == ("$.usage.stage_attempts.close", "required")


@pytest.mark.parametrize("kind, field", [
    ("run", "created_at"), ("lease", "expires_at"), ("grant", "confirmed_at"), ("evidence", "observed_at"),
    ("issue_ledger", "updated_at"), ("install_receipt", "created_at"), ("audit_event", "at"),
])
def test_a_timestamp_that_is_no_real_instant_is_refused(kind, field):
    record = load(kind)
    record[field] = "2026-02-30T08:00:00Z"
    error = refused(kind, record)
    assert (error.details["field"], error.details["rule"]) == (f"$.{field}", "timestamp")


def test_a_nested_timestamp_that_is_no_real_instant_is_refused():
    ledger = load("issue_ledger")
    ledger["issues"][0]["created_at"] = "2026-08-16T24:00:00Z"
    error = refused("issue_ledger", ledger)
    assert (error.details["field"], error.details["rule"]) == ("$.issues[0].created_at", "timestamp")


def test_a_lease_expires_after_it_is_acquired_and_renewed():
    lease = load("lease")
    lease["expires_at"] = lease["renewed_at"]
    assert refused("lease", lease).details["rule"] == "lease_expires_after_renewal"
    lease = load("lease")
    lease["renewed_at"] = "2026-08-16T07:59:59Z"
    assert (refused("lease", lease).details["field"], refused("lease", lease).details["rule"]) == ("$.renewed_at", "time_order")


def test_a_route_decision_names_one_of_the_four_route_harnesses():
    route = load("route")
    route["harness"] = "deepseek_harness"
    for candidate in route["candidates"]:
        for observation in candidate["behavior_observations"]:
            observation["harness"] = "deepseek_harness"
    error = refused("route", route)
    assert (error.details["field"], error.details["rule"]) == ("$.harness", "enum")
    assert "claude_code, codex, kimi_code, opencode" in error.message
    for harness in ("codex", "claude_code", "kimi_code", "opencode"):
        route = load("route")
        route["harness"] = harness
        for observation in route["candidates"][0]["behavior_observations"]:
            observation["harness"] = harness
        records.validate("route", route)


def test_an_actor_may_be_manual_but_a_config_harness_may_not():
    lease = load("lease")
    lease["owner"]["harness"] = "manual"
    records.validate("lease", lease)
    config = load("config")
    config["harnesses"] = {"manual": {}}
    error = refused("config", config)
    assert (error.details["field"], error.details["rule"]) == ("$.harnesses", "enum")


@pytest.mark.parametrize("status", ["waiting_approval", "waiting_external", "blocked", "failed", "halted_kill_switch",
                                    "complete", "cancelled"])
def test_a_run_outside_ready_and_active_states_its_terminal_reason(status):
    run = load("run")
    run["status"] = status
    error = refused("run", run)
    assert (error.details["field"], error.details["rule"]) == ("$.terminal_reason", "terminal_reason_required")
    run["terminal_reason"] = {"code": status, "explanation": "synthetic"}
    records.validate("run", run)


def test_an_active_run_names_its_owner():
    run = load("run")
    run["status"] = "active"
    assert refused("run", run).details["rule"] == "active_run_has_owner"


def test_run_duration_is_kept_to_the_microsecond_not_finer():
    run = load("run")
    run["usage"]["duration_seconds"] = 1.000001
    records.validate("run", run)
    run["usage"]["duration_seconds"] = 1.0000001
    assert refused("run", run).details["rule"] == "microseconds"


def _event_with_lease() -> dict:
    event = load("audit_event")
    lease = load("lease")
    event.update(sequence=2, type="lease_acquired", lease_id=lease["lease_id"], lease_generation=0,
                 previous_event_digest="e" * 64, at=lease["acquired_at"],
                 data={"lease_id": lease["lease_id"], "generation": 0, "expires_at": lease["expires_at"]})
    event["projection"]["run"].update(status="active", owner=lease["owner"])
    event["projection"]["lease"] = lease
    return event


@needs_conformance
def test_an_audit_events_lease_envelope_names_its_projected_lease():
    event = _event_with_lease()
    records.validate("audit_event", event)
    assert not schema_errors("audit_event", event)
    broken = copy.deepcopy(event)
    broken["lease_generation"] = None
    assert refused("audit_event", broken).details["rule"] == "lease_envelope"
    broken = copy.deepcopy(event)
    broken["lease_generation"] = 1
    assert refused("audit_event", broken).details["rule"] == "lease_envelope"
    broken = copy.deepcopy(event)
    broken["projection"]["run"]["owner"] = {"harness": "codex", "actor": "someone-else", "session_id": "s"}
    assert refused("audit_event", broken).details["rule"] == "active_owner_is_lease_owner"


def test_an_audit_event_run_created_is_first_and_only_first():
    event = load("audit_event")
    event["sequence"] = 2
    event["previous_event_digest"] = "e" * 64
    assert refused("audit_event", event).details["rule"] == "run_created_first"
    event = _event_with_lease()
    event["sequence"] = 1
    event["previous_event_digest"] = None
    assert refused("audit_event", event).details["rule"] == "run_created_first"
    event = load("audit_event")
    event["previous_event_digest"] = "e" * 64
    assert refused("audit_event", event).details["rule"] == "digest_chain"


@pytest.mark.parametrize("kind, mutate, words", [
    ("config", lambda c: c.update(default_mode="endless"), "use one of: auto, loop"),
    ("config", lambda c: c.update(heartbeat_seconds=601), "use a value from 15 to 600"),
    ("config", lambda c: c.update(telemetry=True), "must be false"),
    ("config", lambda c: c.update(kill_switches=[]), "give at least 1 entry"),
    ("run", lambda r: r.update(objective=""), "must not be empty"),
    ("run", lambda r: r.update(extra=1), "remove it"),
    ("run", lambda r: r.pop("owner"), "add it"),
])
def test_refusals_say_what_to_write_instead(kind, mutate, words):
    record = load(kind)
    mutate(record)
    assert words in refused(kind, record).message


@needs_conformance
def test_our_validator_agrees_with_the_seed_schema_on_mutated_fixtures():
    """Sanity: each refusal above is also a schema refusal (we are not stricter on structure)."""
    lease = copy.deepcopy(load("lease"))
    lease["generation"] = -1
    assert schema_errors("lease", lease)
    assert refused("lease", lease).details["field"] == "$.generation"


amounts = st.decimals(min_value=0, max_value=10**9, places=6, allow_nan=False, allow_infinity=False)


@given(st.lists(amounts, min_size=1, max_size=20))
def test_cost_sums_are_exact_decimal_sums(values):
    total = None
    for value in values:
        total = add_money(total, format_money(value), "cost")
    assert Decimal(total) == sum(values, Decimal(0))
    assert parse_money(total, "cost") == Decimal(total)  # always canonical


HARNESS_STATUS = {
    "installed": True, "version": "1.2.3", "discovery": "verified", "behavior": "unverified", "skill_roots": [".agents"],
    "collisions": [], "checked_at": "2026-08-16T08:00:00Z", "evidence_id": None,
}


def test_harness_status_takes_the_seeds_pack_fields_as_optional():
    records.validate("harness_status", HARNESS_STATUS)
    seeded = {**HARNESS_STATUS, "pack_status": "complete", "missing_skills": [], "pack_receipt_id": None,
              "pack_digest": "a" * 64, "environment_digest": None, "behavior_evidence": None}
    assert records.to_dict(records.validate("harness_status", seeded)) == seeded
    error = refused("harness_status", {**HARNESS_STATUS, "pack_status": "ready"})
    assert (error.details["field"], error.details["rule"]) == ("$.pack_status", "enum")
    config = load("config")
    config["harnesses"] = {"codex": {**HARNESS_STATUS, "discovery": "maybe"}}
    error = refused("config", config)
    assert error.details["rule"] == "enum" and error.details["field"].endswith(".discovery")


def test_a_grant_confirmation_excludes_secrets():
    grant = load("grant")
    grant["confirmation_text"] = "CONFIRM with token ghp_" + "a" * 36
    error = refused("grant", grant)
    assert (error.details["field"], error.details["rule"]) == ("$.confirmation_text", "no_secrets")


def test_an_evidence_environment_is_redacted():
    evidence = load("evidence")
    evidence["environment"] = {"platform": "synthetic", "OPENAI_API_KEY": "sk-" + "b" * 40}
    error = refused("evidence", evidence)
    assert (error.details["field"], error.details["rule"]) == ("$.environment.OPENAI_API_KEY", "redacted")


def test_a_runs_selected_routes_are_keyed_by_capability_and_each_is_a_valid_route():
    run = load("run")
    route = load("route")
    run["selected_routes"] = {"lifecycle.test": route}
    records.validate("run", run)
    run["selected_routes"] = {"lifecycle.build": route}
    error = refused("run", run)
    assert (error.details["field"], error.details["rule"]) == ("$.selected_routes.lifecycle.build", "route_keyed_by_capability")
    bad = copy.deepcopy(route)
    bad["candidates"][0]["behavior_status"] = "failed"
    run["selected_routes"] = {"lifecycle.test": bad}
    error = refused("run", run)
    assert (error.details["field"], error.details["rule"]) == (
        "$.selected_routes.lifecycle.test.candidates[0].behavior_status", "selected_not_failed")


def test_an_issue_ledger_lists_each_issue_once_and_never_updates_before_creation():
    ledger = load("issue_ledger")
    ledger["issues"].append(copy.deepcopy(ledger["issues"][0]))
    assert (refused("issue_ledger", ledger).details["field"], refused("issue_ledger", ledger).details["rule"]) == (
        "$.issues", "unique_items")
    ledger = load("issue_ledger")
    ledger["issues"][0]["updated_at"] = "2026-08-16T08:09:59Z"
    error = refused("issue_ledger", ledger)
    assert (error.details["field"], error.details["rule"]) == ("$.issues[0].updated_at", "time_order")


def test_an_install_receipt_removes_on_uninstall_only_what_it_created():
    receipt = load("install_receipt")
    receipt["operations"][0]["pre_existing_digest"] = "c" * 64
    error = refused("install_receipt", receipt)
    assert (error.details["field"], error.details["rule"]) == ("$.operations[0].rollback_action", "remove_only_what_it_created")
    receipt["operations"][0]["rollback_action"] = "restore_if_unchanged"
    records.validate("install_receipt", receipt)
    receipt["operations"][0]["action"] = "skip"
    assert refused("install_receipt", receipt).details["rule"] == "skip_has_no_rollback"


@pytest.mark.parametrize("decided_at", ["2026-08-17T08:00:01Z", "2026-08-16T07:59:59Z"])
def test_a_verified_route_needs_behavior_proof_no_older_than_its_max_age_and_not_after_the_decision(decided_at):
    route = load("route")
    route["decided_at"] = "2026-08-17T08:00:00Z"  # exactly 86400 s after the observation: still fresh
    records.validate("route", route)
    route["decided_at"] = decided_at
    error = refused("route", route)
    assert (error.details["field"], error.details["rule"]) == ("$.verified_at", "behavior_proof_fresh")


@pytest.mark.parametrize("kind", sorted(records.KINDS))
def test_loopstates_own_schema_of_each_record_kind_accepts_what_the_validator_accepts(h, kind):
    """The schemas generated from the Structs (what a clone without ../shared checks against) are real checks."""
    from tests.runs.schemas import own_validator

    run_id, lease = h.leased()
    project = h.service.project(h.root)
    written = {
        "run": json.loads((project.dir / "runs" / run_id / "run.json").read_text()),
        "lease": json.loads((project.dir / "runs" / run_id / "lease.json").read_text()),
    }
    validator = own_validator(kind)
    if kind in written:
        assert list(validator.iter_errors(written[kind])) == []
    assert list(validator.iter_errors({"surely_not_a_field": 1})), f"the {kind} schema accepts anything"
