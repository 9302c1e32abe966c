"""Issue 12: a runs CLI a harness author can drive from a shell, through the real CLI in subprocesses.

Every runs command the sidecar serves has a verb; `run list`; ids by any unique
prefix; `run status` tells of a standing kill switch; `run stop` halts the
whole project and `--cancel RUN` cancels one run.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from loopstate_protocol.runs import COMMANDS

from loopstate.domains.runs import run_id_for_request
from tests.conftest import CONFORMANCE, needs_conformance
from tests.runs.clikit import Cli, files_under

# The CLI verb of each runs command (tag -> argv words).
VERBS = {
    "runs.create": ["run", "create"], "runs.acquire": ["run", "acquire"], "runs.heartbeat": ["run", "heartbeat"],
    "runs.transition": ["run", "transition"], "runs.stage_start": ["run", "stage", "start"],
    "runs.stage_complete": ["run", "stage", "complete"], "runs.route_select": ["run", "route", "select"],
    "runs.issue_open": ["run", "issue", "open"], "runs.issue_update": ["run", "issue", "update"],
    "runs.evidence_add": ["run", "evidence", "add"], "runs.intend": ["run", "intend"],
    "runs.complete": ["run", "complete"], "runs.reconcile": ["run", "reconcile"],
    "runs.authority_grant": ["run", "authority", "grant"], "runs.authority_revoke": ["run", "authority", "revoke"],
    "runs.stop": ["run", "stop"], "runs.resume": ["run", "resume"], "runs.sync": ["run", "sync"],
}


@pytest.fixture
def cli(root: Path, data_dir: Path) -> Cli:
    return Cli(root, data_dir)


@pytest.mark.slow
def test_every_runs_command_the_sidecar_serves_has_a_verb_with_json(cli):
    assert set(VERBS) == {c.__struct_config__.tag for c in COMMANDS}
    for words in VERBS.values():
        usage = cli.ok(*words, "--help", root=False)
        assert "--json" in usage, words


@pytest.mark.slow
def test_stages_intents_and_completions_from_the_shell_with_short_ids(cli):
    run_id = cli.create()
    held = cli.acquire(run_id[:8])
    short = run_id[:8]
    assert cli.json("run", "stage", "start", short, "strategize", *held)["events"][0]["type"] == "stage_started"
    done = cli.json("run", "stage", "complete", short, "strategize", "--outcome", "passed", *held)
    assert [e["type"] for e in done["events"]] == ["stage_completed"]
    # An intent for the next stage: announced (its budget reserved), then completed exactly as declared.
    data = json.dumps({"stage": "spec_pack"})
    operation = cli.ok("run", "intend", short, "--type", "stage_started", "--data", data,
                       "--action", "local_write", "--destination", "repository", *held).strip()
    status = cli.status(short)
    assert status["pending_operation"]["operation_id"] == operation
    assert status["run"]["usage"]["mutations"] == 1
    completed = cli.json("run", "complete", short, operation[:8], "--type", "stage_started", "--data", data, *held)
    assert completed["events"][0]["type"] == "stage_started"
    status = cli.status(short)
    assert status["pending_operation"] is None and status["run"]["stage"] == "spec_pack"
    assert status["run"]["usage"]["stage_attempts"]["spec_pack"] == 1
    # A completion that differs from the declaration is refused by the domain, named as such.
    cli.ok("run", "intend", short, "--type", "stage_completed", "--data", json.dumps({"stage": "spec_pack", "outcome": "passed"}),
           "--action", "local_write", "--destination", "repository", *held)
    pending = cli.status(short)["pending_operation"]["operation_id"]
    error = cli.refused("run", "complete", short, pending[:8], "--type", "stage_completed",
                        "--data", json.dumps({"stage": "spec_pack", "outcome": "failed"}), *held)
    assert error["code"] == "RULE_VIOLATION" and "exactly match" in error["message"]
    reconciled = cli.json("run", "reconcile", short, pending[:6], "--outcome", "known_not_started", *held)
    assert reconciled["events"][0]["type"] == "operation_reconciled"


def test_intend_data_can_come_from_a_file_and_bad_json_is_named(cli, tmp_path):
    run_id = cli.create()
    held = cli.acquire(run_id)
    path = tmp_path / "data.json"
    path.write_text(json.dumps({"stage": "build"}))
    operation = cli.ok("run", "intend", run_id, "--type", "stage_started", "--data", f"@{path}",
                       "--action", "local_write", "--destination", "repository", *held).strip()
    assert cli.status(run_id)["pending_operation"]["completion_data"] == {"stage": "build"}
    assert len(operation) == 36
    error = cli.refused("run", "complete", run_id, operation, "--type", "stage_started", "--data", "{stage: build}", *held)
    assert "--data is not valid JSON" in error["message"]


def test_transition_to_a_stage_is_refused_and_says_which_verb_starts_stages(cli):
    assert "run stage start" in cli.ok("run", "transition", "--help", root=False)
    run_id = cli.create()
    held = cli.acquire(run_id)
    error = cli.refused("run", "transition", run_id, "build", "--reason", "next", *held)
    assert error["code"] == "INVALID_TRANSITION"
    assert "build is a stage, not a status" in error["message"] and "loopstate run stage start RUN build" in error["message"]


@needs_conformance  # its route fixture
def test_route_select_records_a_route_from_a_file(cli):
    run_id = cli.create()
    held = cli.acquire(run_id)
    route = CONFORMANCE / "the-loop" / "fixtures" / "valid" / "route.json"
    selected = cli.json("run", "route", "select", run_id, str(route), *held)
    assert selected["events"][0]["type"] == "route_selected"
    assert "lifecycle.test" in cli.status(run_id)["run"]["selected_routes"]


def test_sync_writes_the_halt_a_standing_kill_switch_owes(cli, root):
    run_id = cli.create()
    cli.acquire(run_id)
    (root / ".loopstate").mkdir()
    (root / ".loopstate" / "STOP").write_text("")
    synced = cli.json("run", "sync", run_id[:8])
    assert [e["type"] for e in synced["events"]] == ["kill_switch_detected"]
    assert cli.status(run_id)["run"]["status"] == "halted_kill_switch"
    assert cli.json("run", "sync", run_id[:8])["events"] == []


@pytest.mark.slow
def test_run_list_shows_status_stage_owner_and_budget_use(cli):
    assert "no runs in this project" in cli.ok("run", "list")
    first = cli.create()
    second = cli.create("--budgets", '{"max_mutations": 7}')
    held = cli.acquire(second, actor="worker-7")
    cli.ok("run", "stage", "start", second, "build", *held)
    listed = cli.json("run", "list")
    rows = {row["run_id"]: row for row in listed["runs"]}
    assert set(rows) == {first, second}
    assert rows[first]["status"] == "ready" and rows[first]["owner"] is None
    assert rows[second]["status"] == "active" and rows[second]["stage"] == "build"
    assert rows[second]["owner"] == "worker-7" and rows[second]["lease_live"] is True
    assert rows[second]["budgets"]["mutations"] == [0, 7]
    assert listed["kill_switch"] == {"set": False, "paths": [], "config_error": None, "shared": None}
    text = cli.ok("run", "list")
    assert first[:8] in text and second[:8] in text and "worker-7" in text and "0/7" in text


def test_run_list_on_a_fresh_store_writes_nothing(cli, data_dir):
    cli.ok("run", "list")
    assert files_under(data_dir) == []


def _two_runs_sharing_a_prefix() -> tuple[str, str, str]:
    """Two request ids whose derived run ids share their first four characters (a birthday search)."""
    seen: dict[str, str] = {}
    for n in range(100_000):
        request_id = f"req-{n}"
        prefix = run_id_for_request(request_id)[:4]
        if prefix in seen:
            return seen[prefix], request_id, prefix
        seen[prefix] = request_id
    raise AssertionError("no shared prefix found")


def test_ids_by_unique_prefix_and_an_ambiguous_prefix_lists_the_candidates(cli):
    one, two, prefix = _two_runs_sharing_a_prefix()
    first = cli.create("--request-id", one)
    second = cli.create("--request-id", two)
    assert cli.status(first[:8])["run_id"] == first  # an 8-character id, as listings print it
    assert cli.status(second[:8].upper())["run_id"] == second
    error = cli.refused("run", "status", prefix)
    assert error["code"] == "INVALID_PARAMS" and "ambiguous" in error["message"]
    assert sorted(error["details"]["candidates"]) == sorted([first, second])
    assert first in error["message"] and second in error["message"]
    absent = cli.refused("run", "status", "ffffffff" if not first.startswith("ffff") else "00000000")
    assert absent["code"] == "NOT_FOUND" and "run list" in absent["message"]
    short = cli.refused("run", "status", first[:3])
    assert short["code"] == "INVALID_PARAMS" and "at least 4" in short["message"]


def test_grant_issue_and_lease_ids_by_prefix(cli):
    grant = cli.ok("run", "authority", "grant", "--level", "bounded", "--by", "me", "--asset", "app",
                   "--action", "local_write", "--destination", "repository", "--risk", "files change",
                   "--confirm", "CONFIRM", "--expires", "2099-01-01T00:00:00Z").strip()
    assert cli.json("run", "authority", "show", grant[:8])["grant_id"] == grant
    run_id = cli.create("--grant", grant[:8])
    assert cli.status(run_id)["run"]["authority_grant_id"] == grant
    held = cli.acquire(run_id)
    issue = cli.json("run", "issue", "open", run_id[:8], "--title", "t", "--severity", "low", *held)["issue_id"]
    cli.ok("run", "issue", "update", run_id[:8], issue[:8], "acknowledged", *held)
    assert cli.status(run_id)["issues"][0]["status"] == "acknowledged"
    wrong = cli.refused("run", "heartbeat", run_id, "--lease", "zzzz", "--generation", "0")
    assert wrong["code"] == "NOT_FOUND" and "lease" in wrong["message"]


def test_status_tells_when_a_kill_switch_stands(cli, root):
    run_id = cli.create()
    cli.acquire(run_id)
    assert cli.status(run_id)["kill_switch"] == {"set": False, "paths": [], "config_error": None, "shared": None}
    (root / ".the-loop").mkdir()
    (root / ".the-loop" / "STOP").write_text("")
    status = cli.status(run_id)
    assert status["run"]["status"] == "active"  # nothing has run since: the halt is written at the next command
    assert status["kill_switch"] == {"set": True, "paths": [".the-loop/STOP"], "config_error": None, "shared": None}
    text = cli.ok("run", "status", run_id)
    assert "kill switch: SET (.the-loop/STOP)" in text and "halts at its next command" in text


@pytest.mark.slow
def test_stop_halts_every_run_of_the_project_and_says_so(cli, root):
    help_text = cli.ok("run", "stop", "--help", root=False)
    assert "EVERY run of the project" in help_text and "--cancel RUN" in help_text
    runs = [cli.create() for _ in range(2)]
    for run_id in runs:
        cli.acquire(run_id)
    text = cli.ok("run", "stop", runs[0][:8])
    assert "project-wide" in text and "halted 2 run(s)" in text
    said = [line for line in text.splitlines() if f"run stop {runs[0][:8]} stopped every run" in line]
    assert len(said) == 1 and "`loopstate run stop --cancel RUN` stops one run" in said[0]
    assert (root / ".loopstate" / "STOP").is_file()
    assert [cli.status(r)["run"]["status"] for r in runs] == ["halted_kill_switch"] * 2


def test_stop_cancel_cancels_one_run_and_sets_no_switch(cli, root):
    runs = [cli.create() for _ in range(2)]
    for run_id in runs:
        cli.acquire(run_id)
    text = cli.ok("run", "stop", "--cancel", runs[0][:8], "--reason", "not needed")
    assert "cancelled" in text and "no kill switch" in text
    assert not (root / ".loopstate" / "STOP").exists()
    assert [cli.status(r)["run"]["status"] for r in runs] == ["cancelled", "active"]


def test_stop_with_a_mistyped_run_still_sets_the_switch(cli, root):
    run_id = cli.create()
    cli.acquire(run_id)
    done = cli("run", "stop", "nothere1")
    assert done.returncode == 0 and "kill switch is set all the same" in done.stderr
    assert (root / ".loopstate" / "STOP").is_file()
    assert cli.status(run_id)["run"]["status"] == "halted_kill_switch"


def test_stop_sets_the_switch_even_when_the_config_is_invalid(cli, root):
    run_id = cli.create()
    (root / ".loopstate").mkdir(exist_ok=True)
    (root / ".loopstate" / "config.json").write_text('{"default_mode": "sometimes"}')
    stopped = cli.json("run", "stop")
    assert stopped["kill_switch"] == str(root / ".loopstate" / "STOP") and (root / ".loopstate" / "STOP").is_file()
    assert stopped["halted"] == [] and stopped["failed"][0]["run_id"] == run_id
    assert stopped["failed"][0]["code"] == "VALIDATION_FAILED"
    status = cli.status(run_id)
    assert status["kill_switch"]["set"] is True and "config.json" in status["kill_switch"]["config_error"]


def test_run_stop_in_a_nested_project_halts_the_enclosing_projects_runs_too(cli, root, data_dir):
    """`loopstate --root . goals add ...` in src/sub makes a project there; a stop given there still stops the repo."""
    run_id = cli.create()
    cli.acquire(run_id)
    sub = root / "src" / "sub"
    sub.mkdir(parents=True)
    nested = Cli(sub, data_dir)
    nested.ok("goals", "add", "g", "a todo of the nested project")
    stopped = nested.json("run", "stop")
    assert [p["root"] for p in stopped["projects"]] == [str(sub), str(root)]
    assert stopped["projects"][1]["halted"] == [run_id]
    assert cli.status(run_id)["run"]["status"] == "halted_kill_switch"
    assert (root / ".loopstate" / "STOP").exists() and (sub / ".loopstate" / "STOP").exists()
    text = nested.ok("run", "stop")
    assert f"an enclosing project, {root}" in text


@pytest.mark.slow
def test_a_stop_set_in_the_enclosing_project_halts_a_nested_projects_run(cli, root, data_dir):
    sub = root / "src" / "sub"
    sub.mkdir(parents=True)
    nested = Cli(sub, data_dir)
    run_id = nested.create()
    held = nested.acquire(run_id)
    cli.ok("run", "stop")  # at the top: sets the repository's switch only
    assert not (sub / ".loopstate" / "STOP").exists()
    refused = nested.refused("run", "heartbeat", run_id, *held)
    assert refused["code"] == "KILL_SWITCH" and str(root / ".loopstate" / "STOP") in refused["message"]
    assert nested.status(run_id)["run"]["status"] == "halted_kill_switch"
    # the control: without the enclosing switch, the nested run works
    (root / ".loopstate" / "STOP").unlink()
    other = nested.create()
    nested.ok("run", "heartbeat", other, *nested.acquire(other))


def test_run_list_status_shows_only_runs_in_those_statuses(cli):
    ready = cli.create()
    active = cli.create()
    cli.acquire(active)
    listed = cli.json("run", "list", "--status", "active")
    assert [row["run_id"] for row in listed["runs"]] == [active]
    both = cli.json("run", "list", "--status", "active", "--status", "ready")
    assert {row["run_id"] for row in both["runs"]} == {ready, active}
    assert "no runs in status failed (2 in other statuses)" in cli.ok("run", "list", "--status", "failed")
    typo = cli("run", "list", "--status", "actve")
    assert typo.returncode == 2 and "did you mean 'active'?" in typo.stderr


def test_the_protocols_run_statuses_are_the_run_records_statuses():
    from typing import get_args

    from loopstate_protocol.runs import RUN_STATUSES

    from loopstate.domains.runs.machine import TRANSITIONS
    from loopstate.domains.runs.records import Status

    assert set(RUN_STATUSES) == set(get_args(Status)) == set(TRANSITIONS)


@pytest.mark.slow
def test_leased_verbs_use_the_lease_this_user_acquired_when_none_is_named(cli):
    import getpass

    run_id = cli.create()
    acquired = cli.ok("run", "acquire", run_id[:8])
    assert "until " in acquired and f"`loopstate run heartbeat {run_id[:8]}` before then" in acquired
    assert "an expired lease fails the run" in acquired
    cli.ok("run", "heartbeat", run_id[:8])  # no --lease, no --generation
    started = cli.json("run", "stage", "start", run_id[:8], "build")
    assert [e["type"] for e in started["events"]] == ["stage_started"]
    half = cli.refused("run", "heartbeat", run_id[:8], "--lease", "abc")
    assert half["code"] == "INVALID_PARAMS" and "together" in half["message"]
    # someone else's lease is never taken by default: the message names its holder
    other = cli.create()
    cli.acquire(other, actor="worker-7")
    refused = cli.refused("run", "heartbeat", other[:8])
    assert refused["code"] == "LEASE_MISMATCH" and "held by worker-7" in refused["message"]
    assert f"not by {getpass.getuser()}" in refused["message"] and "--lease LEASE --generation N" in refused["message"]
    none = cli.create()
    assert "has no lease" in cli.refused("run", "heartbeat", none[:8])["message"]
