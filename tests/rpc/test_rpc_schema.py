"""The checked-in JSON Schema is the generated one, and real wire messages validate against it."""

from __future__ import annotations

import pytest
import json
from pathlib import Path

import jsonschema
from rpckit import run_cli, servers, task_start  # noqa: F401 (fixtures)

from loopstate_protocol import methods
from loopstate_protocol.schema import CHECKED_IN, schema_text

REGENERATE = "loopstate schema --output protocol/loopstate_protocol/loopstate.schema.json"


def test_the_checked_in_schema_is_not_stale() -> None:
    assert CHECKED_IN.read_text() == schema_text(), f"the protocol changed: run `{REGENERATE}` and commit it"


def test_loopstate_schema_prints_the_same_schema(data_dir: Path) -> None:
    done = run_cli(data_dir, "schema")
    assert done.returncode == 0, done.stderr
    assert done.stdout == schema_text()


def validator_for(definition: str) -> jsonschema.Draft202012Validator:
    document = json.loads(schema_text())
    return jsonschema.Draft202012Validator({**document, "$ref": f"#/$defs/{definition}"})


def test_every_method_and_notification_names_a_definition() -> None:
    document = json.loads(schema_text())
    assert set(document["x-methods"]) == set(methods.REQUESTS)
    assert set(document["x-notifications"]) == set(methods.NOTIFICATIONS)
    refs = [r["$ref"] for m in document["x-methods"].values() for r in m.values() if r]
    refs += [n["params"]["$ref"] for n in document["x-notifications"].values()]
    for ref in refs:
        assert ref.removeprefix("#/$defs/") in document["$defs"]


@pytest.mark.slow
def test_real_wire_messages_validate_against_the_schema(servers, root: Path) -> None:
    client = servers.start(initialize=False)
    initialized = client.initialize()
    validator_for("LoopstateCapability").validate(initialized["capabilities"]["experimental"]["loopstate"])
    params = {"root": str(root), "topic": "intent/snapshot", "deliver": "events", "since": 0}
    validator_for("SubscribeParams").validate(params)
    subscribed = client.request(methods.SUBSCRIBE, params)
    validator_for("SubscribeResult").validate(subscribed)
    command = {"root": str(root), "request_id": "r-1", "command": task_start()}
    validator_for("ExecuteParams").validate(command)
    validator_for("ExecuteResult").validate(client.request(methods.EXECUTE, command))
    method, changed = client.next_notification()
    assert method == methods.CHANGED
    validator_for("ChangedNotification").validate(changed)
    refused = client.response(client.send(methods.EXECUTE, {"root": str(root)}))
    validator_for("WireError").validate(refused["error"])


def test_a_misspelt_command_field_fails_the_schema_as_it_fails_the_server() -> None:
    bad = {"root": "/x", "request_id": "r", "command": {"kind": "intent.task_start", "labl": "x"}}
    errors = list(validator_for("ExecuteParams").iter_errors(bad))
    assert errors
