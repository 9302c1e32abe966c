"""A whole host session driven as the host drives it: every event a fresh `loopstate hook` process.

Between the hooks, other processes act on the same store (the user's
terminal sets the kill switch, a controller opens a gate). Afterwards the
ledger holds the user's `/intent remember` claim and nothing of any other
prompt: no raw prompt and no secret anywhere in the data dir.
"""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest
from hookkit import context_of, denial_of, grep_at_rest, hook, host_input, loopstate, receipt_of

from tests.conftest import needs_conformance

pytestmark = pytest.mark.both_stores  # docs/storage.md, *Which tests run on PostgreSQL*

SECRET = "ghp_" + "A1b2C3d4E5f6G7h8I9j0K1l2M3n4O5p6Q7r8"
ORDINARY = f"Refactor the checkout module, my token is {SECRET} if you need it"


@pytest.mark.slow
@pytest.mark.parametrize("host", ["claude", pytest.param("codex", marks=needs_conformance)])
def test_a_whole_session(host: str, tmp_path: Path, data_dir: Path) -> None:
    project = tmp_path / "shop"
    (project / ".git").mkdir(parents=True)
    (project / ".loopstate").mkdir()
    (project / ".loopstate" / "hooks.json").write_text(json.dumps({"enforce_gates": True}))
    sub = project / "src" / "pay"  # the host's cwd is below the root: found as the CLI finds it
    sub.mkdir(parents=True)
    env = {"LOOPSTATE_GOAL": "shop"}

    def call(event: str, **fields):
        payload = host_input(host, event, sub, "host-session-42", **fields)
        return hook(host, event, payload, data_dir=data_dir, cwd=sub, env=env)

    assert call("SessionStart") == {"continue": True}
    receipt = call("UserPromptSubmit", prompt="/intent remember hard_constraint:Never change the public API",
                   turn_id="t1") if host == "codex" else call(
        "UserPromptSubmit", prompt="/intent remember hard_constraint:Never change the public API")
    assert "remembered [hard_constraint]" in receipt_of(host, receipt)
    first = call("UserPromptSubmit", prompt=ORDINARY)
    assert "- [hard_constraint] Never change the public API" in context_of(first)
    assert call("UserPromptSubmit", prompt="and add tests") == {"continue": True}  # unchanged since: nothing
    assert call("PreToolUse") == {"continue": True}

    loopstate("run", "stop", cwd=project, data_dir=data_dir)  # the user, in another terminal
    denied = call("PreToolUse")
    assert "kill switch .loopstate/STOP" in denial_of(denied)
    if host == "claude":  # a read-only tool still runs
        assert call("PreToolUse", tool_name="Read", tool_input={"file_path": "x"}) == {"continue": True}
    changed = call("UserPromptSubmit", prompt="why did it stop?")  # the switch changed the context
    assert context_of(changed).startswith("Kill switch: .loopstate/STOP ")  # on PostgreSQL: "and a stop recorded..."
    (project / ".loopstate" / "STOP").unlink()
    if os.environ.get("LOOPSTATE_STORE"):  # the shared store's stop stands until `run unstop` lifts it
        loopstate("run", "unstop", cwd=project, data_dir=data_dir)

    assert call("PreCompact") == {"continue": True}
    if host == "codex":
        assert call("PostCompact") == {"continue": True}
    reinjected = call("UserPromptSubmit", prompt="continue")
    assert "- [hard_constraint] Never change the public API" in context_of(reinjected)

    loopstate("goals", "gate", "shop", "Owner signs off the API diff", "--kind", "owner", "--new-goal",
              cwd=project, data_dir=data_dir)
    blocked = call("Stop")
    assert blocked["decision"] == "block" and "gate G001 of goal shop" in blocked["reason"]
    assert call("Stop", stop_hook_active=True) == {"continue": True}
    assert call("SessionEnd") == {"continue": True}

    kept_in = ["postgresql:loopstate.events"] if os.environ.get("LOOPSTATE_STORE") else ["intent.jsonl"]
    assert grep_at_rest(data_dir, project, b"Never change the public API") == kept_in
    assert grep_at_rest(data_dir, project, SECRET.encode()) == []
    assert grep_at_rest(data_dir, project, b"Refactor the checkout") == []
    assert grep_at_rest(data_dir, project, b"host-session-42") == []  # the session id is stored only hashed
    shown = json.loads(loopstate("intent", "show", "--json", cwd=project, data_dir=data_dir).stdout)
    claims = [c for statuses in shown["by_facet"].values() for cs in statuses.values() for c in cs]
    assert [(c["statement"], c["direct_user"], c["source_ref"]["kind"]) for c in claims] == [
        ("Never change the public API", True, "user_event")]
    if host == "codex":  # the host's prompt id is the user event's identity
        assert claims[0]["source_ref"]["event_id"] == "t1"


