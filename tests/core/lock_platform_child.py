"""A real process taking store locks through one of the two OS primitives behind ``core/lock.py``.

    lock_platform_child.py posix|windows hold ROOT exclusive|shared   take the stream's lock, print "held", sleep
    lock_platform_child.py posix|windows try ROOT exclusive|shared S  take it within S seconds: print "got" or the error
    lock_platform_child.py posix|windows append ROOT N               N mutations of a new stream through a Ledger

``windows`` puts ``core/lock_windows.py`` (portalocker) in place of the platform's
primitive before anything is locked, so its code runs here on Linux, where
portalocker calls flock. Each run first prints which primitive is in use and
whether portalocker was imported.
"""

from __future__ import annotations

import json
import sys
import time

from loopstate.core import flock_wait
from loopstate.core.errors import LoopstateError
from loopstate.core.ledger import Ledger
from loopstate.core.project import Project

from corekit import TEST_LAYOUT


def main(impl: str, action: str, root: str, *rest: str) -> None:
    if impl == "windows":
        from loopstate.core import lock_windows

        flock_wait.primitive = lock_windows
    if action == "append":
        ledger = Ledger(Project(root, lock_timeout=30), "core", TEST_LAYOUT)
        for i in range(int(rest[0])):
            with ledger.mutation() as tx:
                tx.append([{"schema_version": 1, "event_type": "noted", "i": i}], request_id=f"r{i}", fp=f"f{i}")
    project = Project(root, lock_timeout=float(rest[1]) if action == "try" else 30)
    project.ensure()
    lock = project.lock("core")
    print(json.dumps({"primitive": flock_wait.primitive.__name__, "portalocker": "portalocker" in sys.modules}),
          flush=True)
    if action == "append":
        return
    try:
        held = lock.exclusive() if rest[0] == "exclusive" else lock.shared()
    except LoopstateError as exc:
        print(json.dumps({"code": exc.code.value, "message": exc.message, "holder": exc.details.get("holder")}),
              flush=True)
        return
    with held:
        print("held" if action == "hold" else "got", flush=True)
        if action == "hold":
            time.sleep(600)


if __name__ == "__main__":
    main(*sys.argv[1:])
