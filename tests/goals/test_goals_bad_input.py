"""Bad input is refused with a stable code and a message saying what to send instead;
nothing is appended and nothing is written."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest
from goalkit import Harness

from loopstate_protocol import goals as g
from loopstate_protocol.errors import ErrorCode

from loopstate.core.errors import LoopstateError
from loopstate.core.stream import Stream
from loopstate.domains.goals.domain import LAYOUT


def _refused(h: Harness, command, code: ErrorCode) -> LoopstateError:
    before = h.stream_bytes("g") if h.stream_path("g").exists() else b""
    with pytest.raises(LoopstateError) as refused:
        h.run(command)
    assert refused.value.code is code, refused.value.message
    assert (h.stream_bytes("g") if h.stream_path("g").exists() else b"") == before
    return refused.value


def test_text_that_is_not_valid_unicode_is_refused_before_it_is_hashed(h: Harness) -> None:
    error = _refused(h, g.AddTodo(goal_id="g", title="bad \udcff title"), ErrorCode.INVALID_PARAMS)
    assert "Unicode" in error.message and "UTF-8" in error.message


def test_a_non_utf8_argument_on_the_command_line_is_a_clear_refusal(data_dir: Path, root: Path) -> None:
    env = {**os.environ, "LOOPSTATE_DATA_DIR": str(data_dir)}
    done = subprocess.run([sys.executable, "-m", "loopstate.cli.main", "goals", "add", "g", b"bad \xff title",
                           "--root", str(root)], capture_output=True, env=env, timeout=60)
    assert done.returncode == 1 and b"INVALID_PARAMS" in done.stderr and b"UTF-8" in done.stderr
    assert b"Traceback" not in done.stderr


@pytest.mark.parametrize("recorded_at", ["0001-01-01T00:00:00+01:00", "2026-03-02T12:00:00", "2026-03-02", "soon"])
def test_a_recorded_at_without_offset_or_outside_the_calendar_is_a_validation_error(h: Harness, recorded_at: str) -> None:
    error = _refused(h, g.AddTodo(goal_id="g", title="x", recorded_at=recorded_at), ErrorCode.VALIDATION_FAILED)
    assert recorded_at in error.message and "2026-03-02T12:00:00Z" in error.message


@pytest.mark.parametrize("command, field", [
    (g.AddTodo(goal_id="g", title="x", planner_order=10**30), "planner_order"),
    (g.AddTodo(goal_id="g", title="x", metadata={f"k{i}": "v" for i in range(33)}), "metadata"),
    (g.AddTodo(goal_id="g", title="x", metadata={"1st": "v"}), "metadata keys must be a label"),
    (g.AddTodo(goal_id="g", title=" padded"), "title must be one line"),
])
def test_payloads_are_compact_and_bounded(h: Harness, command, field: str) -> None:
    error = _refused(h, command, ErrorCode.VALIDATION_FAILED)
    assert field in error.message and "regex" not in error.message


def test_lists_in_payloads_are_bounded(h: Harness) -> None:
    h.run(g.AddTodo(goal_id="g", title="x"))
    error = _refused(h, g.CompleteTodo(goal_id="g", todo_id="T001", rationale="done",
                                       validation_refs=[f"ci#{i}" for i in range(65)]), ErrorCode.VALIDATION_FAILED)
    assert "validation_refs" in error.message


@pytest.mark.parametrize("command, says", [
    (g.AddTodo(goal_id="g", title="x", todo_id="../T1"), "todo_id must be an id"),
    (g.AddTodo(goal_id="g", title="x", event_id=""), "event_id must be an event id"),
    (g.AddTodo(goal_id="g", title="x", producer="/home/u/tool"), "producer must be a label"),
    (g.AddTodo(goal_id="g", title="a\nb"), "title must be one line"),
    (g.RenderMarkdown(goal_id="g", target="/etc/passwd.md"), "target must be a path relative to the project root"),
])
def test_wire_shape_refusals_say_what_the_field_must_look_like(h: Harness, command, says: str) -> None:
    error = _refused(h, command, ErrorCode.INVALID_PARAMS)
    assert says in error.message and "regex" not in error.message


@pytest.mark.parametrize("target", [
    ".loopstate/STOP.md", ".git/config", ".git/info/x.md", "docs/", "./STATE.md", "docs//STATE.md", "notes.txt",
    ".md", "pyproject.toml",
])
def test_render_targets_are_markdown_files_in_normal_form_outside_git_and_loopstate(h: Harness, target: str) -> None:
    h.run(g.AddTodo(goal_id="g", title="first"))
    error = _refused(h, g.RenderMarkdown(goal_id="g", target=target, force=True), ErrorCode.UNSAFE_PATH)
    assert target in error.message and "ACTIVE_GOAL_STATE.md" in error.message
    assert sorted(p.name for p in Path(h.root).iterdir()) == []


def test_a_render_target_through_a_symlinked_folder_is_refused(h: Harness, tmp_path: Path) -> None:
    h.run(g.AddTodo(goal_id="g", title="first"))
    outside = tmp_path / "outside"
    outside.mkdir()
    os.symlink(outside, Path(h.root) / "docs")
    error = _refused(h, g.RenderMarkdown(goal_id="g", target="docs/GOAL_STATE.md", public=True), ErrorCode.UNSAFE_PATH)
    assert "docs/GOAL_STATE.md" in error.message and "link" in error.message
    assert list(outside.iterdir()) == []


def test_unknown_todos_and_gates_name_the_command_that_fixes_it(h: Harness) -> None:
    h.run(g.AddTodo(goal_id="g", title="first"))
    assert "loopstate goals add" in _refused(h, g.ClaimTodo(goal_id="g", todo_id="T9", claimed_by="a"),
                                            ErrorCode.NOT_FOUND).message
    for command in (g.ResolveGate(goal_id="g", gate_id="G9", decision="approve"),
                    g.AttachEvidence(goal_id="g", target_kind="gate", target_id="G9", ref="ci#1")):
        message = _refused(h, command, ErrorCode.NOT_FOUND).message
        assert "G9" in message and "loopstate goals gate" in message


def test_completing_a_completed_todo_is_an_invalid_transition(h: Harness) -> None:
    h.run(g.AddTodo(goal_id="g", title="first"))
    h.run(g.CompleteTodo(goal_id="g", todo_id="T001", rationale="done"))
    error = _refused(h, g.CompleteTodo(goal_id="g", todo_id="T001", rationale="again"), ErrorCode.INVALID_TRANSITION)
    assert "follow-up" in error.message


@pytest.mark.parametrize("change", [
    {"event_type": "todo_deleted"},
    {"payload": {"title": "no todo id"}},
    {"goal_id": "G"},  # another goal's line (e.g. "G" and "g" sharing a file on a case-insensitive file system)
])
@pytest.mark.jsonl_only("reads or edits the stream file")
def test_a_sealed_line_that_no_goals_writer_produced_stops_replay_as_corrupt(h: Harness, change: dict) -> None:
    h.run(g.AddTodo(goal_id="g", title="x"))
    stream = Stream(h.project.dir, "goals.g", LAYOUT)
    list(stream.read_new())
    stream.append([{**h.events("g")[0], "event_id": "forged", **change}])
    with pytest.raises(LoopstateError) as refused:
        h.fresh().query(h.root, g.GetBoard(goal_id="g"))
    assert refused.value.code is ErrorCode.CORRUPT_LEDGER and "append_sequence 2" in refused.value.message


@pytest.mark.parametrize("command, values", [
    (g.AddTodo(goal_id="g", title="x", priority="P7"), "P0, P1, P2, P3, P4"),
    (g.AddGate(goal_id="g", title="x", gate_kind="boss"), "user, owner, operator, controller"),
    (g.AddTodo(goal_id="g", title="x", privacy="secret"), "public_safe, local_private, private_pointer"),
    (g.AppendEvent(goal_id="g", event_type="todo_deleted", payload={}), "todo_added, todo_claimed"),
])
def test_an_unknown_enum_value_is_refused_with_the_allowed_values(h: Harness, command, values: str) -> None:
    error = _refused(h, command, ErrorCode.INVALID_PARAMS)
    assert values in error.message


def test_an_unknown_enum_value_in_a_seed_shaped_payload_lists_the_allowed_values(h: Harness) -> None:
    error = _refused(h, g.AppendEvent(goal_id="g", event_type="gate_added",
                                      payload={"gate_id": "G1", "gate_kind": "boss", "title": "x"}),
                     ErrorCode.VALIDATION_FAILED)
    assert "payload.gate_kind" in error.message and "user, owner, operator, controller" in error.message
