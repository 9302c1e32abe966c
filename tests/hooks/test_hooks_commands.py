"""Every command a hook message tells the user or the agent to run works as written.

The messages come from real hooks on a real store (a ready run, a halted run
under a kill switch, an open gate, a corrupt ledger, a run the project lacks);
each backquoted `loopstate ...` in them is run as the message writes it, in
the project, and must do what the message says (the run can work again, the
stop is let through, the store verifies). The branches no store reaches
cheaply here (an exhausted budget, an expired lease, a finished run) are
checked one level down: their commands parse with the CLI's own parser.
"""

from __future__ import annotations

import json
import os
import re
import shlex
import subprocess
import sys
from pathlib import Path

import pytest
from hookkit import context_of, denial_of, hook, host_input, loopstate, receipt_of

from loopstate.domains import harness as h

COMMAND = re.compile(r"`(loopstate [^`]+)`")


def commands_in(text: str) -> list[str]:
    found = COMMAND.findall(text)
    assert found, f"no command in {text!r}"
    return found


def run_as_written(command: str, project: Path, data_dir: Path) -> subprocess.CompletedProcess[str]:
    argv = shlex.split(command)
    assert argv[0] == "loopstate"
    env = {**os.environ, "LOOPSTATE_DATA_DIR": str(data_dir)}
    done = subprocess.run([sys.executable, "-m", "loopstate.cli.main", *argv[1:]], cwd=project, env=env,
                          capture_output=True, text=True, timeout=120, stdin=subprocess.DEVNULL)
    assert done.returncode != 2 and "usage:" not in done.stderr, (command, done.stderr)  # never a usage error
    return done


@pytest.fixture
def project(tmp_path: Path) -> Path:
    path = tmp_path / "shop"
    (path / ".git").mkdir(parents=True)
    return path


def tool(project: Path, data_dir: Path, **env: str) -> dict:
    return hook("claude", "PreToolUse", host_input("claude", "PreToolUse", project, "s-cmd"), data_dir=data_dir,
                cwd=project, env=env)


@pytest.mark.jsonl_only("lifts the switch by deleting the STOP file; on a shared store the denial names run unstop (tests/team/test_team_hook_switch.py)")
@pytest.mark.slow
def test_a_ready_run_and_a_halted_one_are_lifted_by_the_commands_their_denials_name(project, data_dir) -> None:
    created = json.loads(loopstate("run", "create", "--objective", "Fix checkout", "--done-gate", "tests pass",
                                   "--asset", "app", "--json", cwd=project, data_dir=data_dir).stdout)
    run = {"LOOPSTATE_RUN": created["run_id"]}
    [acquire] = commands_in(denial_of(tool(project, data_dir, **run)))
    assert run_as_written(acquire, project, data_dir).returncode == 0
    assert tool(project, data_dir, **run) == {"continue": True}  # the control: the same call, now let through

    loopstate("run", "stop", "--reason", "lunch", cwd=project, data_dir=data_dir)  # STOP + every run halted
    denial = denial_of(tool(project, data_dir, **run))
    assert "Remove .loopstate/STOP to lift it, then" in denial
    (project / ".loopstate" / "STOP").unlink()  # what the message says first
    [resume] = commands_in(denial)
    assert run_as_written(resume, project, data_dir).returncode == 0
    assert tool(project, data_dir, **run) == {"continue": True}

    [listing] = commands_in(denial_of(tool(project, data_dir, LOOPSTATE_RUN="00000000-0000-4000-8000-000000000000")))
    assert created["run_id"][:8] in run_as_written(listing, project, data_dir).stdout


def test_an_open_gate_is_resolved_by_the_command_the_stop_reason_names(project, data_dir) -> None:
    (project / ".loopstate").mkdir()
    (project / ".loopstate" / "hooks.json").write_text(json.dumps({"enforce_gates": True, "goal": "ship"}))
    loopstate("goals", "gate", "ship", "Owner sign-off", "--new-goal", cwd=project, data_dir=data_dir)

    def stop() -> dict:
        return hook("claude", "Stop", host_input("claude", "Stop", project, "s-cmd"), data_dir=data_dir, cwd=project)

    blocked = stop()
    [resolve] = commands_in(blocked["reason"])
    assert resolve == "loopstate goals resolve ship G001 --decision approve"
    assert run_as_written(resolve, project, data_dir).returncode == 0
    assert stop() == {"continue": True}


@pytest.mark.jsonl_only("corrupts the stream file")
@pytest.mark.slow
def test_a_corrupt_ledger_is_repaired_by_the_commands_the_fault_names(project, data_dir) -> None:
    for text in ("Keep the API", "Keep the docs"):  # the second is damaged: recover keeps the first
        out = hook("claude", "UserPromptSubmit", host_input("claude", "UserPromptSubmit", project, "s-cmd",
                                                            prompt=f"/intent remember {text}"),
                   data_dir=data_dir, cwd=project)
        assert "remembered" in receipt_of("claude", out)
    [ledger] = data_dir.rglob("intent.jsonl")
    ledger.write_bytes(ledger.read_bytes().replace(b"Keep the docs", b"Keep the dogs"))
    fault = hook("claude", "SessionStart", host_input("claude", "SessionStart", project, "s-cmd-fault"),
                 data_dir=data_dir, cwd=project)["systemMessage"]
    verify, recover = commands_in(fault)
    assert (verify, recover) == ("loopstate verify", "loopstate recover")
    assert run_as_written(verify, project, data_dir).returncode != 0  # it finds the damage
    assert run_as_written(recover, project, data_dir).returncode == 0
    assert run_as_written(verify, project, data_dir).returncode == 0  # the control: now the store verifies
    start = hook("claude", "SessionStart", host_input("claude", "SessionStart", project, "s-cmd-after"),
                 data_dir=data_dir, cwd=project)
    assert "systemMessage" not in start and "Keep the API" in context_of(start)


RUN = "6f1c2d3e-0000-4000-8000-000000000001"
GATE = h.Gate(goal_id="ship", gate_id="G001", title="Owner sign-off")


@pytest.mark.parametrize("message", [
    h.tool_denial("Bash", h.Facts(run=h.RunFacts(run_id=RUN, status="active", exhausted=("max_mutations",)))),
    h.tool_denial("Bash", h.Facts(run=h.RunFacts(run_id=RUN, status="active", lease_expired=True))),
    h.tool_denial("Bash", h.Facts(run=h.RunFacts(run_id=RUN, status="cancelled"))),
    h.tool_denial("Bash", h.Facts(run=h.RunFacts(run_id=RUN, status="blocked"))),
    h.tool_denial("Bash", h.Facts(kill_switch=".loopstate/STOP", run=h.RunFacts(run_id=RUN, status="halted_kill_switch"))),
    h.stop_block(h.Facts(run=h.RunFacts(run_id=RUN, status="active", open_blocking_issues=2), gates=(GATE,)),
                 enforce_gates=True, stop_hook_active=False),
], ids=["exhausted", "lease-expired", "finished", "blocked", "halted", "issues-and-gate"])
def test_every_other_command_parses_as_the_cli_takes_it(message: str) -> None:
    from loopstate.cli.main import parse_argv

    for command in commands_in(message):
        parse_argv(shlex.split(command)[1:])  # a usage error would raise SystemExit
