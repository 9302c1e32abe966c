"""Lock waits are event-driven: a waiter blocks in the kernel's queue, bounded by the timeout, and does not poll.

Run in child processes, counted with strace: a waiter behind a holder makes a
handful of flock calls however long it waits, where a poller makes dozens a
second; on the main thread (a CLI's or hook's, bounded by a SIGALRM timer) and
on another thread (a server's service thread, whose blocking flock runs in a
helper thread it waits for). A waiter that timed out on another thread leaves
no lock behind once the holder goes. Then sixteen real CLI writers at once on
one stream all succeed, with one intact chain holding every event exactly once.
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


THREAD_WAITER = """
import sys, threading, time
from loopstate.core.errors import LoopstateError
from loopstate.core.project import Project
project = Project(sys.argv[1], lock_timeout=float(sys.argv[2]))
said = []
def wait():
    started = time.monotonic()
    try:
        with project.lock("core").exclusive():
            said.append(f"acquired {time.monotonic() - started:.3f} {threading.current_thread().name}")
    except LoopstateError as error:
        said.append(f"{error.code.value} {error.details.get('holder', {}).get('pid')} {time.monotonic() - started:.1f}")
worker = threading.Thread(target=wait, name="service")
worker.start()
worker.join()
print(said[0], flush=True)
sys.stdin.readline()  # stay alive (holding whatever this process holds) until the parent has looked
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


@needs_strace
def test_a_waiter_on_another_thread_blocks_too_instead_of_polling(core_project, data_dir, tmp_path):
    core_project.ensure()
    holder = spawn(data_dir, "hold", core_project.root, "core", "exclusive")
    assert holder.stdout.readline().strip() == "held"
    trace = tmp_path / "waiter.strace"
    waiter = subprocess.Popen(["strace", "-f", "-e", "trace=flock", "-o", str(trace), sys.executable, "-c",
                               THREAD_WAITER, core_project.root, "20"], env=child_env(data_dir),
                              stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)
    time.sleep(2.0)
    holder.kill()
    holder.communicate()
    line = waiter.stdout.readline().split()
    out, _ = waiter.communicate("\n", timeout=60)
    assert line[0] == "acquired" and line[2] == "service", line
    assert _flock_calls(trace.read_text()) <= 4, trace.read_text()  # polling made ~100 calls in those 2 s


def test_a_waiter_on_another_thread_that_timed_out_holds_nothing_once_the_holder_goes(core_project, data_dir):
    """The abandoned helper is granted the lock when the holder goes, and lets go of it at once: a third
    process then takes the lock while the timed-out process is still alive."""
    core_project.ensure()
    holder = spawn(data_dir, "hold", core_project.root, "core", "exclusive")
    assert holder.stdout.readline().strip() == "held"
    waiter = subprocess.Popen([sys.executable, "-c", THREAD_WAITER, core_project.root, "1.0"],
                              env=child_env(data_dir), stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)
    try:
        code, pid, waited = waiter.stdout.readline().split()
        assert (code, pid) == ("LOCK_TIMEOUT", str(holder.pid)) and 0.9 <= float(waited) < 5, (code, pid, waited)
        holder.kill()
        holder.communicate()
        third = subprocess.run([sys.executable, "-c", WAITER, core_project.root, "5"], env=child_env(data_dir),
                               capture_output=True, text=True, timeout=60)
        assert third.stdout.startswith("acquired"), third  # not held by the timed-out process's helper
        assert waiter.poll() is None, "the timed-out process was to stay alive while the third one locked"
    finally:
        holder.kill()
        holder.communicate()
        waiter.communicate("\n", timeout=60)


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
