"""A second "machine" on the store: ``pg_child.py URL ROOT DATA_DIR NAME GO_FILE``.

Opens the store from its URL, waits until GO_FILE exists (so two children start together),
appends one event named NAME at the empty head, and, when another writer won that head,
gets the typed conflict and appends again exactly at the head the conflict names. Prints
JSON: whether it met a conflict, and the sequence it appended at.
"""

from __future__ import annotations

import json
import os
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))

from loopstate.core.backend import EMPTY, HeadConflict, seal_batch  # noqa: E402
from loopstate.core.project import Project  # noqa: E402
from loopstate.core.stores import open_store  # noqa: E402
from tests.core.corekit import TEST_LAYOUT  # noqa: E402


def main(url: str, root: str, data_dir: str, name: str, go: str) -> None:
    store = open_store(Project(root, data_dir=Path(data_dir), lock_timeout=30), url)
    store.head("core", TEST_LAYOUT)  # connected before the start signal
    while not os.path.exists(go):
        time.sleep(0.001)
    head, conflicts = EMPTY, []
    while True:
        try:
            done = store.append("core", TEST_LAYOUT, seal_batch([{"n": name, "schema_version": 1}], TEST_LAYOUT, head),
                                expected=head)
            break
        except HeadConflict as exc:
            conflicts.append([exc.expected.sequence, exc.actual.sequence])
            head = exc.actual
    store.close()
    print(json.dumps({"conflicts": conflicts, "sequence": done.sequence}))


if __name__ == "__main__":
    main(*sys.argv[1:6])
