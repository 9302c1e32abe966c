"""Issue 29: colour on a terminal, in the outputs a person scans, and never with NO_COLOR or into a pipe.

Real CLI processes on a real pty: `intent show` paints each claim's status,
`goals board` its todo states and the gates waiting for the user, `run list`
and `run status` the run's status, `verify` ok and CORRUPT, `doctor` its
verdicts; the same commands with NO_COLOR, or into a pipe, print the same
words with no escape at all. Stored text shaped like loopstate's own colour
marker is shown, never obeyed.
"""

from __future__ import annotations

import json
import os
import re
from pathlib import Path

import pytest

from clirun import cli, on_a_terminal

ESC = re.compile(rb"\x1b\[[0-9;]*m")


def seen_on_a_terminal(argv: list[str], cwd: Path, env: dict[str, str], *, stderr_too: bool = True) -> bytes:
    """What a command writes to a real terminal (stdout, and stderr unless not ``stderr_too``), lines ended by \\n."""
    return on_a_terminal(argv, cwd, env, stderr=stderr_too).replace(b"\r\n", b"\n")


def _ok(*args: str, cwd: Path, data: Path, stdin: str | None = None) -> str:
    done = cli(*args, cwd=cwd, data_dir=data, stdin=stdin)
    assert done.returncode == 0, done
    return done.stdout


@pytest.fixture
def scene(tmp_path: Path) -> tuple[Path, Path, dict[str, str]]:
    """A project with claims of several statuses, a goal with a blocked todo and gates, and a run."""
    root, data = tmp_path / "proj", tmp_path / "data"
    root.mkdir()
    _ok("intent", "start", "--claim", "outcome:Ship it", cwd=root, data=data)
    task = json.loads(_ok("intent", "tasks", "--json", cwd=root, data=data))["tasks"][0]["task_id"]
    _ok("intent", "add", task, "maybe redis", "--status", "inferred", "--actor", "agent", "--confidence", "0.4",
        cwd=root, data=data)
    _ok("intent", "add", task, "no redis", "--facet", "disagreement", "--status", "disputed", cwd=root, data=data)
    _ok("goals", "add", "g", "first", cwd=root, data=data)
    _ok("goals", "add", "g", "second", cwd=root, data=data)
    _ok("goals", "block", "g", "T002", "--reason", "waiting", cwd=root, data=data)
    _ok("goals", "gate", "g", "approve the design", "--kind", "user", "--todo", "T001", cwd=root, data=data)
    _ok("run", "create", "--objective", "o", "--done-gate", "t", "--asset", "app", cwd=root, data=data)
    base = {k: v for k, v in os.environ.items() if k not in ("NO_COLOR", "PAGER")}
    env = {**base, "LOOPSTATE_DATA_DIR": str(data), "TERM": "xterm", "LOOPSTATE_NO_PAGER": "1",
           "HOME": str(tmp_path)}
    return root, data, env


def test_the_everyday_outputs_are_coloured_on_a_terminal(scene) -> None:
    root, data, env = scene
    shown = seen_on_a_terminal(["intent", "show"], root, env)
    assert b"\x1b[32mexplicit*" in shown and b"\x1b[33minferred" in shown and b"\x1b[31mdisputed*" in shown
    assert b"\x1b[31mopen dispute\x1b[0m:" in shown
    board = seen_on_a_terminal(["goals", "board", "g"], root, env)
    assert b"\x1b[31mblocked" in board  # a todo state
    assert b"\x1b[1;33m1 waiting for you\x1b[0m" in board and b"\x1b[1;33mopen" in board  # the user's gate
    run_list = seen_on_a_terminal(["run", "list"], root, env)
    assert b"\x1b[33mready" in run_list
    run_id = json.loads(_ok("run", "list", "--json", cwd=root, data=data))["runs"][0]["run_id"]
    assert b"\x1b[33mready\x1b[0m" in seen_on_a_terminal(["run", "status", run_id], root, env)
    assert b"\x1b[32mok\x1b[0m      intent:" in seen_on_a_terminal(["verify"], root, env)
    doctor = seen_on_a_terminal(["doctor"], root, env)
    assert b"\x1b[31mproblem\x1b[0m:" in doctor
    assert b"\x1b[31mdoctor found problems" in doctor
    # Columns line up with colour as without: the words after the status start where they would.
    plain = _ok("goals", "board", "g", cwd=root, data=data)
    assert ESC.sub(b"", board).decode().count("T002  blocked  second") == plain.count("T002  blocked  second") == 1


def test_no_color_and_pipes_get_the_same_words_without_escapes(scene) -> None:
    root, data, env = scene
    for argv in (["intent", "show"], ["goals", "board", "g"], ["run", "list"], ["verify"], ["doctor"]):
        coloured = seen_on_a_terminal(argv, root, env, stderr_too=False)
        uncoloured = seen_on_a_terminal(argv, root, {**env, "NO_COLOR": ""}, stderr_too=False)  # set to anything, even empty
        assert b"\x1b" not in uncoloured, (argv, uncoloured)
        assert ESC.sub(b"", coloured) == uncoloured, argv
        piped = cli(*argv, cwd=root, data_dir=data, env={"HOME": env["HOME"]})
        assert "\x1b" not in piped.stdout and "\x1b" not in piped.stderr, argv
        assert piped.stdout == uncoloured.decode(), argv
    assert b"\x1b[" in seen_on_a_terminal(["verify"], root, env, stderr_too=False)  # (the comparison above had colour)


def test_a_corrupt_stream_is_red_on_a_terminal(scene) -> None:
    root, data, env = scene
    stream = next((data / "projects").glob("*/streams/intent.jsonl"))
    data_bytes = stream.read_bytes()
    assert data_bytes.count(b"Ship it") == 1
    stream.write_bytes(data_bytes.replace(b"Ship it", b"Shop it"))  # an edited middle record: its hash fails
    shown = seen_on_a_terminal(["verify"], root, env)
    assert b"\x1b[31mCORRUPT\x1b[0m intent:" in shown


def test_stored_text_shaped_like_a_colour_marker_is_not_obeyed(scene) -> None:
    """The marker that carries loopstate's own styles holds a token drawn per process; a statement
    stored by another front door with NULs and "sgr:" in it is shown escaped, never as a style."""
    root, data, env = scene
    from loopstate_protocol import intent as p

    from loopstate.service.engine import Service

    task = json.loads(_ok("intent", "tasks", "--json", cwd=root, data=data))["tasks"][0]["task_id"]
    forged = "A\x00sgr:31\x00red?"  # a store accepts it from an agent's front door (only typed arguments are refused)
    Service(data_dir=data).execute(str(root), p.IntentClaimAdd(task_id=task, actor="agent", claim=p.ClaimInput(
        statement=forged, role="agent", epistemic_status="inferred", facets=["outcome"], confidence=0.5)), "forged-1")
    shown = seen_on_a_terminal(["intent", "show"], root, env)
    assert b"A\\x00sgr:31\\x00red?" in shown and b"\x1b[31mred?" not in shown
