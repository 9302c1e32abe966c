"""What a newcomer tripped over in their first hour, through the real CLI in subprocesses.

One name per idea across verbs (old spellings still parse, out of --help),
every --json answer an object, near-miss verbs and mistyped roles get the
nearest word, the project-root line once per shell session, a task column
where claims of several tasks are listed, and `setup plan` showing the MCP
entry without the MCP SDK. After each refused input the store verifies.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from clirun import cli, on_a_terminal


def _ok(*args: str, cwd: Path, data: Path, env: dict[str, str] | None = None) -> subprocess.CompletedProcess[str]:
    done = cli(*args, cwd=cwd, data_dir=data, env=env)
    assert done.returncode == 0, done
    return done


def _clean(cwd: Path, data: Path) -> None:
    if data.exists():
        assert json.loads(_ok("verify", "--json", cwd=cwd, data=data).stdout)["ok"] is True


@pytest.fixture
def project(tmp_path: Path) -> tuple[Path, Path]:
    root = tmp_path / "proj"
    root.mkdir()
    return root, tmp_path / "data"


def test_old_spellings_still_parse_but_help_shows_one_name(project) -> None:
    root, data = project
    _ok("goals", "add", "g", "one", cwd=root, data=data)
    _ok("goals", "add", "g", "two", cwd=root, data=data)
    _ok("goals", "complete", "g", "T001", "--reason", "merged", cwd=root, data=data)
    _ok("goals", "complete", "g", "T002", "--rationale", "merged", cwd=root, data=data)  # the old spelling
    helped = _ok("goals", "complete", "--help", cwd=root, data=data).stdout
    assert "--reason REASON" in helped and "--rationale" not in helped
    missing = cli("goals", "complete", "g", "T001", cwd=root, data_dir=data)
    assert missing.returncode == 2 and "required: --reason" in missing.stderr and "rationale" not in missing.stderr
    _ok("intent", "start", "--claim", "outcome:Ship", cwd=root, data=data)
    _ok("intent", "export", "--output", str(root / "a.json"), cwd=root, data=data)
    _ok("intent", "export", "--out", str(root / "b.json"), cwd=root, data=data)
    exported = [json.loads((root / name).read_text()) for name in ("a.json", "b.json")]
    assert [g["claims"][0]["statement"] for g in exported] == ["Ship", "Ship"]
    assert "--out " not in _ok("intent", "export", "--help", cwd=root, data=data).stdout
    run_id = _ok("run", "create", "--objective", "o", "--done-gate", "t", "--asset", "app", cwd=root,
                 data=data).stdout.strip().split()[-1]
    acquired = _ok("run", "acquire", run_id, "--host", "claude", "--json", cwd=root, data=data).stdout
    assert '"harness":"claude_code"' in acquired and '"harness":"claude"' not in acquired  # as the records name it
    assert "--harness" not in _ok("run", "acquire", "--help", cwd=root, data=data).stdout
    _clean(root, data)


def test_every_json_answer_is_an_object(project) -> None:
    root, data = project
    _ok("intent", "start", "--claim", "outcome:Ship", cwd=root, data=data)
    _ok("goals", "add", "g", "one", cwd=root, data=data)
    for argv in (["intent", "tasks"], ["intent", "candidates"], ["intent", "show"], ["intent", "audit"],
                 ["goals", "list"], ["goals", "board", "g"], ["run", "list"], ["log", "--limit", "1"], ["verify"],
                 ["root"], ["project", "adopt", "--list"]):
        answer = json.loads(_ok(*argv, "--json", cwd=root, data=data).stdout)
        assert isinstance(answer, dict), argv
    tasks = json.loads(_ok("intent", "tasks", "--json", cwd=root, data=data).stdout)
    assert tasks["current_task_id"] == tasks["tasks"][0]["task_id"]


def test_near_miss_verbs_and_mistyped_roles_get_the_nearest_word(project) -> None:
    root, data = project
    for argv, near in ((["intent", "supersede"], "replace"), (["run", "kill"], "stop"), (["goals", "done"], "complete"),
                       (["intnet"], "intent"), (["project", "move"], "adopt")):
        done = cli(*argv, cwd=root, data_dir=data)
        assert done.returncode == 2 and f"did you mean {near!r}?" in done.stderr, (argv, done.stderr)
    _ok("goals", "add", "g", "first", cwd=root, data=data)
    before = sorted(p.read_bytes() for p in data.rglob("*.jsonl"))
    typo = cli("goals", "add", "g", "second", "--role", "agnet", cwd=root, data_dir=data)
    assert typo.returncode == 1 and "did you mean 'agent'?" in typo.stderr and "--new-role" in typo.stderr
    assert sorted(p.read_bytes() for p in data.rglob("*.jsonl")) == before
    _clean(root, data)
    _ok("goals", "add", "g", "second", "--role", "designer", "--new-role", cwd=root, data=data)
    _ok("goals", "add", "g", "third", "--role", "designer", cwd=root, data=data)  # declared once, known after
    again = cli("goals", "update", "g", "T001", "--role", "desginer", cwd=root, data_dir=data)
    assert again.returncode == 1 and "did you mean 'designer'?" in again.stderr
    _clean(root, data)


def test_the_project_root_line_once_per_shell_session_and_every_time_with_verbose(tmp_path: Path) -> None:
    root, data = tmp_path / "repo", tmp_path / "data"
    (root / "src").mkdir(parents=True)
    (root / ".git").mkdir()
    line = f"loopstate: project root {root} (the top of the git work tree)\n"
    # One shell session: the same parent process runs each command.
    script = """
