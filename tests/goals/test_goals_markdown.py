"""The Markdown workbench: render after the event, staleness, backfill, the bridge."""

from __future__ import annotations

import json
import os
from pathlib import Path

import msgspec
import pytest
from goalkit import FIXTURE, Harness

from loopstate_protocol import goals as g
from loopstate_protocol.errors import ErrorCode

from loopstate.core.errors import LoopstateError
from loopstate.domains.goals.markdown import parse, text_checksum
from loopstate.service.goals_effects import markdown_status


def test_backfill_of_a_realistic_file_round_trips_through_render_with_no_bridge_difference(h: Harness) -> None:
    original = FIXTURE.read_text()
    h.run(g.Backfill(goal_id="payments", markdown=original))
    assert h.ask(g.BridgeMarkdown(goal_id="payments", markdown=original)).differences == []
    h.run(g.RenderMarkdown(goal_id="payments"))
    rendered = (Path(h.root) / "ACTIVE_GOAL_STATE.md").read_text()
    report = h.ask(g.BridgeMarkdown(goal_id="payments", markdown=rendered))
    assert report.clean and report.differences == []
    assert (report.events_todos, report.markdown_todos, report.events_gates, report.markdown_gates) == (8, 8, 3, 3)
    # The two parses agree item by item, whatever their order in the files.
    def items(text):
        parsed = parse(text)
        todos = {t.todo_id: (t.title, t.role, t.priority, t.status, t.claimed_by, t.gate_ids, t.validation_refs)
                 for t in parsed.todos}
        gates = {x.gate_id: (x.title, x.gate_kind, x.status, x.todo_id, x.decision) for x in parsed.gates}
        return todos, gates
    assert items(original) == items(rendered)


def test_backfill_marks_producer_and_source_refs_and_keeps_private_material_out_of_public_events(h: Harness) -> None:
    original = FIXTURE.read_text()
    h.run(g.Backfill(goal_id="payments", markdown=original))
    events = h.events("payments")
    assert {e["producer"] for e in events} == {"loopx.backfill"}
    for event in events:
        refs = event["refs"]
        assert refs["source"] == "markdown:ACTIVE_GOAL_STATE.md"
        assert refs["source_sha256"] == text_checksum(original)
        assert original.split("\n")[int(refs["source_line"]) - 1].startswith("- [")
    by_todo = {e["payload"].get("todo_id"): e for e in events if e["event_type"] == "todo_added"}
    assert by_todo["T007"]["privacy"] == "local_private"  # its title holds a home-directory path
    assert by_todo["T008"]["privacy"] == "private_pointer"
    assert by_todo["T001"]["privacy"] == "public_safe"
    public_events = json.dumps([e for e in events if e["privacy"] == "public_safe"])
    everything = json.dumps(events)
    for private in ("/home/alice", "sk-FAKEtest", "staging credentials", "Ship the event-sourced"):
        assert private not in public_events
    # Prose sections (goal, progress, private notes) are not imported at all.
    for prose in ("sk-FAKEtest", "staging credentials", "Ship the event-sourced", "run the replay smoke"):
        assert prose not in everything
    public = json.dumps(msgspec.to_builtins(h.ask(g.GetBoard(goal_id="payments", public=True))))
    assert "/home/alice" not in public and "notes://incident" not in public


@pytest.mark.jsonl_only("reads or edits the stream file")
def test_backfilling_the_same_file_again_appends_nothing(h: Harness) -> None:
    text = FIXTURE.read_text()
    first = h.run(g.Backfill(goal_id="payments", markdown=text))
    size = len(h.stream_bytes("payments"))
    h.clock.advance(60)
    again = h.run(g.Backfill(goal_id="payments", markdown=text))
    assert len(first.events) == 17 and again.events == []
    assert len(h.stream_bytes("payments")) == size


def test_backfill_refuses_lines_it_cannot_read_and_appends_nothing(h: Harness) -> None:
    text = "## Todos\n\n### agent\n\n- [ ] P1 `T001` Fine\n- TODO maybe later: rewrite everything\n  - colour: blue\n"
    with pytest.raises(LoopstateError) as refused:
        h.run(g.Backfill(goal_id="g", markdown=text))
    assert refused.value.code is ErrorCode.VALIDATION_FAILED
    assert "line 6" in refused.value.message and refused.value.details["lines"] == [6, 7]
    assert not h.stream_path("g").exists()


def test_backfill_refuses_a_completed_todo_whose_gate_is_still_open(h: Harness) -> None:
    text = ("## Completed\n\n- [x] P1 `T001` Ship it\n  - done: shipped\n\n"
            "## Gates\n\n- [ ] `G001` user: Approve shipping\n  - todo: T001\n")
    with pytest.raises(LoopstateError) as refused:
        h.run(g.Backfill(goal_id="g", markdown=text))
    assert refused.value.code is ErrorCode.RULE_VIOLATION and "line 3" in refused.value.message
    assert "G001" in refused.value.message


