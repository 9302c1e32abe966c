"""A hook fails open: whatever is wrong, exit 0 and JSON the host accepts, with a message saying the fix.

Each fault is real: a ledger with an edited byte, a lock another process
holds, garbage on stdin, a data dir that cannot exist, a data dir that cannot
be written. In every case the one thing that still holds is the kill switch:
a STOP file the user can see denies tools.
"""

from __future__ import annotations

import contextlib
import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
from hookkit import context_of, denial_of, hook, host_input, receipt_of

from tests.conftest import needs_conformance, prerequisite

HOSTS = [pytest.param("claude", id="claude"), pytest.param("codex", id="codex", marks=needs_conformance)]
EVENTS = ["SessionStart", "UserPromptSubmit", "PreToolUse", "PostToolUse", "Stop", "PreCompact", "PostCompact",
          "SessionEnd"]
IS_ROOT = os.geteuid() == 0


@pytest.fixture
def project(tmp_path: Path) -> Path:
    path = tmp_path / "proj"
    (path / ".git").mkdir(parents=True)
    return path


def stop_file(project: Path) -> None:
    (project / ".loopstate").mkdir(exist_ok=True)
    (project / ".loopstate" / "STOP").write_text("stop")


def every_event(host: str, project: Path, data_dir: Path | None, *, env: dict[str, str] | None = None) -> dict:
    """Each event once; the answers by event (hookkit checks exit 0 and the host's shapes)."""
    return {event: hook(host, event, host_input(host, event, project, "s-fault"), data_dir=data_dir, cwd=project,
                        env=env) for event in EVENTS}


def remember(host: str, project: Path, data_dir: Path) -> None:
    out = hook(host, "UserPromptSubmit", host_input(host, "UserPromptSubmit", project, "s-fault",
                                                    prompt="/intent remember Keep the API"), data_dir=data_dir,
               cwd=project)
    assert "remembered" in receipt_of(host, out)


@pytest.mark.jsonl_only("corrupts, locks or write-protects the local store's files")
@pytest.mark.slow
@pytest.mark.parametrize("host", HOSTS)
def test_a_corrupt_ledger(host: str, project: Path, data_dir: Path) -> None:
    remember(host, project, data_dir)
    [ledger] = data_dir.rglob("intent.jsonl")
    ledger.write_bytes(ledger.read_bytes().replace(b"Keep the API", b"Keep the APX"))
    answers = every_event(host, project, data_dir)
    message = answers["SessionStart"]["systemMessage"]
    assert "CORRUPT_LEDGER" in message and "loopstate verify" in message and "loopstate recover" in message
    assert context_of(answers["UserPromptSubmit"]) is None  # nothing injected from a ledger that does not verify
    assert answers["PreToolUse"] == {"continue": True}
    stop_file(project)
    assert "kill switch" in denial_of(hook(host, "PreToolUse", host_input(host, "PreToolUse", project, "s-fault"),
                                           data_dir=data_dir, cwd=project))


@pytest.mark.jsonl_only("corrupts, locks or write-protects the local store's files")
@pytest.mark.slow
@pytest.mark.parametrize("host", HOSTS)
def test_a_lock_held_by_another_process(host: str, project: Path, data_dir: Path) -> None:
    from loopstate.core.project import Project

    remember(host, project, data_dir)
    with Project(str(project), data_dir=data_dir).lock("intent").exclusive():
        answers = every_event(host, project, data_dir)
        assert "LOCK_TIMEOUT" in answers["UserPromptSubmit"]["systemMessage"]
        assert f"pid {os.getpid()}" in answers["UserPromptSubmit"]["systemMessage"]  # names the holder
        stop_file(project)
        denied = hook(host, "PreToolUse", host_input(host, "PreToolUse", project, "s-fault"), data_dir=data_dir,
                      cwd=project)
        assert "kill switch" in denial_of(denied)


@pytest.mark.parametrize("host", HOSTS)
@pytest.mark.parametrize("stdin", [b"", b"not json", b"\xff\xfe\x00", b"[1, 2]", b'{"session_id": 5}',
                                   b'{"session_id": "s", "cwd": "relative/dir"}', b"{" * 100000])
