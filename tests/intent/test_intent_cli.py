"""`loopstate intent ...` end to end: real subprocesses of the installed console script."""

from __future__ import annotations

import pytest

import json
import subprocess
import sys
from pathlib import Path

from intentkit import Intent, ledger_events, user_claim
from loopstate_protocol import intent as p
from tests.conftest import store_env

LOOPSTATE = Path(sys.executable).parent / "loopstate"


def cli(root: Path, data_dir: Path, *args: str, ok: bool = True, stdin: str | None = None) -> subprocess.CompletedProcess:
    env = {"LOOPSTATE_DATA_DIR": str(data_dir), "PATH": "/usr/bin:/bin", **store_env()}
    done = subprocess.run([str(LOOPSTATE), "intent", *args, "--root", str(root)], capture_output=True, text=True,
                          env=env, input=stdin, timeout=60)
    if ok:
        assert done.returncode == 0, done.stderr + done.stdout
    return done


def as_json(done: subprocess.CompletedProcess):
    return json.loads(done.stdout)


def test_start_add_and_show_as_json(root, data_dir):
    started = as_json(cli(root, data_dir, "start", "--label", "cli", "--claim", "hard_constraint:Keep the API stable", "--json"))
    task = started["events"][0]["task_id"]
    assert started["head"]["sequence"] == 1 and started["replayed"] is False
    added = as_json(cli(root, data_dir, "add", task, "probably wants speed", "--actor", "agent", "--confidence", "0.6",
                        "--facet", "outcome", "--json"))
    assert added["events"][0]["payload"]["claim"]["epistemic_status"] == "inferred"
    view = as_json(cli(root, data_dir, "show", "--task", task, "--json"))
    assert view["active_count"] == 2
    assert view["by_facet"]["hard_constraint"]["explicit"][0]["statement"] == "Keep the API stable"
    human = cli(root, data_dir, "show", "--task", task).stdout
    assert "hard_constraint" in human and "Keep the API stable" in human and "explicit*" in human
    hook = as_json(cli(root, data_dir, "hook-context", task, "--json"))
    assert "Keep the API stable" in hook["text"] and "speed" not in hook["text"]


def test_an_exact_retry_by_request_id_is_replayed(root, data_dir):
    first = as_json(cli(root, data_dir, "start", "--label", "x", "--request-id", "cli-1", "--json"))
    again = as_json(cli(root, data_dir, "start", "--label", "x", "--request-id", "cli-1", "--json"))
    assert again["replayed"] is True and again["events"] == first["events"]
    reused = cli(root, data_dir, "start", "--label", "y", "--request-id", "cli-1", "--json", ok=False)
    assert reused.returncode == 1 and as_json(reused)["error"]["code"] == "REQUEST_ID_REUSED"


def test_refusals_exit_1_with_the_stable_code(root, data_dir):
    off = cli(root, data_dir, "start", "--mode", "off", "--label", "no", ok=False)
    assert off.returncode == 1 and "RULE_VIOLATION" in off.stderr and "off mode" in off.stderr
    bad = cli(root, data_dir, "exec", '{"kind": "intent.claim_add", "task_idx": "1"}', "--json", ok=False)
    assert bad.returncode == 1 and as_json(bad)["error"]["code"] == "INVALID_PARAMS"
    private = cli(root, data_dir, "start", "--mode", "private", ok=False)
    assert private.returncode == 1 and "serving process" in private.stderr
    assert ledger_events(data_dir) == []


@pytest.mark.jsonl_only("purge rewrites the intent file; on PostgreSQL it is refused (tests/team/test_team_proofs_on_pg.py)")
def test_replace_audit_export_import_and_purge(root, data_dir, tmp_path):
    task = as_json(cli(root, data_dir, "start", "--claim", "soft_constraint:Prefer tabs", "--json"))["events"][0]["task_id"]
    old = [c for c in as_json(cli(root, data_dir, "audit", "--json"))["claims"]][0]["claim_id"]
    new = as_json(cli(root, data_dir, "replace", task, "Prefer spaces", "--supersedes", old, "--facet", "soft_constraint",
                      "--json"))["events"][0]["payload"]["claim"]["claim_id"]
    audit = as_json(cli(root, data_dir, "audit", "--task", task, "--json"))
    assert audit["edges"] == [{"new": new, "old": old, "relation": "supersedes"}]
    out = tmp_path / "graph.json"
    cli(root, data_dir, "export", "--out", str(out))
    imported = as_json(cli(root, data_dir, "import", str(out), "--json"))["events"][0]
    assert imported["event_type"] == "graph_imported"
    refused = cli(root, data_dir, "purge", "claim", new, ok=False)
    assert refused.returncode == 1 and "confirm" in refused.stderr
    cli(root, data_dir, "purge", "claim", new, "--yes")
    after = as_json(cli(root, data_dir, "audit", "--task", task, "--json"))
    assert [(c["claim_id"], c["state"]) for c in after["claims"]] == [(old, "invalidated")] and after["edges"] == []
    assert all(new not in f.read_text() for f in data_dir.rglob("*.jsonl"))
    tasks = as_json(cli(root, data_dir, "tasks", "--json"))["tasks"]
    assert len(tasks) == 2