def test_backfill_gives_id_less_items_fresh_ids_after_existing_ones(h: Harness) -> None:
    h.run(g.AddTodo(goal_id="g", title="already here"))
    text = "## Todos\n\n### agent\n\n- [ ] P1 Hand-written todo\n- [x] P2 Done by hand\n"
    h.run(g.Backfill(goal_id="g", markdown=text, source_label="notes.md"))
    board = h.ask(g.GetBoard(goal_id="g"))
    titles = {t.todo_id: t.title for grp in board.active for t in grp.todos}
    assert titles == {"T001": "already here", "T002": "Hand-written todo"}
    assert [(t.todo_id, t.rationale) for t in board.completed] == [("T003", "completed before backfill")]
    assert h.ask(g.BridgeMarkdown(goal_id="g", markdown=h.ask(g.PreviewMarkdown(goal_id="g")).text)).clean


def test_backfill_source_label_may_not_be_a_local_path(h: Harness) -> None:
    with pytest.raises(LoopstateError) as refused:
        h.run(g.Backfill(goal_id="g", markdown=FIXTURE.read_text(), source_label="/home/alice/ACTIVE_GOAL_STATE.md"))
    assert refused.value.code is ErrorCode.PRIVACY_VIOLATION


def test_render_writes_after_the_event_and_reports_stale_when_the_store_moved_on(h: Harness) -> None:
    h.run(g.AddTodo(goal_id="g", title="first"))
    h.run(g.AddTodo(goal_id="g", title="second"))
    outcome = h.run(g.RenderMarkdown(goal_id="g"))
    path = Path(h.root) / "ACTIVE_GOAL_STATE.md"
    text = path.read_text()
    (event,) = outcome.events
    # The projection_rendered event comes after the lifecycle events it shows and
    # names the exact bytes written.
    assert event["event_type"] == "projection_rendered" and event["append_sequence"] == 3
    assert event["payload"]["rendered_through_sequence"] == 2
    assert event["payload"]["checksum"] == text_checksum(text)
    assert markdown_status(h.service, h.root, "g", "ACTIVE_GOAL_STATE.md").status == "current"
    # The render's own bookkeeping event does not make it stale; a lifecycle event does.
    h.run(g.Compact(goal_id="g"))
    assert markdown_status(h.service, h.root, "g", "ACTIVE_GOAL_STATE.md").status == "current"
    h.run(g.ClaimTodo(goal_id="g", todo_id="T001", claimed_by="codex"))
    stale = markdown_status(h.service, h.root, "g", "ACTIVE_GOAL_STATE.md")
    assert (stale.status, stale.file_sequence, stale.store_sequence, stale.events_since) == ("stale", 2, 5, 1)
    assert "loopstate goals render" in stale.message
    assert path.read_text() == text  # nothing rewrites the file behind the writer's back
    h.run(g.RenderMarkdown(goal_id="g"))
    assert markdown_status(h.service, h.root, "g", "ACTIVE_GOAL_STATE.md").status == "current"


def test_render_refuses_to_overwrite_a_foreign_file_unless_forced(h: Harness) -> None:
    h.run(g.AddTodo(goal_id="g", title="first"))
    path = Path(h.root) / "ACTIVE_GOAL_STATE.md"
    path.write_text("# my own notes\n")
    with pytest.raises(LoopstateError) as refused:
        h.run(g.RenderMarkdown(goal_id="g"))
    assert refused.value.code is ErrorCode.CONFLICT and "backfill" in refused.value.message
    assert path.read_text() == "# my own notes\n"
    assert h.ask(g.CheckMarkdown(goal_id="g", markdown=path.read_text())).status == "foreign"
    h.run(g.RenderMarkdown(goal_id="g", force=True))
    assert "`T001` first" in path.read_text()


@pytest.mark.parametrize("target", ["../outside.md", "/tmp/abs.md", "a/../../x.md"])
def test_render_target_must_stay_inside_the_project_root(h: Harness, target: str) -> None:
    h.run(g.AddTodo(goal_id="g", title="first"))
    with pytest.raises(LoopstateError) as refused:
        h.run(g.RenderMarkdown(goal_id="g", target=target))
    assert refused.value.code in (ErrorCode.INVALID_PARAMS, ErrorCode.UNSAFE_PATH)
    assert len(h.events("g")) == 1


