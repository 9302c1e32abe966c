"""The JSON Schemas the runs tests check records against.

The seed's own (the-loop's, by path from the shared conformance folder, $refs
resolved) when ../shared is beside the clone; otherwise loopstate's own, generated
from the domain's msgspec Structs, so that every written record is still checked
against a schema in a clone that has no ../shared.
"""

from __future__ import annotations

import functools
import json
from typing import Any

import msgspec
from jsonschema import Draft202012Validator, FormatChecker
from referencing import Registry, Resource

from loopstate.domains.runs import records
from tests.conftest import CONFORMANCE, HAVE_CONFORMANCE

THE_LOOP = CONFORMANCE / "the-loop"
SCHEMAS = THE_LOOP / "schemas"
# Fields loopstate adds to a run event beside the seed's; dropped before checking against the seed's schema.
LOOPSTATE_FIELDS = ("request_id", "request_fingerprint", "loopstate_record", "batch")
KIND_SCHEMA = {
    "config": "config.schema.json", "run": "run.schema.json", "lease": "lease.schema.json",
    "grant": "grant.schema.json", "route": "route.schema.json", "evidence": "evidence.schema.json",
    "issue_ledger": "issue-ledger.schema.json", "install_receipt": "install-receipt.schema.json",
    "audit_event": "audit-event.schema.json",
}


@functools.cache
def _registry() -> Registry:
    registry = Registry()
    for path in SCHEMAS.glob("*.schema.json"):
        contents = json.loads(path.read_text())
        registry = registry.with_resource(contents["$id"], Resource.from_contents(contents))
    return registry


@functools.cache
def validator(kind: str) -> Draft202012Validator:
    if not HAVE_CONFORMANCE:
        return own_validator(kind)
    schema = json.loads((SCHEMAS / KIND_SCHEMA[kind]).read_text())
    return Draft202012Validator(schema, registry=_registry(), format_checker=FormatChecker())


@functools.cache
def own_validator(kind: str) -> Draft202012Validator:
    """loopstate's own schema of a record kind, generated from the Struct `loopstate validate KIND` decodes."""
    struct, _ = records.KINDS[kind]
    return Draft202012Validator(msgspec.json.schema(struct), format_checker=FormatChecker())


def schema_errors(kind: str, record: Any) -> list[str]:
    if kind == "audit_event":
        record = {k: v for k, v in record.items() if k not in LOOPSTATE_FIELDS}
    return [f"{list(e.absolute_path)}: {e.message}" for e in validator(kind).iter_errors(record)]
