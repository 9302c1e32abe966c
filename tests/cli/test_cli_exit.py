"""How a `loopstate` process runs and ends: no cyclic GC, and at once after its output is flushed.

The console script runs ``cli.main.run``: ``main`` with the cyclic garbage
collector off, then ``finish``, which skips the interpreter's teardown
(freeing every object of a read's state one by one): the CLI's first exit
handler ends the process after every other handler has run and every
non-daemon thread was joined, unless the ``atexit`` module was imported before
the CLI started (a handler registered then would run after it). The servers
(``serve``, ``mcp``) keep both. Each test is a real process; what it checks is what a caller sees.
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

# An object of __main__ that says so when the interpreter tears it down (the usual exit does; os._exit does not).
SAYS_TORN_DOWN = ("class Said:\n"
                  "    def __del__(self):\n"
                  "        sys.stderr.write('TORN DOWN')\n"
                  "said = Said()\n")

# Runs the entry point as the console script does, with something of the test's own set up first.
ENTRY = ("import sys\n{setup}\n"
         "sys.argv = ['loopstate', *{argv!r}]\n"
         "from loopstate.cli.main import run\n"
         "run()\n")


def entry(setup: str, *argv: str, cwd: Path) -> subprocess.CompletedProcess[str]:
    code = ENTRY.format(setup=setup, argv=list(argv))
    return subprocess.run([sys.executable, "-c", code], cwd=cwd, capture_output=True, text=True, timeout=60)


def test_nothing_waiting_means_no_teardown_and_the_exit_code_is_kept(root: Path, data_dir: Path) -> None:
    """An object of __main__ that says so when torn down is never torn down; stdout and the code are intact."""
    done = entry(SAYS_TORN_DOWN, "root", cwd=root)
    assert done.returncode == 0 and done.stdout.strip() == str(root.resolve()), done
    assert "TORN DOWN" not in done.stderr
    failed = entry(SAYS_TORN_DOWN, "run", "status", "nope", cwd=root)
    assert failed.returncode == 1 and "NOT_FOUND" in failed.stderr and "TORN DOWN" not in failed.stderr


def test_an_atexit_handler_still_runs(root: Path, data_dir: Path) -> None:
    done = entry("import atexit\natexit.register(lambda: sys.stderr.write('HANDLER RAN'))", "root", cwd=root)
    assert done.returncode == 0 and "HANDLER RAN" in done.stderr, done


def test_another_thread_is_waited_for(root: Path, data_dir: Path, tmp_path: Path) -> None:
    """A thread still working when the command returns (a writer's snapshot, say) finishes before the exit."""
    marker = tmp_path / "thread-finished"
    setup = ("import threading, time\n"
             "def work():\n"
             "    time.sleep(0.5)\n"
             f"    open({str(marker)!r}, 'w').write('done')\n"
             "threading.Thread(target=work).start()")
    done = entry(setup, "root", cwd=root)
    assert done.returncode == 0, done
    assert marker.read_text() == "done"


def test_a_daemon_thread_does_not_hold_the_exit(root: Path, data_dir: Path) -> None:
    """The interpreter never waits for a daemon thread; neither does the fast exit (no teardown either)."""
    setup = SAYS_TORN_DOWN + ("import threading, time\n"
                              "threading.Thread(target=time.sleep, args=(30,), daemon=True).start()")
    done = entry(setup, "root", cwd=root)
    assert done.returncode == 0 and done.stdout.strip() == str(root.resolve()), done
    assert "TORN DOWN" not in done.stderr


def test_a_large_output_reaches_a_pipe_whole(root: Path, data_dir: Path) -> None:
    """~130 KB of JSON Schema through a pipe: every byte is flushed before the process ends."""
    done = subprocess.run([sys.executable, "-m", "loopstate.cli.main", "schema"], cwd=root, capture_output=True,
                          timeout=60)
    assert done.returncode == 0
    assert len(done.stdout) > 64 * 1024
    assert isinstance(json.loads(done.stdout), dict)


def test_the_console_script_is_the_finishing_entry() -> None:
    """pyproject's `loopstate` script runs cli.main:run (main alone would exit through the teardown)."""
    import tomllib

    pyproject = tomllib.loads((Path(__file__).resolve().parents[2] / "pyproject.toml").read_text())
    assert pyproject["project"]["scripts"]["loopstate"] == "loopstate.cli.main:run"


def test_a_server_ends_with_the_usual_exit(root: Path, data_dir: Path) -> None:
    """`serve` hands its streams to pygls: when its stdin closes, it exits through the normal teardown."""
    code = ENTRY.format(setup=SAYS_TORN_DOWN, argv=["serve"])
    done = subprocess.run([sys.executable, "-c", code], cwd=root, input="", capture_output=True, text=True, timeout=60)
    assert done.returncode == 1 and "stdin closed before shutdown" in done.stderr, done  # the server's own rule
    assert "TORN DOWN" in done.stderr


def test_a_command_runs_without_the_cyclic_collector_and_a_server_with_it(root: Path, data_dir: Path) -> None:
    said = "import atexit, gc\natexit.register(lambda: sys.stderr.write('GC %s' % gc.isenabled()))"
    command = entry(said, "root", cwd=root)
    assert command.returncode == 0 and "GC False" in command.stderr, command
    server = subprocess.run([sys.executable, "-c", ENTRY.format(setup=said, argv=["serve"])], cwd=root, input="",
                            capture_output=True, text=True, timeout=60)
    assert "GC True" in server.stderr, server


def test_a_handler_registered_while_the_command_runs_runs_and_the_teardown_is_still_skipped(root: Path,
                                                                                           data_dir: Path) -> None:
    """The fast exit is the first exit handler, so it runs after any the command's own imports register."""
    setup = SAYS_TORN_DOWN + (
        "import loopstate.cli.output as output\n"
        "guarded = output.run_guarded\n"
        "def registering(args):\n"
        "    import atexit\n"
        "    atexit.register(lambda: sys.stderr.write('LATE HANDLER RAN'))\n"
        "    return guarded(args)\n"
        "output.run_guarded = registering\n")
    done = entry(setup, "root", cwd=root)
    assert done.returncode == 0 and done.stdout.strip() == str(root.resolve()), done
    assert "LATE HANDLER RAN" in done.stderr and "TORN DOWN" not in done.stderr, done.stderr


def test_a_write_exits_without_the_teardown_too(root: Path, data_dir: Path) -> None:
    """A write keeps its lock descriptor in a weakref finalizer (which registers an exit handler): it still ends
    at once, with its code and output intact, and what it wrote is there for the next process."""
    done = entry(SAYS_TORN_DOWN, "intent", "start", "--label", "fast", "--json", cwd=root)
    assert done.returncode == 0, done.stderr
    assert json.loads(done.stdout)["events"][0]["event_type"] == "task_started"
    assert "TORN DOWN" not in done.stderr
    refused = entry(SAYS_TORN_DOWN, "intent", "add", "00000000-0000-4000-8000-000000000001", "x", cwd=root)
    assert refused.returncode == 1 and "NOT_FOUND" in refused.stderr and "TORN DOWN" not in refused.stderr
    shown = subprocess.run([sys.executable, "-m", "loopstate.cli.main", "log", "--json"], cwd=root,
                           capture_output=True, text=True, timeout=60)
    assert [e["event_type"] for e in json.loads(shown.stdout)["streams"][0]["events"]] == ["task_started"]