def test_render_refuses_a_symlinked_target(h: Harness, tmp_path: Path) -> None:
    h.run(g.AddTodo(goal_id="g", title="first"))
    victim = tmp_path / "victim.txt"
    victim.write_text("keep me")
    os.symlink(victim, Path(h.root) / "ACTIVE_GOAL_STATE.md")
    with pytest.raises(LoopstateError) as refused:
        h.run(g.RenderMarkdown(goal_id="g", force=True))
    assert refused.value.code is ErrorCode.UNSAFE_PATH
    assert victim.read_text() == "keep me" and len(h.events("g")) == 1


def test_bridge_reports_every_kind_of_difference(h: Harness) -> None:
    h.run(g.AddTodo(goal_id="g", title="keep", priority="P1"))
    h.run(g.AddTodo(goal_id="g", title="dropped from the file"))
    h.run(g.AddGate(goal_id="g", title="approve", gate_kind="controller"))
    text = h.ask(g.PreviewMarkdown(goal_id="g")).text
    text = text.replace("- [ ] P1 `T001` keep", "- [~] P0 `T001` keep\n  - claimed by: someone")
    text = text.replace("- [ ] P2 `T002` dropped from the file\n", "")
    text = text.replace("- [ ] `G001` controller: approve", "- [ ] `G001` controller: approve\n  - colour: red")
    text = text.replace("## Completed\n", "## Completed\n\n- [x] P1 `T001` keep\n- [x] P3 `T050` invented here\n- not an item\n")
    report = h.ask(g.BridgeMarkdown(goal_id="g", markdown=text))
    found = {(d.kind, d.subject, d.field) for d in report.differences}
    assert ("field_differs", "todo T001", "priority") in found
    assert ("field_differs", "todo T001", "status") in found
    assert ("field_differs", "todo T001", "claimed_by") in found
    assert ("missing_in_markdown", "todo T002", None) in found
    assert ("missing_in_events", "todo T050", None) in found
    assert ("duplicate_in_markdown", "todo T001", None) in found
    assert sum(d.kind == "unparsed_line" for d in report.differences) == 2
    assert not report.clean and report.schema_version == "event_store_migration_bridge_v0"


def test_public_markdown_bridges_cleanly_against_the_public_projection(h: Harness) -> None:
    h.run(g.AddTodo(goal_id="g", title="see /home/alice/notes.txt", privacy="local_private"))
    public = h.ask(g.PreviewMarkdown(goal_id="g", public=True)).text
    assert h.ask(g.BridgeMarkdown(goal_id="g", markdown=public, public=True)).clean
    local = h.ask(g.BridgeMarkdown(goal_id="g", markdown=public))
    assert [(d.kind, d.field) for d in local.differences] == [("field_differs", "title")]


def _config(h: Harness, **state_privacy) -> None:
    folder = Path(h.root) / ".loopstate"
    folder.mkdir(exist_ok=True)
    (folder / "goals.json").write_text(json.dumps({"state_privacy": state_privacy}))


def test_project_config_can_make_the_active_state_public_only(h: Harness) -> None:
    h.run(g.AddTodo(goal_id="g", title="x"))
    _config(h, active_state="public_safe")
    with pytest.raises(LoopstateError) as refused:
        h.run(g.RenderMarkdown(goal_id="g"))
    assert refused.value.code is ErrorCode.PRIVACY_VIOLATION and ".loopstate/goals.json" in refused.value.message
    h.run(g.RenderMarkdown(goal_id="g", public=True))


def test_project_config_can_forbid_private_links_even_in_ignored_state(h: Harness) -> None:
    h.run(g.AddTodo(goal_id="g", title="x"))
    _config(h, allow_private_links_in_ignored_state=False)
    with pytest.raises(LoopstateError) as refused:
        h.run(g.RenderMarkdown(goal_id="g"))
    assert "allow_private_links_in_ignored_state" in refused.value.message
    assert len(h.events("g")) == 1


def test_project_config_can_waive_redaction_for_tracked_outputs(h: Harness) -> None:
    import subprocess

    subprocess.run(["git", "init", "-q", h.root], check=True)
    h.run(g.AddTodo(goal_id="g", title="see /home/alice/x", privacy="local_private"))
    h.run(g.RenderMarkdown(goal_id="g", public=True))
    subprocess.run(["git", "-C", h.root, "add", "ACTIVE_GOAL_STATE.md"], check=True)
    with pytest.raises(LoopstateError) as refused:
        h.run(g.RenderMarkdown(goal_id="g"))
    assert refused.value.code is ErrorCode.PRIVACY_VIOLATION
    _config(h, require_redaction_for_tracked_outputs=False)
    h.run(g.RenderMarkdown(goal_id="g"))
    assert "/home/alice/x" in (Path(h.root) / "ACTIVE_GOAL_STATE.md").read_text()


