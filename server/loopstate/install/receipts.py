"""The install receipt: what one `setup apply` did, and how each step is undone (the-loop's receipt shape).

A receipt lists its operations in the order they were done: ``mkdir`` for each
folder it created, ``copy`` for the config file it wrote (the merged file; the
source digest names our registration). Each records the destination's digest
before (null when it did not exist) and after, and its rollback: a folder or file
it created is removed, a file it replaced is restored from the bytes kept beside
the receipt, and either only while the destination is still what this receipt
left there. Digests are SHA-256 over the file's exact bytes.
"""

from __future__ import annotations

import hashlib
import json
from typing import Any

from loopstate.domains.runs.records import SCHEMA_VERSION, to_dict, validate

ACTIVE = ("complete", "partial")


def digest(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


def source_digest(groups: dict[str, dict]) -> str:
    """The digest of our registration itself (sorted keys, no spaces), independent of the file's layout."""
    return digest(json.dumps(groups, sort_keys=True, separators=(",", ":")).encode())


def mkdir_operation(relative: str) -> dict[str, Any]:
    return {"action": "mkdir", "source_digest": None, "destination": relative, "pre_existing_digest": None,
            "resulting_digest": None, "rollback_action": "remove_if_unchanged"}


def file_operation(relative: str, source: str, before: bytes | None, after: bytes) -> dict[str, Any]:
    return {"action": "copy", "source_digest": source, "destination": relative,
            "pre_existing_digest": None if before is None else digest(before), "resulting_digest": digest(after),
            "rollback_action": "remove_if_unchanged" if before is None else "restore_if_unchanged"}


def receipt(*, receipt_id: str, created_at: str, source_version: str, target_root: str, harness: str,
            operations: list[dict[str, Any]], result: str) -> dict[str, Any]:
    """A receipt checked by the install_receipt validator (records.validate), as a plain dict."""
    return to_dict(validate("install_receipt", {
        "schema_version": SCHEMA_VERSION, "receipt_id": receipt_id, "created_at": created_at, "actor": "manual",
        "source_version": source_version, "target_root": target_root, "harnesses": [harness],
        "operations": operations, "result": result,
    }))


def concerns(r: dict[str, Any], harness: str, target_root: str, destination: str) -> bool:
    """An active receipt that wrote ``destination`` under ``target_root`` for ``harness``."""
    return (r["result"] in ACTIVE and harness in r["harnesses"] and r["target_root"] == target_root
            and any(op["action"] == "copy" and op["destination"] == destination for op in r["operations"]))


def file_op(r: dict[str, Any], destination: str) -> tuple[int, dict[str, Any]]:
    return next((i, op) for i, op in enumerate(r["operations"])
                if op["action"] == "copy" and op["destination"] == destination)


def rollback_step(op: dict[str, Any], current: str | None) -> str:
    """What undoing a copy operation means for a destination whose digest is now ``current``:
    ``remove`` (we created it, it is unchanged), ``restore`` (we replaced it, unchanged), ``nothing`` (it is
    already what was there before, or gone), or ``changed`` (someone edited it since: not ours to undo)."""
    if current is None:
        return "nothing"
    if current == op["resulting_digest"]:
        return "remove" if op["pre_existing_digest"] is None else "restore"
    if current == op["pre_existing_digest"]:
        return "nothing"
    return "changed"
