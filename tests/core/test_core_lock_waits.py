"""Lock waits are event-driven: a waiter blocks in the kernel's queue, bounded by the timeout, and does not poll.

Run in child processes (a CLI's or hook's main thread, where the bounded
blocking wait applies), counted with strace: a waiter behind a holder makes a
handful of flock calls however long it waits, where a poller makes dozens a
second. Then sixteen real CLI writers at once on one stream all succeed,
with one intact chain holding every event exactly once.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import time
from concurrent.futures import ThreadPoolExecutor

import pytest

from corekit import child_env, spawn

from tests.conftest import prerequisite

needs_strace = prerequisite(shutil.which("strace") is not None,
                            "strace is not installed (Debian: apt-get install -y strace); it counts the flock calls")

WAITER = """
import sys, time
from loopstate.core.errors import LoopstateError
from loopstate.core.project import Project
project = Project(sys.argv[1], lock_timeout=float(sys.argv[2]))
started = time.monotonic()
try:
    with project.lock("core").exclusive():
        print("acquired", round(time.monotonic() - started, 3), flush=True)
except LoopstateError as error:
    print(error.code.value, error.details.get("holder", {}).get("pid"), flush=True)
"""


def _flock_calls(trace: str) -> int:
    return sum(1 for line in trace.splitlines() if "flock(" in line and "LOCK_EX" in line)


@needs_strace
def test_a_waiter_blocks_until_the_holder_lets_go_instead_of_polling(core_project, data_dir, tmp_path):
    core_project.ensure()
    holder = spawn(data_dir, "hold", core_project.root, "core", "exclusive")
    assert holder.stdout.readline().strip() == "held"
    trace = tmp_path / "waiter.strace"
    waiter = subprocess.Popen(["strace", "-f", "-e", "trace=flock", "-o", str(trace), sys.executable, "-c", WAITER,
                               core_project.root, "20"], env=child_env(data_dir), stdout=subprocess.PIPE, text=True)
    time.sleep(2.0)  # the waiter waits behind the holder all this while
    holder.kill()
    holder.communicate()
    out, _ = waiter.communicate(timeout=60)
    assert out.startswith("acquired"), out
    assert _flock_calls(trace.read_text()) <= 4, trace.read_text()  # polling made ~100 calls in those 2 s


@needs_strace
def test_a_blocked_waiter_still_times_out_naming_the_holder(core_project, data_dir, tmp_path):
    core_project.ensure()
    holder = spawn(data_dir, "hold", core_project.root, "core", "exclusive")
    assert holder.stdout.readline().strip() == "held"
    try:
        trace = tmp_path / "waiter.strace"
        done = subprocess.run(["strace", "-f", "-e", "trace=flock", "-o", str(trace), sys.executable, "-c", WAITER,
                               core_project.root, "1.5"], env=child_env(data_dir), capture_output=True, text=True,
                              timeout=60)
        assert done.stdout.split() == ["LOCK_TIMEOUT", str(holder.pid)], done
        assert _flock_calls(trace.read_text()) <= 4, trace.read_text()
    finally:
        holder.kill()
        holder.communicate()


@pytest.mark.slow
def test_sixteen_cli_writers_at_once_all_succeed_on_one_intact_chain(tmp_path):
    root, data_dir = tmp_path / "proj", tmp_path / "data"
    root.mkdir()
    env = {**os.environ, "LOOPSTATE_DATA_DIR": str(data_dir)}
    first = subprocess.run([sys.executable, "-m", "loopstate.cli.main", "goals", "add", "g", "founding", "--root",
                            str(root)], env=env, capture_output=True, text=True, timeout=120)
    assert first.returncode == 0, first.stderr

    def write(index: int) -> subprocess.CompletedProcess[str]:
        return subprocess.run([sys.executable, "-m", "loopstate.cli.main", "goals", "add", "g", f"todo {index}",
                               "--root", str(root)], env=env, capture_output=True, text=True, timeout=120)

    with ThreadPoolExecutor(16) as pool:
        results = list(pool.map(write, range(16)))
    assert [r.returncode for r in results] == [0] * 16, [r.stderr for r in results if r.returncode]
    verified = subprocess.run([sys.executable, "-m", "loopstate.cli.main", "verify", "--root", str(root)], env=env,
                              capture_output=True, text=True, timeout=120)
    assert verified.returncode == 0, verified.stdout + verified.stderr
    board = json.loads(subprocess.run([sys.executable, "-m", "loopstate.cli.main", "goals", "board", "g", "--all",
                                       "--json", "--root", str(root)], env=env, capture_output=True, text=True,
                                      timeout=120).stdout)
    titles = sorted(t["title"] for group in board["active"] for t in group["todos"])
    assert titles == sorted(["founding", *(f"todo {i}" for i in range(16))])
