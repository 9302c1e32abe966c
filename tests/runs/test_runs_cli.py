"""`loopstate run ...` and `loopstate validate KIND FILE` as a user runs them."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from loopstate.cli.main import main
from tests.conftest import REPO, env_for_child, needs_conformance
from tests.runs.schemas import THE_LOOP

VALID = sorted((THE_LOOP / "fixtures" / "valid").glob("*.json"))
INVALID = sorted((THE_LOOP / "fixtures" / "invalid").glob("*.json"))


def cli(*args: str, data_dir: Path) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "loopstate.cli.main", *args], capture_output=True, text=True,
                          env=env_for_child(data_dir), cwd=REPO, timeout=60)


@needs_conformance
@pytest.mark.slow
@pytest.mark.parametrize("path", VALID, ids=lambda p: p.stem)
def test_validate_exits_zero_for_each_valid_fixture(path, data_dir):
    result = cli("validate", path.stem, str(path), data_dir=data_dir)
    assert result.returncode == 0, result.stderr
    assert f"a valid {path.stem} record" in result.stdout


@needs_conformance
@pytest.mark.parametrize("path", INVALID, ids=lambda p: p.stem)
def test_validate_exits_one_naming_field_and_rule_for_each_invalid_fixture(path, capsys):
    assert main(["validate", "config", str(path)]) == 1
    err = capsys.readouterr().err
    assert "VALIDATION_FAILED" in err and "$." in err and "(rule: " in err


@needs_conformance
def test_validate_json_output_carries_field_and_rule(capsys):
    assert main(["validate", "config", str(THE_LOOP / "fixtures/invalid/enum-config.json"), "--json"]) == 1
    error = json.loads(capsys.readouterr().out)["error"]
    assert error["details"]["field"] == "$.default_mode" and error["details"]["rule"] == "enum"


def test_validate_refuses_a_file_that_is_not_json(tmp_path, capsys):
    path = tmp_path / "x.json"
    path.write_text("{nope")
    assert main(["validate", "lease", str(path)]) == 1
    assert "is not valid JSON" in capsys.readouterr().err


@pytest.mark.parametrize("content, words", [
    (b'{"schema_version": "1.0", "schema_version": "1.0"}', "appears twice"),
    (b'{"heartbeat_seconds": NaN}', "NaN is not a JSON number"),
    (b"\xff\xfe{}", "not UTF-8"),
])
def test_validate_refuses_ambiguous_or_undecodable_json(tmp_path, capsys, content, words):
    path = tmp_path / "x.json"
    path.write_bytes(content)
    assert main(["validate", "config", str(path)]) == 1
    assert words in capsys.readouterr().err


def test_validate_a_missing_file_or_a_folder_says_to_give_a_json_file(tmp_path, capsys):
    assert main(["validate", "config", str(tmp_path / "absent.json")]) == 1
    assert "does not exist; give the path of a JSON file" in capsys.readouterr().err
    assert main(["validate", "config", str(tmp_path)]) == 1
    assert "is a folder; give the path of a JSON file" in capsys.readouterr().err


@needs_conformance
def test_validate_an_unknown_kind_exits_one_listing_the_kinds(tmp_path, capsys):
    path = THE_LOOP / "fixtures/valid/config.json"
    assert main(["validate", "configuration", str(path)]) == 1
    err = capsys.readouterr().err
    assert "unknown record kind 'configuration'" in err
    assert "config, run, lease, grant, route, evidence, issue_ledger, install_receipt, audit_event" in err


@needs_conformance
def test_validate_a_record_of_the_wrong_kind_names_the_first_wrong_field(capsys):
    assert main(["validate", "run", str(THE_LOOP / "fixtures/valid/config.json")]) == 1
    err = capsys.readouterr().err
    assert "VALIDATION_FAILED" in err and "(rule: " in err


def test_cli_budgets_that_are_not_json_are_a_clear_refusal(root, data_dir, capsys):
    code = main(["run", "create", "--root", str(root), "--grant", "00000000-0000-4000-8000-000000000001",
                 "--objective", "x", "--done-gate", "y", "--asset", "a", "--budgets", "{max_mutations: 3}"])
    assert code == 1
    assert "--budgets is not valid JSON" in capsys.readouterr().err


@needs_conformance
@pytest.mark.slow
def test_cli_validate_by_subprocess_exit_codes(tmp_path, data_dir):
    good = cli("validate", "grant", str(THE_LOOP / "fixtures/valid/grant.json"), data_dir=data_dir)
    assert good.returncode == 0, good.stderr
    bad = cli("validate", "config", str(THE_LOOP / "fixtures/invalid/path-config.json"), "--json", data_dir=data_dir)
    assert bad.returncode == 1
    assert json.loads(bad.stdout)["error"]["details"] == {
        "record": "config", "field": "$.state_root", "rule": "path_inside_project"}
    assert cli("validate", "nonsense", str(tmp_path), data_dir=data_dir).returncode == 1


def _out(capsys, argv) -> str:
    code = main(argv)
    captured = capsys.readouterr()
    assert code == 0, captured.err
    return captured.out.strip()


def test_cli_run_flow_grant_create_acquire_heartbeat_issue_evidence_transition(root, data_dir, capsys, tmp_path):
    r = ["--root", str(root)]
    grant = _out(capsys, ["run", "authority", "grant", *r, "--level", "bounded", "--by", "me", "--asset", "app",
                          "--action", "local_write", "--destination", "repository", "--risk", "files change",
                          "--confirm", "CONFIRM BOUNDED", "--expires", "2099-01-01T00:00:00Z"])
    run_id = _out(capsys, ["run", "create", *r, "--grant", grant, "--objective", "ship it", "--done-gate", "tests pass",
                           "--asset", "app"])
    acquired = json.loads(_out(capsys, ["run", "acquire", *r, run_id, "--harness", "codex", "--actor", "bot", "--json"]))
    lease = acquired["events"][0]["projection"]["lease"]
    held = ["--lease", lease["lease_id"], "--generation", str(lease["generation"])]
    assert "needs no renewal yet" in _out(capsys, ["run", "heartbeat", *r, run_id, *held])
    issue = _out(capsys, ["run", "issue", "open", *r, run_id, *held, "--title", "bug", "--severity", "low", "--blocking"])
    issue_id = issue.split()[1]
    evidence = tmp_path / "evidence.json"
    evidence.write_text(json.dumps({"stage": "test", "requirement_ids": ["R1"], "type": "manual", "description": "looked",
                                    "procedure": ["look"], "outcome": "passed", "artifact_refs": [],
                                    "manual_observation": "it works", "digest": None, "environment": {}}))
    assert "evidence" in _out(capsys, ["run", "evidence", "add", *r, run_id, *held, str(evidence)])
    assert main(["run", "transition", *r, run_id, "complete", "--reason", "done", *held]) == 1
    assert "open blocking issues" in capsys.readouterr().err
    _out(capsys, ["run", "issue", "update", *r, run_id, issue_id, "closed", "--resolution", "fixed", *held])
    _out(capsys, ["run", "transition", *r, run_id, "complete", "--reason", "done", *held])
    status = json.loads(_out(capsys, ["run", "status", *r, run_id, "--json"]))
    assert status["run"]["status"] == "complete" and status["run"]["open_blocking_issues"] == 0
    assert "complete" in _out(capsys, ["run", "status", *r, run_id])


def test_cli_stop_without_a_run_sets_the_switch_and_halts_every_run(root, data_dir, capsys):
    r = ["--root", str(root)]
    grant = _out(capsys, ["run", "authority", "grant", *r, "--level", "attended", "--by", "me", "--asset", "*",
                          "--action", "local_write", "--destination", "repository", "--risk", "r", "--confirm", "C",
                          "--expires", "2099-01-01T00:00:00Z"])
    runs = [_out(capsys, ["run", "create", *r, "--grant", grant, "--objective", "o", "--done-gate", "g", "--asset", "a"])
            for _ in range(2)]
    _out(capsys, ["run", "acquire", *r, runs[0]])
    report = json.loads(_out(capsys, ["run", "stop", *r, "--json"]))
    assert sorted(report["halted"]) == sorted(runs) and Path(report["kill_switch"]).is_file()
    for run_id in runs:
        assert json.loads(_out(capsys, ["run", "status", *r, run_id, "--json"]))["run"]["status"] == "halted_kill_switch"
    assert main(["run", "resume", *r, runs[0], "--reason", "again"]) == 1
    assert "KILL_SWITCH" in capsys.readouterr().err


def test_cli_revoke_and_cancel(root, data_dir, capsys):
    r = ["--root", str(root)]
    grant = _out(capsys, ["run", "authority", "grant", *r, "--level", "bounded", "--by", "me", "--asset", "app",
                          "--action", "local_write", "--destination", "repository", "--risk", "r", "--confirm", "C",
                          "--expires", "2099-01-01T00:00:00Z"])
    run_id = _out(capsys, ["run", "create", *r, "--grant", grant, "--objective", "o", "--done-gate", "g", "--asset", "app"])
    assert "revoked" in _out(capsys, ["run", "authority", "revoke", *r, grant, "--by", "me"])
    assert main(["run", "acquire", *r, run_id]) == 1
    assert "AUTHORITY_DENIED" in capsys.readouterr().err
    _out(capsys, ["run", "stop", *r, "--cancel", run_id, "--reason", "no longer needed"])
    assert json.loads(_out(capsys, ["run", "status", *r, run_id, "--json"]))["run"]["status"] == "cancelled"


@needs_conformance
def test_cli_create_takes_mode_and_budgets_from_the_project_config(root, data_dir, capsys):
    config = json.loads((THE_LOOP / "fixtures/valid/config.json").read_text())
    config["default_mode"] = "loop"
    config["budgets"]["max_mutations"] = 9
    (root / ".loopstate").mkdir()
    (root / ".loopstate" / "config.json").write_text(json.dumps(config))
    r = ["--root", str(root)]
    grant = _out(capsys, ["run", "authority", "grant", *r, "--level", "bounded", "--by", "me", "--asset", "app",
                          "--action", "local_write", "--destination", "repository", "--risk", "r", "--confirm", "C",
                          "--expires", "2099-01-01T00:00:00Z"])
    run_id = _out(capsys, ["run", "create", *r, "--grant", grant, "--objective", "o", "--done-gate", "g", "--asset", "app"])
    run = json.loads(_out(capsys, ["run", "status", *r, run_id, "--json"]))["run"]
    assert run["mode"] == "loop" and run["budgets"]["max_mutations"] == 9


def test_cli_create_without_a_grant_binds_the_default_local_authority(root, data_dir, capsys):
    from loopstate_protocol.runs import GrantShow

    from loopstate.service.engine import Service

    r = ["--root", str(root)]
    created = json.loads(_out(capsys, ["run", "create", *r, "--objective", "o", "--done-gate", "g", "--asset", "app",
                                       "--json"]))
    assert [e["type"] for e in created["events"]] == ["run_created", "authority_granted"]
    grant = Service().query(str(root), GrantShow(grant_id=created["authority_grant_id"]))
    assert grant["level"] == "attended" and grant["expires_at"] > grant["confirmed_at"]
    assert grant["scope"] == {"assets": ["app"], "actions": ["local_write"], "destinations": ["repository"],
                              "exclusions": []}
    assert len(grant["permanent_invariants"]) == 8
    shown = _out(capsys, ["run", "authority", "show", *r, created["authority_grant_id"]])
    assert "attended" in shown and "actions: local_write" in shown and "destinations: repository" in shown
    acquired = json.loads(_out(capsys, ["run", "acquire", *r, created["run_id"], "--json"]))
    assert acquired["events"][0]["projection"]["run"]["status"] == "active"


@pytest.mark.jsonl_only("reads a line of the stream file")
def test_validate_accepts_an_event_loopstate_wrote_with_its_added_fields(root, data_dir, capsys, tmp_path):
    from loopstate.core import canonical
    from loopstate.service.engine import Service

    r = ["--root", str(root)]
    run_id = _out(capsys, ["run", "create", *r, "--objective", "o", "--done-gate", "g", "--asset", "app"])
    project = Service().project(str(root))
    lines = (project.dir / "streams" / f"runs.{run_id}.jsonl").read_bytes().splitlines()
    event = canonical.decode(lines[0])
    assert "request_id" in event and "request_fingerprint" in event
    path = tmp_path / "event.json"
    path.write_text(json.dumps(event))
    assert "a valid audit_event record" in _out(capsys, ["validate", "audit_event", str(path)])
    path.write_text(json.dumps({**event, "loopstate_record": {"not": "an issue"}}))
    assert main(["validate", "audit_event", str(path)]) == 1
    assert "$.loopstate_record" in capsys.readouterr().err
    path.write_text(json.dumps({**event, "note": "x"}))
    assert main(["validate", "audit_event", str(path)]) == 1
    assert "$.note" in capsys.readouterr().err


@pytest.mark.parametrize("group", [["run"], ["run", "issue"], ["run", "evidence"], ["run", "authority"], ["run", "stage"],
                                   ["run", "route"]])
def test_a_verb_group_without_its_verb_lists_its_verbs(group, capsys):
    assert main(group) == 2
    assert f"usage: loopstate {' '.join(group)}" in capsys.readouterr().err


@pytest.mark.jsonl_only("clears the kill switch by deleting the STOP file; a shared store's stop is lifted by run unstop (tests/team)")
@pytest.mark.slow
def test_cli_by_subprocess_create_acquire_stop_resume_with_json(root, data_dir):
    def run(*args: str) -> dict:
        done = cli("run", *args, "--root", str(root), "--json", data_dir=data_dir)
        assert done.returncode == 0, done.stderr + done.stdout
        return json.loads(done.stdout)

    created = run("create", "--objective", "o", "--done-gate", "g", "--asset", "app")
    run_id = created["run_id"]
    lease = run("acquire", run_id, "--harness", "codex", "--actor", "bot")["events"][0]["projection"]["lease"]
    assert lease["generation"] == 0
    held = ("--lease", lease["lease_id"], "--generation", "0")
    assert run("heartbeat", run_id, *held)["events"] == []  # coalesced
    stopped = run("stop", run_id)
    assert stopped["halted"] == [run_id] and stopped["named"] == {"run_id": run_id, "halted": True}
    assert run("status", run_id)["run"]["status"] == "halted_kill_switch"
    refused = cli("run", "resume", run_id, "--reason", "r", "--root", str(root), "--json", data_dir=data_dir)
    assert refused.returncode == 1 and json.loads(refused.stdout)["error"]["code"] == "KILL_SWITCH"
    (root / ".loopstate" / "STOP").unlink()
    stranger = cli("run", "resume", run_id, "--reason", "r", "--root", str(root), data_dir=data_dir)
    assert stranger.returncode == 1 and "its holder recovers by naming it" in stranger.stderr
    resumed = run("resume", run_id, "--reason", "switch cleared", "--harness", "codex", "--actor", "bot", *held)
    assert resumed["events"][-1]["type"] == "recovery_started"
    assert resumed["events"][-1]["projection"]["lease"]["generation"] == 1


def test_stopping_a_run_of_another_project_says_this_projects_switch_does_not_reach_it(tmp_path, data_dir):
    """`run stop RUN` from the wrong project sets that project's switch (it always does) and says, on stderr and
    in the JSON, that RUN is not one of its runs: the run in the other project keeps going, and the user is told."""
    here, there = tmp_path / "here", tmp_path / "there"
    here.mkdir()
    there.mkdir()
    created = cli("run", "create", "--objective", "o", "--done-gate", "g", "--asset", "app", "--root", str(there),
                  "--json", data_dir=data_dir)
    run_id = json.loads(created.stdout)["run_id"]
    cli("run", "acquire", run_id, "--harness", "codex", "--actor", "bot", "--root", str(there), data_dir=data_dir)
    stopped = cli("run", "stop", run_id, "--root", str(here), "--json", data_dir=data_dir)
    assert stopped.returncode == 0, stopped.stderr
    named = json.loads(stopped.stdout)["named"]
    assert named["code"] == "NOT_FOUND" and "not a run of this project" in named["message"]
    assert "not a run of this project" in stopped.stderr and str(there) not in stopped.stderr
    assert (here / ".loopstate" / "STOP").exists() and not (there / ".loopstate" / "STOP").exists()
    status = cli("run", "status", run_id, "--root", str(there), "--json", data_dir=data_dir)
    assert json.loads(status.stdout)["run"]["status"] == "active"
    human = cli("run", "stop", run_id, "--root", str(there), data_dir=data_dir)  # from its own project it halts
    assert human.returncode == 0 and "halted 1 run(s) now" in human.stdout and "note" not in human.stderr