import subprocess, sys
for argv in (["goals", "list"], ["goals", "list"], ["-v", "goals", "list"], ["goals", "list", "--verbose"]):
    done = subprocess.run([sys.executable, "-m", "loopstate.cli.main", *argv], capture_output=True, text=True)
    sys.stdout.write(repr(done.stderr) + "\\n")
"""
    env = {**os.environ, "LOOPSTATE_DATA_DIR": str(data)}
    said = subprocess.run([sys.executable, "-c", script], cwd=root / "src", env=env, capture_output=True, text=True,
                          timeout=120).stdout.splitlines()
    assert said == [repr(line), repr(""), repr(line), repr(line)]
    # Another session is told again.
    assert cli("goals", "list", cwd=root / "src", data_dir=data).stderr in (line, "")
    other = subprocess.run([sys.executable, "-c", script], cwd=root / "src", env=env, capture_output=True, text=True,
                           timeout=120).stdout.splitlines()
    assert other[0] == repr(line)


def test_claims_of_several_tasks_show_whose_they_are(project) -> None:
    root, data = project
    _ok("intent", "start", "--claim", "outcome:First task's outcome", cwd=root, data=data)
    one = _ok("intent", "show", cwd=root, data=data).stdout
    assert "TASK" not in one  # one task: no column for it
    _ok("intent", "start", "--claim", "outcome:Second task's outcome", cwd=root, data=data)
    tasks = json.loads(_ok("intent", "tasks", "--json", cwd=root, data=data).stdout)["tasks"]
    shown = _ok("intent", "show", cwd=root, data=data).stdout.splitlines()
    header = next(line for line in shown if line.startswith("FACET"))
    assert header.split() == ["FACET", "STATUS", "TASK", "CLAIM", "STATEMENT"]
    rows = {line.split()[2] for line in shown if "task's outcome" in line}
    assert rows == {t["task_id"][:8] for t in tasks}
    audit = _ok("intent", "audit", cwd=root, data=data).stdout.splitlines()
    assert audit[0].split()[0] == "TASK"


def test_setup_plan_shows_the_mcp_entry_without_the_mcp_sdk(tmp_path: Path) -> None:
    home, root = tmp_path / "home", tmp_path / "proj"
    home.mkdir()
    root.mkdir()
    hide_sdk = "import sys; sys.modules['mcp'] = None; from loopstate.cli.main import main; sys.exit(main(sys.argv[1:]))"
    env = {**os.environ, "HOME": str(home), "LOOPSTATE_DATA_DIR": str(tmp_path / "data")}
    done = subprocess.run([sys.executable, "-c", hide_sdk, "setup", "plan", "--host", "claude"], cwd=root, env=env,
                          capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done
    assert "pip install 'loopstate[mcp]'" in done.stdout and '"mcpServers"' in done.stdout
    as_json = json.loads(subprocess.run([sys.executable, "-c", hide_sdk, "setup", "plan", "--host", "claude", "--json"],
                                        cwd=root, env=env, capture_output=True, text=True, timeout=120).stdout)
    assert as_json["mcp_available"] is False and as_json["with_mcp_extra"] is not None
    assert not list(home.rglob("*.json"))  # a plan writes nothing


def test_doctor_says_which_host_it_checks_on_a_terminal_only(tmp_path: Path) -> None:
    root = tmp_path / "proj"
    root.mkdir()
    env = {**os.environ, "LOOPSTATE_DATA_DIR": str(tmp_path / "data"), "HOME": str(tmp_path)}
    piped = subprocess.run([sys.executable, "-m", "loopstate.cli.main", "doctor"], cwd=root, env=env,
                           capture_output=True, text=True, timeout=120)
    assert "checking" not in piped.stderr
    seen = on_a_terminal(["doctor"], root, env, stdout=False)
    assert b"loopstate doctor: checking claude (1/2)" in seen and b"checking codex (2/2)" in seen
    assert b"\x1b" not in seen  # plain text and carriage returns only


def _on_a_terminal(argv: list[str], cwd: Path, env: dict[str, str]) -> bytes:
    """What a command writes to a real terminal of 10 rows (so that long output is paged)."""
    return on_a_terminal(argv, cwd, env, rows=10, columns=100)


def test_colour_on_a_terminal_only_and_never_with_no_color(project) -> None:
    root, data = project
    _ok("run", "create", "--objective", "o", "--done-gate", "t", "--asset", "app", cwd=root, data=data)
    base = {k: v for k, v in os.environ.items() if k not in ("NO_COLOR", "PAGER")}
    env = {**base, "LOOPSTATE_DATA_DIR": str(data), "TERM": "xterm", "LOOPSTATE_NO_PAGER": "1"}
    shown = _on_a_terminal(["run", "list"], root, env)
    assert b"\x1b[33mready" in shown  # the status, coloured
    refused = _on_a_terminal(["intent", "show", "--task", "zzzz"], root, env)
    assert b"loopstate: \x1b[31mNOT_FOUND\x1b[0m:" in refused
    assert b"\x1b[" not in _on_a_terminal(["run", "list"], root, {**env, "NO_COLOR": "1"})
    assert "\x1b" not in _ok("run", "list", cwd=root, data=data).stdout  # a pipe: no colour


def test_long_output_goes_through_the_pager_on_a_terminal_only(project) -> None:
    root, data = project
    for n in range(25):
        _ok("goals", "add", "g", f"todo {n}", cwd=root, data=data)
    env = {k: v for k, v in os.environ.items() if k not in ("LOOPSTATE_NO_PAGER", "LESS")}
    env.update(LOOPSTATE_DATA_DIR=str(data), PAGER="sed s/^/paged:/", TERM="xterm")
    paged = _on_a_terminal(["log"], root, env)
    assert paged.count(b"paged:") >= 25
    short = _on_a_terminal(["goals", "list"], root, env)  # fits the terminal: printed as it is
    assert b"paged:" not in short and b"g" in short
    assert b"paged:" not in _on_a_terminal(["log", "--json"], root, env)  # never under --json
    piped = cli("log", cwd=root, data_dir=data, env={"PAGER": "sed s/^/paged:/"})
    assert piped.returncode == 0 and "paged:" not in piped.stdout  # never into a pipe


def test_the_claims_json_example_in_help_runs_as_shown(project) -> None:
    root, data = project
    helped = _ok("intent", "start", "--help", cwd=root, data=data).stdout
    example = helped.split("example:\n", 1)[1]
    script = "\n".join(line[2:] for line in example.splitlines() if line.startswith("  "))
    for field in ("statement", "role", "epistemic_status", "facets", "scope", "valid_from"):
        assert field in helped.split("example:")[0], field  # every field is named before the example
    env = {**os.environ, "LOOPSTATE_DATA_DIR": str(data),
           "PATH": f"{Path(sys.executable).parent}{os.pathsep}{os.environ.get('PATH', '')}"}
    done = subprocess.run(["bash", "-e", "-c", script], cwd=root, env=env, capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, (script, done.stderr)
    shown = _ok("intent", "show", cwd=root, data=data).stdout
    assert "Keep the public API" in shown and "Checkout answers in under 2 s" in shown
    wrong = cli("intent", "start", "--claims-json", "-", cwd=root, data_dir=data, stdin='[{"statement": "x"}]')
    assert wrong.returncode == 1 and "INVALID_PARAMS" in wrong.stderr
    _clean(root, data)