def test_garbage_on_stdin(host: str, stdin: bytes, project: Path, data_dir: Path) -> None:
    out = hook(host, "UserPromptSubmit", stdin, data_dir=data_dir, cwd=project)
    assert set(out) == {"continue", "systemMessage"}
    assert "hook input" in out["systemMessage"] or "stdin" in out["systemMessage"]
    stop_file(project)  # the host starts hooks in the project: a visible STOP there still denies
    assert "kill switch" in denial_of(hook(host, "PreToolUse", stdin, data_dir=data_dir, cwd=project))


@pytest.mark.parametrize("host", HOSTS)
def test_an_unknown_event_or_host(host: str, project: Path, data_dir: Path) -> None:
    out = hook(host, "PreToolUse", host_input(host, "SessionStart", project, "s"), data_dir=data_dir, cwd=project)
    assert "registered for PreToolUse but the host sent 'SessionStart'" in out["systemMessage"]
    payload = {"session_id": "s", "cwd": str(project), "hook_event_name": "Notification"}
    unknown = hook("claude", "Notification", payload, data_dir=data_dir, cwd=project)
    assert set(unknown) == {"continue", "systemMessage"}
    assert "unknown hook event 'Notification'" in unknown["systemMessage"]
    other = hook("claude", "Stop", payload | {"hook_event_name": "Stop"}, data_dir=data_dir, cwd=project)
    assert other == {"continue": True}
    for argv in (["gemini", "Stop"], ["codex"], []):
        done = subprocess.run([sys.executable, "-m", "loopstate.cli.main", "hook", *argv], input=b"{}",
                              capture_output=True, cwd=project, env={**os.environ, "LOOPSTATE_DATA_DIR": str(data_dir)})
        assert done.returncode == 0 and json.loads(done.stdout)["continue"] is True, done


@pytest.mark.parametrize("host", HOSTS)
def test_a_registration_without_its_event_answers_the_event_the_host_names(host: str, project: Path,
                                                                           data_dir: Path) -> None:
    """`loopstate hook HOST` with no EVENT (a registration written by hand) answers the event the host's input
    names (both hosts send hook_event_name): a standing kill switch denies as it does for `hook HOST PreToolUse`."""
    payload = host_input(host, "PreToolUse", project, "s-no-event")
    assert hook(host, "PreToolUse", payload, data_dir=data_dir, cwd=project, registered=None) == {"continue": True}
    stop_file(project)
    denied = hook(host, "PreToolUse", payload, data_dir=data_dir, cwd=project, registered=None)
    assert "the kill switch .loopstate/STOP stands" in denial_of(denied) and "systemMessage" not in denied
    session = host_input(host, "SessionStart", project, "s-no-event")
    assert "Kill switch: .loopstate/STOP stands" in context_of(hook(host, "SessionStart", session, data_dir=data_dir,
                                                                     cwd=project, registered=None))
    bare = {k: v for k, v in payload.items() if k != "hook_event_name"}
    unnamed = hook(host, "PreToolUse", bare, data_dir=data_dir, cwd=project, registered=None)
    assert "names no event" in unnamed["systemMessage"] and "loopstate hook HOST EVENT" in unnamed["systemMessage"]


@pytest.mark.parametrize("host", HOSTS)
@pytest.mark.parametrize("registered", ["PreTooluse", "PostToolUse", "SessionStart"])
def test_a_pre_tool_use_under_a_wrong_registration_is_still_denied_by_a_kill_switch(
        host: str, registered: str, project: Path, data_dir: Path) -> None:
    """A registration naming another event fails open with a message saying so; the host's PreToolUse is
    still answered in its own shape and denied while a kill switch the user can see stands."""
    stop_file(project)
    out = hook(host, "PreToolUse", host_input(host, "PreToolUse", project, "s-wrong"), data_dir=data_dir, cwd=project,
               registered=registered)
    assert f"registered for {registered} but the host sent 'PreToolUse'" in out["systemMessage"]
    assert f"loopstate hook {host} {registered}:" in out["systemMessage"]
    assert "the kill switch .loopstate/STOP stands" in denial_of(out)


@pytest.mark.parametrize("host", HOSTS)
def test_a_data_dir_that_cannot_exist(host: str, project: Path, tmp_path: Path) -> None:
    blocker = tmp_path / "a-file"
    blocker.write_text("not a folder")
    answers = every_event(host, project, blocker / "data")
    assert all(a.get("continue") is True for a in answers.values())
    assert "systemMessage" in answers["SessionStart"]
    stop_file(project)
    assert "kill switch" in denial_of(hook(host, "PreToolUse", host_input(host, "PreToolUse", project, "s-fault"),
                                           data_dir=blocker / "data", cwd=project))


