"""The runs domain's records and ids, for the front doors that handle them outside a command.

``loopstate validate KIND FILE`` checks a hand-written record; setup and doctor
write install receipts and harness status files in the record form runs.md
describes; the run verbs read JSON arguments with the same strict reader and
name the run or grant that a create or a grant sent with a request id makes.
Each rule stays in ``domains/runs`` (records.py, the package's id derivations);
front doors reach it here, through the service, as every other rule
(docs/architecture.md, *Layers*).
"""

from __future__ import annotations

from typing import Any

from loopstate.domains.runs import grant_id_for_request, run_id_for_request
from loopstate.domains.runs.records import SCHEMA_VERSION, Record, parse_json, to_dict, validate, validate_written_event

__all__ = [
    "SCHEMA_VERSION", "Record", "check_record", "grant_id_for_request", "parse_json", "run_id_for_request", "to_dict",
    "validate",
]


def check_record(kind: str, data: Any) -> Record:
    """One record of ``kind`` checked as loopstate reads it: an audit event as loopstate writes it
    (the event plus the few fields loopstate adds, docs/runs.md), any other kind as runs.md defines
    it. Raises VALIDATION_FAILED naming the field and the rule, INVALID_PARAMS for an unknown kind."""
    if kind == "audit_event":
        written: Record = validate_written_event(data)
        return written
    checked: Record = validate(kind, data)
    return checked