def test_an_invalid_project_config_refuses_renders(h: Harness) -> None:
    h.run(g.AddTodo(goal_id="g", title="x"))
    _config(h, active_state="everything_public")
    with pytest.raises(LoopstateError) as refused:
        h.run(g.RenderMarkdown(goal_id="g", public=True))
    assert refused.value.code is ErrorCode.VALIDATION_FAILED and "goals.json" in refused.value.message


def test_backfill_reads_loosely_written_hand_files(h: Harness) -> None:
    text = ("# Notes\n\n## Active todos\n\n### Role: agent\n\n* [ ] Tidy the README\n"
            "- [~] P1 `T7` Fix the flaky test\n\t- claimed by: claude\n"
            "- [!] P0 Wait for the API key\n    - blocked: the vendor has not answered\n\n"
            "## Done\n\n- [x] Set up CI\n  - done: green on main\n")
    h.run(g.Backfill(goal_id="g", markdown=text, source_label="NOTES.md"))
    board = h.ask(g.GetBoard(goal_id="g"))
    todos = {t.title: t for grp in board.active for t in grp.todos}
    assert todos["Tidy the README"].priority == "P2" and todos["Tidy the README"].status == "open"
    assert (todos["Fix the flaky test"].todo_id, todos["Fix the flaky test"].claimed_by) == ("T7", "claude")
    assert todos["Wait for the API key"].blocker_reason == "the vendor has not answered"
    assert [(t.title, t.rationale) for t in board.completed] == [("Set up CI", "green on main")]
    assert h.ask(g.BridgeMarkdown(goal_id="g", markdown=text)).clean


def test_a_target_that_cannot_be_written_is_refused_before_the_event(h: Harness) -> None:
    h.run(g.AddTodo(goal_id="g", title="first"))
    (Path(h.root) / "out").write_text("a file where a folder is needed")
    (Path(h.root) / "dir.md").mkdir()
    for target in ("out/STATE.md", "dir.md"):
        with pytest.raises(LoopstateError) as refused:
            h.run(g.RenderMarkdown(goal_id="g", target=target))
        assert refused.value.code is ErrorCode.UNSAFE_PATH
    assert [e["event_type"] for e in h.events("g")] == ["todo_added"]


def test_a_binary_file_at_the_target_is_foreign_and_needs_force(h: Harness) -> None:
    h.run(g.AddTodo(goal_id="g", title="first"))
    path = Path(h.root) / "ACTIVE_GOAL_STATE.md"
    path.write_bytes(b"\xff\xfe binary")
    with pytest.raises(LoopstateError) as refused:
        h.run(g.RenderMarkdown(goal_id="g"))
    assert refused.value.code is ErrorCode.CONFLICT
    h.run(g.RenderMarkdown(goal_id="g", force=True))
    assert path.read_text().startswith("# Active goal state: g")


@pytest.mark.parametrize("resave", [
    lambda t: t.replace("\n", "\r\n"), lambda t: t + "\n\n", lambda t: t.rstrip("\n"), lambda t: t.replace("\n", "  \n"),
])
def test_saving_a_rendered_file_unchanged_in_an_editor_is_not_an_edit(h: Harness, resave) -> None:
    h.run(g.AddTodo(goal_id="g", title="first", details="body with a trailing space \nand more", privacy="local_private"))
    h.run(g.RenderMarkdown(goal_id="g"))
    path = Path(h.root) / "ACTIVE_GOAL_STATE.md"
    path.write_bytes(resave(path.read_text()).encode())
    assert markdown_status(h.service, h.root, "g", "ACTIVE_GOAL_STATE.md").status == "current"
    h.run(g.AddTodo(goal_id="g", title="second"))
    h.run(g.RenderMarkdown(goal_id="g"))  # a re-saved file is still ours: no --force needed
    edited = path.read_text().replace("`T002` second", "`T002` second, renamed by hand")
    path.write_text(edited)
    assert markdown_status(h.service, h.root, "g", "ACTIVE_GOAL_STATE.md").status == "edited"


@pytest.mark.parametrize("envelope", [{"event_id": "e1"}, {"producer": "loopx.todo"}, {"refs": {"pr": "41"}}])
def test_backfill_refuses_envelope_choices_it_makes_itself(h: Harness, envelope: dict) -> None:
    with pytest.raises(LoopstateError) as refused:
        h.run(g.Backfill(goal_id="g", markdown=FIXTURE.read_text(), **envelope))
    assert refused.value.code is ErrorCode.VALIDATION_FAILED and next(iter(envelope)) in refused.value.message
    assert not h.stream_path("g").exists()