@contextlib.contextmanager
def read_only(folder: Path):
    """No process may write below ``folder`` (root included: the immutable attribute), restored afterwards."""
    if IS_ROOT:
        subprocess.run(["chattr", "-R", "+i", str(folder)], check=True)
        try:
            yield
        finally:
            subprocess.run(["chattr", "-R", "-i", str(folder)], check=True)
    else:
        modes = {p: p.stat().st_mode for p in [folder, *folder.rglob("*")]}
        for path in modes:
            path.chmod(0o500 if path.is_dir() else 0o400)
        try:
            yield
        finally:
            for path, mode in modes.items():
                path.chmod(mode)


def _chattr_works() -> bool:
    if not IS_ROOT:
        return True
    return shutil.which("chattr") is not None


@pytest.mark.jsonl_only("corrupts, locks or write-protects the local store's files")
@prerequisite(_chattr_works(), "chattr (e2fsprogs), to make a folder read-only for root")
@pytest.mark.parametrize("host", HOSTS)
def test_a_read_only_data_dir(host: str, project: Path, data_dir: Path) -> None:
    remember(host, project, data_dir)
    hook(host, "UserPromptSubmit", host_input(host, "UserPromptSubmit", project, "s-fault", prompt="go"),
         data_dir=data_dir, cwd=project)
    with read_only(data_dir):
        answers = every_event(host, project, data_dir)
        receipt = hook(host, "UserPromptSubmit", host_input(host, "UserPromptSubmit", project, "s-fault",
                                                            prompt="/intent remember Another rule"),
                       data_dir=data_dir, cwd=project)
        stop_file(project)
        denied = hook(host, "PreToolUse", host_input(host, "PreToolUse", project, "s-fault"), data_dir=data_dir,
                      cwd=project)
    assert receipt_of(host, receipt).startswith("loopstate: /intent remember was not recorded: ")
    assert all(a.get("continue") is True for a in answers.values())
    assert "kill switch" in denial_of(denied)


@pytest.mark.parametrize("host", HOSTS)
def test_an_enclosing_projects_switch_denies_tools_in_a_nested_project(host: str, project: Path, data_dir: Path) -> None:
    """An agent working in src/sub, a project of its own, is still under the repository's `run stop`."""
    sub = project / "src" / "sub"
    (sub / ".git").mkdir(parents=True)  # its own work tree: the hook's project is sub, not the repository
    call = host_input(host, "PreToolUse", sub, "s-nested")
    assert hook(host, "PreToolUse", call, data_dir=data_dir, cwd=sub) == {"continue": True}  # the control
    stop_file(project)
    reason = denial_of(hook(host, "PreToolUse", call, data_dir=data_dir, cwd=sub))
    assert reason is not None and str(project / ".loopstate" / "STOP") in reason


@pytest.mark.jsonl_only("corrupts, locks or write-protects the local store's files")
@pytest.mark.parametrize("host", HOSTS)
def test_a_fault_is_told_once_per_session_as_context(host: str, project: Path, data_dir: Path) -> None:
    """Print modes show no systemMessage: the first hook of a session that meets a fault puts it in the context."""
    import uuid

    remember(host, project, data_dir)
    [ledger] = data_dir.rglob("intent.jsonl")
    ledger.write_bytes(ledger.read_bytes().replace(b"Keep the API", b"Keep the APX"))

    def call(event: str, session: str) -> dict:
        return hook(host, event, host_input(host, event, project, session), data_dir=data_dir, cwd=project)

    session, other = f"s-{uuid.uuid4()}", f"s-{uuid.uuid4()}"  # fresh: the told-markers outlive a test run
    first = call("SessionStart", session)
    assert "CORRUPT_LEDGER" in context_of(first) and "Tell the user this once" in context_of(first)
    again = call("UserPromptSubmit", session)
    assert context_of(again) is None and "CORRUPT_LEDGER" in again["systemMessage"]  # told already: notice only
    assert "CORRUPT_LEDGER" in context_of(call("UserPromptSubmit", other))  # the control: another session is told