@pytest.mark.slow
def test_a_session_bound_to_a_run_may_work_only_while_the_run_may(tmp_path: Path, data_dir: Path) -> None:
    project = tmp_path / "shop"
    (project / ".git").mkdir(parents=True)
    created = json.loads(loopstate("run", "create", "--objective", "Fix checkout", "--done-gate", "tests pass",
                                   "--asset", "app", "--json", cwd=project, data_dir=data_dir).stdout)
    run_id = created["run_id"]

    def tool():
        return hook("claude", "PreToolUse", host_input("claude", "PreToolUse", project, "s-run"), data_dir=data_dir,
                    cwd=project, env={"LOOPSTATE_RUN": run_id})

    assert f"run {run_id} is ready but has no lease yet" in denial_of(tool())
    loopstate("run", "acquire", run_id, cwd=project, data_dir=data_dir)
    assert tool() == {"continue": True}
    start = hook("claude", "SessionStart", host_input("claude", "SessionStart", project, "s-run"), data_dir=data_dir,
                 cwd=project, env={"LOOPSTATE_RUN": run_id})
    assert context_of(start).startswith(f"Run {run_id}: active, lease live; used 0/100 mutations")
    loopstate("run", "stop", "--cancel", run_id, "--reason", "done for today", cwd=project, data_dir=data_dir)
    assert f"run {run_id} is cancelled: a finished run does no more work" in denial_of(tool())
    late = hook("claude", "SessionStart", host_input("claude", "SessionStart", project, "s-late"), data_dir=data_dir,
                cwd=project)  # bound to no run at first; a tool call whose environment names one rebinds it
    assert late == {"continue": True}
    assert "is cancelled: a finished run" in denial_of(hook(
        "claude", "PreToolUse", host_input("claude", "PreToolUse", project, "s-late"), data_dir=data_dir, cwd=project,
        env={"LOOPSTATE_RUN": run_id}))
    missing = hook("claude", "PreToolUse", host_input("claude", "PreToolUse", project, "s-other"), data_dir=data_dir,
                   cwd=project, env={"LOOPSTATE_RUN": "00000000-0000-4000-8000-000000000000"})
    assert "which this project does not have" in denial_of(missing)


def test_an_unchanged_store_is_not_injected_again_and_another_processs_change_is(tmp_path: Path,
                                                                                 data_dir: Path) -> None:
    project = tmp_path / "shop"
    (project / ".git").mkdir(parents=True)
    env = {"LOOPSTATE_GOAL": "shop"}

    def prompt(text: str):
        return hook("claude", "UserPromptSubmit", host_input("claude", "UserPromptSubmit", project, "s-watch",
                                                             prompt=text), data_dir=data_dir, cwd=project, env=env)

    hook("claude", "UserPromptSubmit", host_input("claude", "UserPromptSubmit", project, "s-watch",
                                                  prompt="/intent remember Keep it small"), data_dir=data_dir,
         cwd=project, env=env)
    assert "- [outcome] Keep it small" in context_of(prompt("one"))
    assert prompt("two") == {"continue": True}
    loopstate("goals", "gate", "shop", "Sign-off", "--new-goal", cwd=project, data_dir=data_dir)
    assert context_of(prompt("three")).startswith("Unresolved gates: shop/G001.")
    assert prompt("four") == {"continue": True}
    loopstate("goals", "resolve", "shop", "G001", "--decision", "approve", "--rationale", "ok", cwd=project, data_dir=data_dir)
    assert context_of(prompt("five")) == ("User-stated intent (verbatim claims from the user's own messages):\n"
                                          "- [outcome] Keep it small")
