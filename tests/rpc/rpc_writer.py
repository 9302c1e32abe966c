"""Another process that writes to the store through the service (like a CLI call or a hook).

Usage: python rpc_writer.py ROOT COUNT PREFIX [PAUSE] -> starts COUNT intent tasks, one
command each, sleeping PAUSE seconds between commands (so each is seen on its own).
"""

from __future__ import annotations

import sys
import time

from loopstate_protocol.intent import IntentTaskStart

from loopstate.service.engine import Service


def main() -> int:
    root, count, prefix = sys.argv[1], int(sys.argv[2]), sys.argv[3]
    pause = float(sys.argv[4]) if len(sys.argv) > 4 else 0.0
    service = Service()
    for i in range(count):
        service.execute(root, IntentTaskStart(label=f"{prefix}-{i}"), f"{prefix}-{i}")
        if pause:
            time.sleep(pause)
    return 0


if __name__ == "__main__":
    sys.exit(main())
