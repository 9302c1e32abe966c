"""A real second process for the crash, concurrency and lock tests.

    core_child.py append ROOT STREAM WRITER COUNT [PAD]  append COUNT events, print each acknowledged sequence
    core_child.py group ROOT STREAM WRITER THREADS         threads append through Ledger.submit (group commit), forever
    core_child.py hold ROOT STREAM exclusive|shared        take the stream's lock, print "held", sleep

Every line is printed and flushed only after the call it reports has returned,
so the parent may treat a printed sequence as acknowledged (durable).
"""

from __future__ import annotations

import sys
import threading
import time

from corekit import TEST_LAYOUT

from loopstate.core.ledger import Ledger
from loopstate.core.project import Project


def append(root: str, stream: str, writer: str, count: int, pad: int) -> None:
    ledger = Ledger(Project(root, lock_timeout=60), stream, TEST_LAYOUT)
    for i in range(count):
        body = {"schema_version": 1, "event_type": "noted", "writer": writer, "i": i, "pad": "x" * (pad * (i % 7))}
        with ledger.mutation() as tx:
            (record,) = tx.append([body], request_id=f"{writer}-{i}", fp=f"fp-{writer}-{i}")
        print(f"{record.event['sequence']} {writer} {i}", flush=True)


def group(root: str, stream: str, writer: str, threads: int) -> None:
    ledger = Ledger(Project(root, lock_timeout=60), stream, TEST_LAYOUT)
    printing = threading.Lock()

    def run(t: int) -> None:
        i = 0
        while True:
            body = {"schema_version": 1, "event_type": "noted", "writer": f"{writer}.{t}", "i": i, "pad": "y" * (i % 5) * 900}
            (record,) = ledger.submit(
                lambda tx, body=body, rid=f"{writer}.{t}-{i}": tx.append([body], request_id=rid, fp="fp-" + rid)
            )
            with printing:
                print(f"{record.event['sequence']} {writer}.{t} {i}", flush=True)
            i += 1

    for t in range(threads):
        threading.Thread(target=run, args=(t,), daemon=True).start()
    time.sleep(600)


def hold(root: str, stream: str, mode: str) -> None:
    project = Project(root)
    project.ensure()
    lock = project.lock(stream)
    with lock.exclusive() if mode == "exclusive" else lock.shared():
        print("held", flush=True)
        time.sleep(600)


if __name__ == "__main__":
    verb, *rest = sys.argv[1:]
    if verb == "append":
        root, stream, writer, count, *pad = rest
        append(root, stream, writer, int(count), int(pad[0]) if pad else 0)
    elif verb == "group":
        root, stream, writer, threads = rest
        group(root, stream, writer, int(threads))
    elif verb == "hold":
        hold(*rest)
    else:
        raise SystemExit(f"unknown verb {verb}")
