"""A real second process for the runs concurrency and crash tests.

    runs_child.py exec ROOT NOW COMMAND_JSON [go]   run one command (after a "go" line on stdin if asked);
                                                    print {"ok": [event types]} or {"error": code}
    runs_child.py hang ROOT NOW COMMAND_JSON        run one command, print its events, then sleep until killed
    runs_child.py hold ROOT LOCK shared|exclusive   hold a store lock, print "held", sleep until killed

Output lines are printed and flushed only after the call they report has returned.
"""

from __future__ import annotations

import json
import sys
import time
import uuid
from typing import Union

import msgspec

from loopstate_protocol import runs as proto

from loopstate.core.clock import FixedClock
from loopstate.core.errors import LoopstateError
from loopstate.core.project import Project
from loopstate.service.engine import Service

AnyCommand = Union[proto.COMMANDS]  # type: ignore[valid-type]


def execute(root: str, now: str, command_json: str):
    command = msgspec.json.decode(command_json.encode(), type=AnyCommand)
    service = Service(clock=FixedClock(now), lock_timeout=30)
    return service.execute(root, command, str(uuid.uuid4()))


def main() -> None:
    verb, *rest = sys.argv[1:]
    if verb == "exec":
        root, now, command_json, *go = rest
        if go:
            print("ready", flush=True)
            sys.stdin.readline()
        try:
            outcome = execute(root, now, command_json)
            print(json.dumps({"ok": [e["type"] for e in outcome.events]}), flush=True)
        except LoopstateError as exc:
            print(json.dumps({"error": exc.code.value, "message": exc.message}), flush=True)
    elif verb == "hang":
        root, now, command_json = rest
        outcome = execute(root, now, command_json)
        print(json.dumps(outcome.events), flush=True)
        time.sleep(600)
    elif verb == "hold":
        root, name, mode = rest
        project = Project(root)
        project.ensure()
        lock = project.lock(name)
        with lock.exclusive() if mode == "exclusive" else lock.shared():
            print("held", flush=True)
            time.sleep(600)
    else:
        raise SystemExit(f"unknown verb {verb}")


if __name__ == "__main__":
    main()
