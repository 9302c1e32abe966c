"""The waiters' queue in front of a stream's flock (core/flock_wait.py): writers that find the
lock busy get it first come, first served; a release wakes the next waiter, not all of them; a
waiter killed in the middle of the queue stalls nobody; a waiter behind others still times out
naming the holder, and leaves the queue as it goes. Real processes on a real lock file; each
waiter is known to be queued when its place shows in the kernel's lock table (/proc/locks).
"""

from __future__ import annotations

import os
import subprocess
import sys
import time
from pathlib import Path

import pytest

from corekit import child_env, spawn
from loopstate.core import lock_posix

pytestmark = pytest.mark.skipif(not lock_posix.OFD_QUEUE, reason="the waiters' queue needs Linux's OFD locks")

# Waits for the stream lock; once it has it, appends its name to ORDER (under the lock) and
# reports its voluntary context switches while it waited. QUEUE=0 turns the queue off, as
# a platform without it is (the control).
WAITER = """
import os, resource, sys
from loopstate.core import flock_wait
from loopstate.core.errors import LoopstateError
from loopstate.core.project import Project
if os.environ.get("QUEUE") == "0":
    flock_wait.primitive.OFD_QUEUE = False
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


def _places_held(project) -> int:
    """How many open-file-description locks (queue places and the join byte) are held on
    the stream's lock file now; blocked requests ("->" lines) are not counted."""
    target = _lock_inode(project)
    with open("/proc/locks") as table:
        return sum(1 for line in table if "OFDLCK" in line and "->" not in line and target in line)


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


def _waiter(core_project, data_dir, order: Path, name: str, timeout: float = 60, queue: bool = True) -> subprocess.Popen:
    env = {**child_env(data_dir), "QUEUE": "1" if queue else "0"}
    return subprocess.Popen([sys.executable, "-c", WAITER, core_project.root, str(timeout), str(order), name],
                            env=env, stdout=subprocess.PIPE, text=True)


def _queue_up(core_project, data_dir, order: Path, names: list[str]) -> list[subprocess.Popen]:
    """Start one waiter per name, each only once the one before holds its place in the queue."""
    waiters = []
    for k, name in enumerate(names, 1):
        waiters.append(_waiter(core_project, data_dir, order, name))
        _until(lambda: _places_held(core_project) >= k, f"waiter {name} queued")
    return waiters


def test_waiters_get_the_lock_in_the_order_they_came(core_project, data_dir, tmp_path):
    order = tmp_path / "order"
    holder = _holder(core_project, data_dir)
    names = [f"w{k}" for k in range(8)]
    waiters = _queue_up(core_project, data_dir, order, names)
    holder.kill()
    holder.communicate()
    for waiter in waiters:
        assert waiter.communicate(timeout=120)[0].split()[0] == "acquired"
    assert order.read_text().split() == names
    assert _places_held(core_project) == 0  # every place let go


def test_a_release_wakes_the_next_waiter_not_every_waiter(core_project, data_dir, tmp_path):
    """The last of eight queued waiters sleeps through the seven hand-overs before its turn:
    it is woken about once (its predecessor's place), where waiters on the flock alone are
    each woken at every release (the control, with the queue turned off)."""

    def last_waiter_switches(queue: bool) -> int:
        order = tmp_path / f"order-{queue}"
        holder = _holder(core_project, data_dir)
        waiters = []
        for k in range(8):
            waiters.append(_waiter(core_project, data_dir, order, f"w{k}", queue=queue))
            if queue:
                _until(lambda: _places_held(core_project) >= k + 1, f"waiter {k} queued")
            else:
                _until(lambda: _flock_waiters(core_project) >= k + 1, f"waiter {k} blocked")
        holder.kill()
        holder.communicate()
        outcomes = [waiter.communicate(timeout=120)[0].split() for waiter in waiters]
        assert all(outcome[0] == "acquired" for outcome in outcomes), outcomes
        last = order.read_text().split()[-1]
        return int(outcomes[int(last[1:])][1])

    queued = last_waiter_switches(queue=True)
    herd = last_waiter_switches(queue=False)
    assert queued <= 3, queued
    assert herd > queued, (herd, queued)


def _flock_waiters(project) -> int:
    target = _lock_inode(project)
    with open("/proc/locks") as table:
        return sum(1 for line in table if "FLOCK" in line and "->" in line and target in line)


def test_a_waiter_killed_in_the_middle_of_the_queue_stalls_nobody(core_project, data_dir, tmp_path):
    order = tmp_path / "order"
    holder = _holder(core_project, data_dir)
    first, middle, last = _queue_up(core_project, data_dir, order, ["first", "middle", "last"])
    middle.kill()  # SIGKILL: the kernel drops its place with its descriptors
    middle.communicate()
    _until(lambda: _places_held(core_project) == 2, "the killed waiter's place dropped")
    holder.kill()
    holder.communicate()
    assert first.communicate(timeout=120)[0].split()[0] == "acquired"
    assert last.communicate(timeout=120)[0].split()[0] == "acquired"
    # The one behind the killed waiter went on to the flock itself, beside the first: both
    # get it, in either order (first come, first served holds among waiters still queued).
    assert sorted(order.read_text().split()) == ["first", "last"]


def test_a_waiter_behind_others_times_out_naming_the_holder_and_leaves_the_queue(core_project, data_dir, tmp_path):
    order = tmp_path / "order"
    holder = _holder(core_project, data_dir)
    (ahead,) = _queue_up(core_project, data_dir, order, ["ahead"])
    impatient = _waiter(core_project, data_dir, order, "impatient", timeout=1)
    assert impatient.communicate(timeout=120)[0].split() == ["LOCK_TIMEOUT", str(holder.pid)]
    behind = _waiter(core_project, data_dir, order, "behind")  # joins after the place the impatient one let go
    _until(lambda: _places_held(core_project) >= 2, "the last waiter queued")
    holder.kill()
    holder.communicate()
    assert ahead.communicate(timeout=120)[0].split()[0] == "acquired"
    assert behind.communicate(timeout=120)[0].split()[0] == "acquired"
    assert sorted(order.read_text().split()) == ["ahead", "behind"]


def test_the_lock_file_stays_one_json_record_with_the_queue_s_counter(core_project, data_dir, tmp_path):
    """The ticket counter after the owner record is JSON whitespace: the file still decodes as
    the record (tools and people read it), and an older layout's longer file is cut to size."""
    import json

    order = tmp_path / "order"
    holder = _holder(core_project, data_dir)
    waiters = _queue_up(core_project, data_dir, order, ["a", "b"])
    holder.kill()
    holder.communicate()
    for waiter in waiters:
        waiter.communicate(timeout=120)
    data = (core_project.dir / "locks" / "core.lock").read_bytes()
    assert len(data) == 144 and data[128:].strip() == b""
    assert json.loads(data)["pid"] == waiters[-1].pid
