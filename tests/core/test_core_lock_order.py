"""Writers waiting for a busy stream lock: first come, first served; a release wakes the next
waiter, not every waiter; a waiter killed in the middle stalls nobody; a waiter behind others
still times out naming the holder. Real processes on a real lock file.

These are properties of the kernel's own queue of blocked flock requests, which
core/flock_wait.py waits in (a blocking flock, bounded by the timeout): Linux keeps
conflicting waiters in a tree and wakes only the first at a release (the
"avoid thundering-herd wake-ups" change of 2018). A queue of our own in front of the flock
(open-file-description byte-range places, each waiter blocked on its predecessor's) was
built and measured slower (docs/benchmarks.md, *Many writers*), so these tests hold the
kernel's queue to what it was meant to give. A waiter is known to be queued when its
blocked request shows in the kernel's lock table (/proc/locks).
"""

from __future__ import annotations

import os
import subprocess
import sys
import time
from pathlib import Path

import pytest

from corekit import child_env, spawn

pytestmark = pytest.mark.skipif(not sys.platform.startswith("linux"), reason="reads Linux's /proc/locks")

# Waits for the stream lock; once it has it, appends its name to ORDER (under the lock) and
# reports its voluntary context switches while it waited.
WAITER = """
import resource, sys
from loopstate.core.errors import LoopstateError
from loopstate.core.project import Project
project = Project(sys.argv[1], lock_timeout=float(sys.argv[2]))
before = resource.getrusage(resource.RUSAGE_SELF).ru_nvcsw
try:
    with project.lock("core").exclusive():
        waited = resource.getrusage(resource.RUSAGE_SELF).ru_nvcsw - before
        with open(sys.argv[3], "a") as order:
            order.write(sys.argv[4] + "\\n")
    print("acquired", waited, flush=True)
except LoopstateError as error:
    print(error.code.value, error.details.get("holder", {}).get("pid"), flush=True)
"""


def _lock_inode(project) -> str:
    info = os.stat(project.dir / "locks" / "core.lock")
    return f"{os.major(info.st_dev):02x}:{os.minor(info.st_dev):02x}:{info.st_ino}"


def _blocked(project) -> int:
    """How many flock requests are blocked on the stream's lock file now ("->" lines)."""
    target = _lock_inode(project)
    with open("/proc/locks") as table:
        return sum(1 for line in table if "FLOCK" in line and "->" in line and target in line)


def _until(condition, what: str) -> None:
    """Wait for ``condition`` (a state of other processes, not a time): fail after a minute."""
    deadline = time.monotonic() + 60
    while not condition():
        if time.monotonic() > deadline:
            raise AssertionError(f"never: {what}")
        time.sleep(0.01)


def _holder(core_project, data_dir) -> subprocess.Popen:
    core_project.ensure()
    holder = spawn(data_dir, "hold", core_project.root, "core", "exclusive")
    assert holder.stdout.readline().strip() == "held"
    return holder


def _waiter(core_project, data_dir, order: Path, name: str, timeout: float = 60) -> subprocess.Popen:
    return subprocess.Popen([sys.executable, "-c", WAITER, core_project.root, str(timeout), str(order), name],
                            env=child_env(data_dir), stdout=subprocess.PIPE, text=True)


def _queue_up(core_project, data_dir, order: Path, names: list[str]) -> list[subprocess.Popen]:
    """Start one waiter per name, each only once the one before is blocked in the kernel's queue."""
    waiters = []
    for k, name in enumerate(names, 1):
        waiters.append(_waiter(core_project, data_dir, order, name))
        _until(lambda: _blocked(core_project) >= k, f"waiter {name} queued")
    return waiters


def test_waiters_get_the_lock_in_the_order_they_came_each_woken_about_once(core_project, data_dir, tmp_path):
    """Eight queued waiters get the lock in the order they came, and each sleeps through the
    hand-overs before its turn: woken about once, where a thundering herd would wake the last
    of them at each of the seven releases before it."""
    order = tmp_path / "order"
    holder = _holder(core_project, data_dir)
    names = [f"w{k}" for k in range(8)]
    waiters = _queue_up(core_project, data_dir, order, names)
    holder.kill()
    holder.communicate()
    outcomes = [waiter.communicate(timeout=120)[0].split() for waiter in waiters]
    assert [outcome[0] for outcome in outcomes] == ["acquired"] * 8, outcomes
    assert order.read_text().split() == names
    assert all(int(outcome[1]) <= 3 for outcome in outcomes), outcomes


def test_a_waiter_killed_in_the_middle_of_the_queue_stalls_nobody(core_project, data_dir, tmp_path):
    order = tmp_path / "order"
    holder = _holder(core_project, data_dir)
    first, middle, last = _queue_up(core_project, data_dir, order, ["first", "middle", "last"])
    middle.kill()  # SIGKILL: the kernel drops its place with its descriptors
    middle.communicate()
    _until(lambda: _blocked(core_project) == 2, "the killed waiter's request dropped")
    holder.kill()
    holder.communicate()
    assert first.communicate(timeout=120)[0].split()[0] == "acquired"
    assert last.communicate(timeout=120)[0].split()[0] == "acquired"
    assert order.read_text().split() == ["first", "last"]


def test_a_waiter_behind_others_times_out_naming_the_holder_and_leaves_the_queue(core_project, data_dir, tmp_path):
    order = tmp_path / "order"
    holder = _holder(core_project, data_dir)
    (ahead,) = _queue_up(core_project, data_dir, order, ["ahead"])
    impatient = _waiter(core_project, data_dir, order, "impatient", timeout=1)
    assert impatient.communicate(timeout=120)[0].split() == ["LOCK_TIMEOUT", str(holder.pid)]
    behind = _waiter(core_project, data_dir, order, "behind")  # queues after the impatient one left
    _until(lambda: _blocked(core_project) >= 2, "the last waiter queued")
    holder.kill()
    holder.communicate()
    assert ahead.communicate(timeout=120)[0].split()[0] == "acquired"
    assert behind.communicate(timeout=120)[0].split()[0] == "acquired"
    assert order.read_text().split() == ["ahead", "behind"]
