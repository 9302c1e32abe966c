"""Mistakes at the command line, as a person makes them: real CLI processes."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest
from clirun import cli


@pytest.mark.parametrize(("args", "usage", "suggestion"), [
    (["intent", "show", "--jsn"], "usage: loopstate intent show", "--jsn (did you mean --json?)"),
    (["goals", "board", "g", "--pubic"], "usage: loopstate goals board", "--pubic (did you mean --public?)"),
    (["run", "issue", "open", "R", "--lease", "L", "--generation", "1", "--title", "t", "--severity", "low",
      "--blockng=yes"], "usage: loopstate run issue open", "--blockng=yes (did you mean --blocking?)"),
    (["log", "--strem", "intent"], "usage: loopstate log", "(did you mean --stream?)"),
])
def test_an_unknown_flag_names_the_verbs_usage_and_the_nearest_flag(root: Path, data_dir: Path, args: list[str],
                                                                    usage: str, suggestion: str) -> None:
    done = cli(*args, cwd=root, data_dir=data_dir)
    assert done.returncode == 2
    assert done.stderr.startswith(usage), done.stderr
    assert "usage: loopstate [-h]" not in done.stderr
    assert suggestion in done.stderr


def test_an_extra_argument_is_refused_by_the_verb_that_got_it(root: Path, data_dir: Path) -> None:
    done = cli("verify", "extra", cwd=root, data_dir=data_dir)
    assert done.returncode == 2
    assert done.stderr.startswith("usage: loopstate verify")
    assert "unrecognized arguments: extra;" in done.stderr


def test_an_unknown_verb_lists_the_verbs(root: Path, data_dir: Path) -> None:
    done = cli("verfy", cwd=root, data_dir=data_dir)
    assert done.returncode == 2 and "invalid choice: 'verfy'" in done.stderr and "'verify'" in done.stderr


def closed_pipe_run(args: list[str], cwd: Path, data_dir: Path) -> tuple[int, str]:
    """Run with stdout a pipe whose reader is already gone: the first write meets EPIPE."""
    read_end, write_end = os.pipe()
    os.close(read_end)
    env = {**os.environ, "LOOPSTATE_DATA_DIR": str(data_dir)}
    try:
        done = subprocess.run([sys.executable, "-m", "loopstate.cli.main", *args], cwd=cwd, env=env,
                              stdout=write_end, stderr=subprocess.PIPE, text=True, timeout=120)
    finally:
        os.close(write_end)
    return done.returncode, done.stderr


@pytest.mark.parametrize(("args", "code"), [
    (["log"], 141), (["intent", "show"], 141), (["goals", "list"], 141),
    # argparse's own help and version text: it drops a failed write itself and exits 0.
    (["--help"], 0), (["--version"], 0),
])
def test_a_closed_pipe_ends_the_command_quietly(root: Path, data_dir: Path, args: list[str], code: int) -> None:
    started = cli("intent", "start", "--claim", "outcome:Something to print", cwd=root, data_dir=data_dir)
    assert started.returncode == 0, started.stderr
    assert closed_pipe_run(args, root, data_dir) == (code, "")


@pytest.mark.slow
def test_a_reader_that_stops_early_sees_the_first_lines_and_no_error(root: Path, data_dir: Path) -> None:
    from loopstate_protocol import intent as p

    from loopstate.service import Service

    service = Service(data_dir=data_dir)
    task = service.execute(str(root), p.IntentTaskStart(label="long"), "r0").events[0]["task_id"]
    for n in range(1, 1500):  # well past a pipe's 64 KiB: the writer is still writing when head exits
        claim = p.ClaimInput(statement=f"claim {n}", role="user", epistemic_status="explicit", facets=["outcome"])
        service.execute(str(root), p.IntentClaimAdd(task_id=task, actor="user", claim=claim), f"r{n}")
    done = subprocess.run(f"{sys.executable} -m loopstate.cli.main log | head -2; echo \"rc=${{PIPESTATUS[0]}}\"",
                          shell=True, executable="/bin/bash", cwd=root, capture_output=True, text=True, timeout=120,
                          env={**os.environ, "LOOPSTATE_DATA_DIR": str(data_dir)})
    lines = done.stdout.splitlines()
    assert lines[0].startswith("== intent (head 1500") and lines[1].split()[0] == "1"
    assert lines[2] == "rc=141"
    assert done.stderr == ""


@pytest.mark.parametrize(("args", "suggestion"), [
    (["intnet", "show"], "did you mean 'intent'?"),
    (["run", "lst"], "did you mean 'list'?"),
    (["goals", "bord", "g"], "did you mean 'board'?"),
    (["run", "issue", "opne"], "did you mean 'open'?"),
])
def test_a_mistyped_verb_gets_the_nearest_verb(root: Path, data_dir: Path, args: list[str], suggestion: str) -> None:
    done = cli(*args, cwd=root, data_dir=data_dir)
    assert done.returncode == 2 and suggestion in done.stderr, done.stderr


def test_a_word_near_no_verb_gets_no_guess(root: Path, data_dir: Path) -> None:
    done = cli("zzzz", cwd=root, data_dir=data_dir)
    assert done.returncode == 2 and "invalid choice: 'zzzz'" in done.stderr and "did you mean" not in done.stderr


@pytest.mark.parametrize(("args", "expected"), [(["run", "--root", "{root}", "list", "--json"], '"objective":"x"'),
                                              (["goals", "--root", "{root}", "list", "--json"], '"g"'),
                                              (["--root", "{root}", "run", "list", "--json"], '"objective":"x"'),
                                              (["run", "list", "--root", "{root}", "--json"], '"objective":"x"')])
def test_root_is_taken_before_the_group_between_the_group_and_its_verb_and_after_the_verb(
        tmp_path: Path, data_dir: Path, args: list[str], expected: str) -> None:
    project = tmp_path / "elsewhere"
    project.mkdir()
    cwd = tmp_path / "cwd"
    cwd.mkdir()
    assert cli("goals", "add", "g", "t", "--root", str(project), cwd=cwd, data_dir=data_dir).returncode == 0
    cli("run", "create", "--objective", "x", "--done-gate", "y", "--asset", "app", "--root", str(project), cwd=cwd,
        data_dir=data_dir)
    done = cli(*[a.format(root=project) for a in args], cwd=cwd, data_dir=data_dir)
    assert done.returncode == 0, done.stderr
    assert expected in done.stdout, done.stdout