def test_recover_a_private_session_from_the_cli(it: Intent, root, data_dir):
    task = it.run(p.IntentTaskStart(mode="private", host_session_id="host-sess-1",
                                    initial_claims=[user_claim("private words")])).events[0]["task_id"]
    done = as_json(cli(root, data_dir, "recover", "host-sess-1", "durable_off", "--json"))
    assert done["events"][0]["event_type"] == "task_started" and done["events"][0]["task_id"] == task
    assert list(data_dir.glob("projects/*/private-sessions/*.json")) == []
    assert "private words" not in "".join(f.read_text() for f in data_dir.rglob("*.jsonl"))


def test_candidates_and_promotion(root, data_dir):
    tasks = [as_json(cli(root, data_dir, "start", "--json"))["events"][0]["task_id"] for _ in range(3)]
    for task in tasks:
        cli(root, data_dir, "candidate", task, "Prefers small commits")
    (group,) = as_json(cli(root, data_dir, "candidates", "--json"))["candidates"]
    assert group["promotable"] and group["distinct_tasks"] == 3
    silent = cli(root, data_dir, "promote", tasks[0], group["signal_key"], "--confidence", "0.7", "--confirmation", "silence",
                 ok=False)
    assert silent.returncode == 1 and "never" in silent.stderr
    promoted = as_json(cli(root, data_dir, "promote", tasks[0], group["signal_key"], "--confidence", "0.7", "--json"))
    assert promoted["events"][0]["payload"]["claim"]["scope"] == "long_term"


def test_claims_json_from_stdin_and_exec_of_any_command(root, data_dir):
    claims = json.dumps([{"statement": "Never log tokens", "role": "user", "epistemic_status": "explicit",
                          "facets": ["hard_constraint"], "scope": "long_term"}])
    started = as_json(cli(root, data_dir, "start", "--claims-json", "-", "--json", stdin=claims))
    task = started["events"][0]["task_id"]
    assert started["events"][0]["payload"]["initial_claims"][0]["scope"] == "long_term"
    command = json.dumps({"kind": "intent.compaction_observe", "task_id": task, "trigger": "manual"})
    event = as_json(cli(root, data_dir, "exec", command, "--json"))["events"][0]
    assert event["event_type"] == "compaction_observed" and event["payload"]["trigger"] == "manual"
    bad = cli(root, data_dir, "start", "--claims-json", "-", ok=False, stdin='[{"statement": 5}]')
    assert bad.returncode == 1 and "INVALID_PARAMS" in bad.stderr


def test_missing_or_unreadable_input_files_are_refusals_not_crashes(root, data_dir, tmp_path):
    missing = cli(root, data_dir, "import", str(tmp_path / "nope.json"), "--json", ok=False)
    assert missing.returncode == 1 and as_json(missing)["error"]["code"] == "NOT_FOUND"
    assert "nope.json" in as_json(missing)["error"]["message"]
    claims = cli(root, data_dir, "start", "--claims-json", str(tmp_path / "absent.json"), ok=False)
    assert claims.returncode == 1 and "absent.json does not exist" in claims.stderr
    binary = tmp_path / "graph.bin"
    binary.write_bytes(b"\xff\xfe\x00")
    assert "not UTF-8" in cli(root, data_dir, "import", str(binary), ok=False).stderr
    task = as_json(cli(root, data_dir, "start", "--json"))["events"][0]["task_id"]
    unwritable = cli(root, data_dir, "export", "--out", str(tmp_path / "no-such-dir" / "g.json"), ok=False)
    assert unwritable.returncode == 1 and "--out" in unwritable.stderr and task


def test_purge_without_yes_says_to_pass_yes_and_deletes_nothing(root, data_dir):
    started = as_json(cli(root, data_dir, "start", "--claim", "Keep this", "--json"))
    claim = started["events"][0]["payload"]["initial_claims"][0]["claim_id"]
    refused = cli(root, data_dir, "purge", "claim", claim, ok=False)
    assert refused.returncode == 1 and "--yes" in refused.stderr
    assert as_json(cli(root, data_dir, "show", "--json"))["active_count"] == 1


def test_observe_signal_and_compaction_verbs(root, data_dir):
    task = as_json(cli(root, data_dir, "start", "--json"))["events"][0]["task_id"]
    seen = as_json(cli(root, data_dir, "observe", task, "--source-kind", "user_event", "--source-id", "host-evt-1",
                       "--via-hook", "--excerpt", "not kept", "--actor", "user", "--json"))
    ref = seen["events"][0]["payload"]["source_ref"]
    assert ref["event_id"] == "host-evt-1" and "excerpt" not in ref
    signal = as_json(cli(root, data_dir, "signal", task, "failure", "--note", "tests fail on CI", "--json"))
    assert signal["events"][0]["payload"]["claim"]["epistemic_status"] == "evidence"
    compacted = as_json(cli(root, data_dir, "compaction", task, "--host-event-id", "cmp-1", "--json"))
    assert compacted["events"][0]["payload"] == {"trigger": "manual", "active_claims": 1, "host_event_id": "cmp-1"}
    refused = cli(root, data_dir, "signal", task, "success", "--note", "done", "--actor", "user",
                  "--source-kind", "tool_result", "--source-id", "t1", ok=False)
    assert refused.returncode == 1 and "RULE_VIOLATION" in refused.stderr
