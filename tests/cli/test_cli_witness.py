"""The history witness (service/witness.py) through real processes: quiet while history only grows,
an alarm once when it is rewritten (re-sealed so the chain holds), "purged at" after a real purge,
and the alarm in a real `loopstate hook` answer."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from loopstate.core.project import Project
from loopstate.service import witness
from tests.cli.test_cli_transparency import add, events_of, ok, reseal, start, stream_file
from tests.hooks.hookkit import claude_input, hook


@pytest.fixture
def project(data_dir: Path, root: Path) -> Path:
    start(root, data_dir)
    for n in range(3):
        add(root, data_dir, f"Claim {n}")
    ok("checkpoint", "intent", cwd=root, data_dir=data_dir)
    return root


def checked(root: Path, data_dir: Path) -> list[witness.Verdict]:
    return witness.check_all(Project(root, data_dir=data_dir))


def test_growing_history_is_consistent_and_an_unchanged_checkpoint_is_no_news(project: Path, data_dir: Path) -> None:
    first = checked(project, data_dir)
    assert [(v.ok, v.size) for v in first] == [(True, 4)]
    assert checked(project, data_dir) == []
    for n in range(3):
        add(project, data_dir, f"More {n}")
        ok("checkpoint", "intent", cwd=project, data_dir=data_dir)
        assert [(v.ok, v.size) for v in checked(project, data_dir)] == [(True, 5 + n)]


def test_a_resealed_rewrite_is_an_alarm_once_and_the_next_checkpoint_alarms_again(project: Path,
                                                                                  data_dir: Path) -> None:
    checked(project, data_dir)
    path = stream_file(project, data_dir)
    events = events_of(path)
    events[1]["payload"]["claim"]["statement"] = "Something the user never said"
    reseal(path, events)
    add(project, data_dir, "After the rewrite")
    ok("checkpoint", "intent", cwd=project, data_dir=data_dir)
    assert json.loads(ok("verify", "--json", cwd=project, data_dir=data_dir))["ok"] is True  # the chain holds
    alarm = checked(project, data_dir)
    assert [(v.ok, v.stream) for v in alarm] == [(False, "intent")]
    assert "does not extend the 4 seen before: history was rewritten" in alarm[0].message
    assert checked(project, data_dir) == []  # said once for this checkpoint
    add(project, data_dir, "Still rewritten")
    ok("checkpoint", "intent", cwd=project, data_dir=data_dir)
    assert [v.ok for v in checked(project, data_dir)] == [False]


def test_a_cut_history_and_a_checkpoint_from_another_key_are_alarms(project: Path, data_dir: Path) -> None:
    checked(project, data_dir)
    path = stream_file(project, data_dir)
    reseal(path, events_of(path)[:2])
    ok("checkpoint", "intent", cwd=project, data_dir=data_dir)
    assert "fewer than the 4 already seen: history was cut" in checked(project, data_dir)[0].message
    key = data_dir / "keys" / "checkpoint-ed25519.pem"
    key.unlink()  # the next checkpoint is signed by a new key
    ok("checkpoint", "intent", cwd=project, data_dir=data_dir)
    assert "does not verify with the key first seen" in checked(project, data_dir)[0].message


def test_a_real_purge_is_reported_as_purged_not_as_tampering(project: Path, data_dir: Path) -> None:
    checked(project, data_dir)
    claim = next(e for e in events_of(stream_file(project, data_dir)) if e["event_type"] == "claim_added")
    claim_id = claim["payload"]["claim"]["claim_id"]
    ok("intent", "purge", "claim", claim_id, "--yes", cwd=project, data_dir=data_dir)
    said = checked(project, data_dir)
    assert [v.ok for v in said] == [True]
    assert "intent was purged at" in said[0].message and "re-chained" in said[0].message
    add(project, data_dir, "After the purge")
    ok("checkpoint", "intent", cwd=project, data_dir=data_dir)
    assert [v.ok for v in checked(project, data_dir)] == [True]


def test_the_hook_tells_the_user_when_history_was_rewritten(project: Path, data_dir: Path) -> None:
    payload = claude_input("UserPromptSubmit", project, "s-witness")
    quiet = hook("claude", "UserPromptSubmit", payload, data_dir=data_dir, cwd=project)
    assert "history was" not in json.dumps(quiet)
    path = stream_file(project, data_dir)
    events = events_of(path)
    reseal(path, [events[0], events[2], events[1], events[3]])
    ok("checkpoint", "intent", cwd=project, data_dir=data_dir)
    told = hook("claude", "UserPromptSubmit", payload, data_dir=data_dir, cwd=project)
    assert "loopstate: intent: its checkpoint of 4 events does not extend the 4 seen before: history was rewritten" \
        in told["systemMessage"]
    again = hook("claude", "UserPromptSubmit", payload, data_dir=data_dir, cwd=project)
    assert "history was" not in json.dumps(again)
