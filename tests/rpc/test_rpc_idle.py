"""An idle `loopstate serve` sleeps: once its quiet-spell snapshot check has run, no timer wakes it.

Counted with strace on the real process: after a subscription and the idle
check that follows it, the event loop's epoll_wait blocks with no timeout, so
in five idle seconds it makes at most the one call that is still waiting.
Then the control: an append by another process wakes it (the subscriber is
told), and it goes back to sleep the same way.
"""

from __future__ import annotations

import pytest
import re
import shutil
import subprocess
import sys
import time
from pathlib import Path

from loopstate_protocol.client import LoopstateClient

from tests.conftest import env_for_child, prerequisite

needs_strace = prerequisite(shutil.which("strace") is not None,
                            "strace is not installed (Debian: apt-get install -y strace); it counts the wake-ups")


def wakeups(pid: int, seconds: float) -> list[str]:
    """The epoll_wait calls a process made in ``seconds`` (strace attached for that long)."""
    traced = subprocess.run(["timeout", str(seconds), "strace", "-f", "-e", "trace=epoll_wait,epoll_pwait",
                             "-p", str(pid)], capture_output=True, text=True)
    return [line for line in traced.stderr.splitlines() if re.search(r"epoll_p?wait\(", line)
            and "resumed" not in line]


@pytest.mark.slow
@needs_strace
def test_an_idle_subscribed_server_makes_no_wakeups(root: Path, data_dir: Path) -> None:
    with LoopstateClient([sys.executable, "-m", "loopstate.cli.main", "serve"], cwd=str(root),
                         env=env_for_child(data_dir)) as client:
        client.initialize()
        client.notify("initialized", {})
        client.subscribe(str(root), "intent/snapshot")
        time.sleep(5)  # past the quiet-spell check (2 s after the last request) and its snapshot job
        idle = wakeups(client.process.pid, 5)
        assert len(idle) <= 1 and not any(line.rstrip().endswith("= 0") for line in idle), idle  # none timed out
        # the control: another process's append reaches the subscriber, so the server is not simply stuck
        done = subprocess.run([sys.executable, "-m", "loopstate.cli.main", "intent", "start", "--claim",
                               "outcome:wake up", "--root", str(root)], env=env_for_child(data_dir),
                              capture_output=True, text=True, timeout=60)
        assert done.returncode == 0, done.stderr
        change = client.next_change(timeout=30)
        assert change.head.sequence >= 1
        time.sleep(5)
        assert len(wakeups(client.process.pid, 5)) <= 1
