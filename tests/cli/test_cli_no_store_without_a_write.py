"""A refused command, and a read of a project with no store, leave the data dir untouched.

Through the real CLI in subprocesses: the project folder, ``project.json`` and
lock files are made by the first command that appends, never by a read or a
refusal (``core/founding.py``). A store made by a refusal would also turn the
folder it was refused in into a loopstate project for every later command run
below it (``core/discovery.py``).
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from tests.cli.clirun import cli
from tests.mcp.mcpkit import connected, needs_sdk

UNKNOWN = "00000000-0000-4000-8000-000000000001"


def listing(folder: Path) -> list[str]:
    """Every path below ``folder``, relative, sorted (empty when it does not exist)."""
    return sorted(os.path.relpath(os.path.join(top, name), folder)
                  for top, dirs, files in os.walk(folder) for name in (*dirs, *files))


@pytest.mark.parametrize("argv, rc, said", [
    (["intent", "add", UNKNOWN, "x"], 1, "NOT_FOUND"),
    (["intent", "replace", UNKNOWN, "--supersedes", UNKNOWN, "x"], None, None),
    (["run", "heartbeat", "--lease", UNKNOWN, "--generation", "1", UNKNOWN], 1, "NOT_FOUND"),
    (["run", "status", UNKNOWN], 1, "NOT_FOUND"),
    (["goals", "board", "nope"], 1, "NOT_FOUND"),
    (["intent", "show"], 0, None),
    (["log"], 0, None),
    (["verify"], 0, None),
    (["goals", "list"], 0, None),
    (["run", "list"], 0, None),
])
def test_a_refusal_or_a_read_of_a_project_without_a_store_makes_nothing(root: Path, data_dir: Path, argv: list[str],
                                                                        rc: int | None, said: str | None) -> None:
    data_dir.mkdir()
    done = cli(*argv, cwd=root, data_dir=data_dir)
    if rc is not None:
        assert done.returncode == rc, done.stderr
    else:
        assert done.returncode != 0, done.stdout
    if said is not None:
        assert said in done.stderr
    assert "Traceback" not in done.stderr
    assert listing(data_dir) == []
    assert listing(root) == []


def test_a_refusal_in_a_subdirectory_does_not_make_it_the_project_later_commands_resolve(tmp_path: Path,
                                                                                      data_dir: Path) -> None:
    project = tmp_path / "proj"
    sub = project / "src" / "sub"
    sub.mkdir(parents=True)  # no .git: without a store, a command's root is the folder it runs in
    refused = cli("intent", "add", UNKNOWN, "x", cwd=sub, data_dir=data_dir)
    assert refused.returncode == 1 and "NOT_FOUND" in refused.stderr
    assert json.loads(cli("root", "--json", cwd=sub, data_dir=data_dir).stdout)["how"] == "cwd"
    started = cli("intent", "start", "--label", "t", cwd=project, data_dir=data_dir)
    assert started.returncode == 0, started.stderr
    later = json.loads(cli("root", "--json", cwd=sub, data_dir=data_dir).stdout)
    assert (later["root"], later["how"]) == (str(project.resolve()), "project")


def test_the_first_append_makes_the_store_and_a_refusal_after_it_adds_nothing(root: Path, data_dir: Path) -> None:
    started = cli("intent", "start", "--label", "t", "--json", cwd=root, data_dir=data_dir)
    assert started.returncode == 0, started.stderr
    made = listing(data_dir)
    assert any(p.endswith("project.json") for p in made) and any(p.endswith(os.path.join("locks", "intent.lock"))
                                                                    for p in made)
    assert cli("run", "status", UNKNOWN, cwd=root, data_dir=data_dir).returncode == 1
    assert cli("goals", "board", "nope", cwd=root, data_dir=data_dir).returncode == 1
    assert cli("intent", "add", UNKNOWN, "x", cwd=root, data_dir=data_dir).returncode == 1
    assert listing(data_dir) == made  # no lock file of a run or goal stream that was never written


def test_first_writers_racing_in_separate_processes_make_one_valid_store(root: Path, data_dir: Path) -> None:
    writers = 6
    env = {k: v for k, v in os.environ.items() if k not in ("CODEX_HOME", "PLUGIN_DATA")}
    env["LOOPSTATE_DATA_DIR"] = str(data_dir)
    # Every writer's interpreter is started before any of them may go on: they are
    # released together by closing the pipe they all wait on.
    gate_r, gate_w = os.pipe()
    script = ("import os, sys; os.read(int(sys.argv[1]), 1); "
              "from loopstate.cli.main import main; sys.argv = ['loopstate', *sys.argv[2:]]; sys.exit(main())")
    procs = [subprocess.Popen([sys.executable, "-c", script, str(gate_r), "intent", "start", "--label", f"w{n}",
                               "--json"], cwd=root, env=env, pass_fds=(gate_r,), stdout=subprocess.PIPE,
                              stderr=subprocess.PIPE, text=True) for n in range(writers)]
    os.close(gate_r)
    os.close(gate_w)
    results = [p.communicate(timeout=120) for p in procs]
    assert [p.returncode for p in procs] == [0] * writers, [err for _, err in results]
    projects = data_dir / "projects"
    (folder,) = projects.iterdir()
    record = json.loads((folder / "project.json").read_text())
    assert record == {"schema_version": 1, "project_id": folder.name, "root": str(root.resolve())}
    assert sorted(os.listdir(folder / "locks")) == ["intent.lock"]  # no temporary lock file left
    verified = cli("verify", cwd=root, data_dir=data_dir)
    assert verified.returncode == 0, verified.stdout + verified.stderr
    log = cli("log", "--json", cwd=root, data_dir=data_dir)
    assert log.returncode == 0, log.stderr
    (intent,) = json.loads(log.stdout)["streams"]
    started = {json.loads(out)["events"][0]["task_id"] for out, _ in results}
    assert len(started) == writers and {e["task_id"] for e in intent["events"]} == started
    assert [e["sequence"] for e in intent["events"]] == list(range(1, writers + 1))


def test_the_sidecar_over_stdio_reads_and_refuses_without_making_a_store(root: Path, data_dir: Path,
                                                                         tmp_path: Path) -> None:
    from loopstate_protocol.client import LoopstateClient, RpcError

    from tests.rpc.rpckit import SERVE

    data_dir.mkdir()
    with open(tmp_path / "serve.log", "wb") as log:
        client = LoopstateClient(SERVE, env=dict(os.environ, LOOPSTATE_DATA_DIR=str(data_dir)), stderr=log).start()
    try:
        client.initialize()
        snapshot = client.query(str(root), {"kind": "intent.snapshot"})
        assert (snapshot["sequence"], snapshot["active_count"]) == (0, 0), snapshot
        with pytest.raises(RpcError) as refused:
            client.execute(str(root), {"kind": "intent.claim_add", "task_id": UNKNOWN, "claim": {
                "statement": "x", "role": "user", "epistemic_status": "explicit", "facets": ["outcome"]}})
        assert refused.value.error["data"]["code"] == "NOT_FOUND"
        client.subscribe(str(root), "intent/snapshot")
    finally:
        client.close()
    assert listing(data_dir) == []


@pytest.mark.slow
@needs_sdk
async def test_an_mcp_read_and_refusal_over_stdio_make_no_store(root: Path, data_dir: Path) -> None:
    data_dir.mkdir()
    async with connected(data_dir, "--root", str(root)) as client:
        shown = await client.ok("intent_show", {})
        assert (shown["sequence"], shown["active_count"]) == (0, 0), shown
        await client.refused("run_status", {"run_id": UNKNOWN}, "NOT_FOUND")
        await client.refused("intent_claim", {"action": "add", "statement": "x", "status": "inferred",
                                              "confidence": 0.5, "facets": ["outcome"], "task_id": UNKNOWN}, "NOT_FOUND")
    assert listing(data_dir) == []
