"""A second process on a store: ``store_child.py URL ROOT DATA_DIR STREAM COUNT``.

Opens the store from its URL (as any loopstate process on another machine would),
appends COUNT events to STREAM one batch at a time at the head it reads, and prints
the last head as JSON. Used by tests/store/backend_contract.py.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))

from loopstate.core.backend import HeadConflict, seal_batch  # noqa: E402
from loopstate.core.project import Project  # noqa: E402
from loopstate.core.stores import open_store  # noqa: E402
from tests.core.corekit import TEST_LAYOUT  # noqa: E402


def main(url: str, root: str, data_dir: str, stream: str, count: int) -> None:
    store = open_store(Project(root, data_dir=Path(data_dir), lock_timeout=30), url)
    head = store.head(stream, TEST_LAYOUT)
    done = 0
    while done < count:
        try:
            head = store.append(stream, TEST_LAYOUT, seal_batch([{"n": f"child-{done}", "schema_version": 1}],
                                                                TEST_LAYOUT, head), expected=head)
            done += 1
        except HeadConflict as exc:
            head = exc.actual
    store.close()
    print(json.dumps({"sequence": head.sequence, "hash": head.hash}))


if __name__ == "__main__":
    main(sys.argv[1], sys.argv[2], sys.argv[3], sys.argv[4], int(sys.argv[5]))
