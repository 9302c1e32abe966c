"""Another process that writes to the store through the service (like a CLI call or a hook).

Usage: python rpc_writer.py ROOT COUNT PREFIX -> starts COUNT intent tasks, one command each.
"""

from __future__ import annotations

import sys

from loopstate_protocol.intent import IntentTaskStart

from loopstate.service.engine import Service


def main() -> int:
    root, count, prefix = sys.argv[1], int(sys.argv[2]), sys.argv[3]
    service = Service()
    for i in range(count):
        service.execute(root, IntentTaskStart(label=f"{prefix}-{i}"), f"{prefix}-{i}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
