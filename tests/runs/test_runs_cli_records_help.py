"""Issue 12: the records a user writes (evidence, issues) have a worked example that works, and a schema.

The examples are taken from the real `--help` text and run as written, so they
cannot drift from what loopstate accepts; `loopstate schema` documents the
fields of each nested record, checked against the server's own record types.
"""

from __future__ import annotations

import functools
import json
import re
import shlex
from pathlib import Path
from typing import Any, get_args

import msgspec
import pytest

from loopstate.domains.runs import records
from tests.runs.clikit import Cli


@pytest.fixture
def cli(root: Path, data_dir: Path) -> Cli:
    return Cli(root, data_dir)


@pytest.mark.slow
def test_the_evidence_example_in_help_is_accepted_as_written(cli, tmp_path):
    text = cli.ok("run", "evidence", "add", "--help", root=False)
    example = re.search(r"<<'EOF'\n(.*?)\n\s*EOF\n", text, re.S)
    assert example, text
    path = tmp_path / "evidence.json"
    path.write_text(example.group(1))
    run_id = cli.create()
    held = cli.acquire(run_id)
    added = cli.json("run", "evidence", "add", run_id, str(path), *held)
    assert added["events"][0]["type"] == "evidence_recorded"
    assert cli.status(run_id)["evidence_ids"] == [added["evidence_id"]]


@pytest.mark.slow
def test_the_issue_example_in_help_runs_as_written(cli):
    text = cli.ok("run", "issue", "open", "--help", root=False)
    lines = re.findall(r"^\s+(loopstate run issue .*?)(?<!\\)$", text.replace("\\\n", " "), re.M)
    assert len(lines) == 2, text
    run_id = cli.create()
    held = cli.acquire(run_id)
    lease, generation = held[1], held[3]
    opened = None
    for line in lines:
        argv = shlex.split(line)[1:]
        if opened is not None:
            argv = [opened if word == "ISSUE" else word for word in argv]
        argv = [{"RUN": run_id, "LEASE": lease, "1": generation}.get(word, word) for word in argv]
        result = cli.json(*argv)
        opened = opened or result["issue_id"]
    issue = cli.status(run_id)["issues"][0]
    assert issue["title"] == "empty input crashes the parser" and issue["blocking"] is True
    assert issue["status"] == "resolving"


@functools.cache
def _schema() -> dict[str, Any]:
    """What `loopstate schema` prints (it reads no store: the data dir is never touched)."""
    return json.loads(Cli(Path("."), Path("unused"))("schema", root=False).stdout)


def _fields(cls: type) -> set[str]:
    return {f.encode_name for f in msgspec.structs.fields(cls)}


def test_loopstate_schema_documents_the_evidence_fields_the_server_checks():
    defs = _schema()["$defs"]
    evidence = defs["EvidenceAdd"]["properties"]["evidence"]
    assert evidence["type"] == "object" and evidence["additionalProperties"] is False
    filled = {"evidence_id", "run_id", "actor", "observed_at", "schema_version"}
    assert set(evidence["properties"]) == _fields(records.Evidence) - filled
    required = {f.encode_name for f in msgspec.structs.fields(records.Evidence) if f.required} - filled - {"stage"}
    assert set(evidence["required"]) == required
    assert evidence["properties"]["type"]["enum"] == list(get_args(records.EvidenceType))
    assert evidence["properties"]["outcome"]["enum"] == list(get_args(records.EvidenceOutcome))
    kinds = evidence["properties"]["artifact_refs"]["items"]["properties"]["kind"]["enum"]
    assert kinds == list(get_args(msgspec.structs.fields(records.ArtifactRef)[0].type))


@pytest.mark.parametrize("command, field, record", [
    ("IssueOpen", "owner", records.Actor), ("Create", "actor", records.Actor), ("Create", "asset", records.Asset),
    ("Create", "budgets", records.Budgets), ("AuthorityGrant", "scope", records.Scope),
])
def test_loopstate_schema_documents_each_nested_record(command, field, record):
    schema = _schema()["$defs"][command]["properties"][field]
    documented = next((s for s in schema.get("anyOf", [schema]) if s.get("type") == "object"), None)
    assert documented is not None, schema
    assert set(documented["properties"]) == _fields(record)
    if record is records.Actor:
        assert documented["properties"]["harness"]["enum"] == list(get_args(records.ActorHarness))


def test_the_intend_and_complete_example_in_help_runs_as_written(cli):
    text = cli.ok("run", "intend", "--help", root=False).replace("\\\n", " ")
    intend = re.search(r"OP=\$\((loopstate run intend .*?)\)$", text, re.M)
    complete = re.search(r"^\s+(loopstate run complete .*)$", text, re.M)
    assert intend and complete, text
    run_id = cli.create()
    held = cli.acquire(run_id)
    words = {"RUN": run_id, "LEASE": held[1], "1": held[3]}
    operation = cli.ok(*[words.get(w, w) for w in shlex.split(intend.group(1))[1:]]).strip()
    words["$OP"] = operation
    argv = [words.get(w, w) for w in shlex.split(complete.group(1).replace('"$OP"', "$OP"))[1:]]
    assert cli.json(*argv)["events"][0]["type"] == "stage_started"
    assert cli.status(run_id)["run"]["stage"] == "build"
