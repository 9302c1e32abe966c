"""The acceptance checks that close seed 003, one test each, in the seed's order."""

from __future__ import annotations

import json
import random
import subprocess
from pathlib import Path

import msgspec
import pytest
from goalkit import Harness

from loopstate_protocol import goals as g
from loopstate_protocol.errors import ErrorCode

from loopstate.core.errors import LoopstateError
from loopstate.domains.goals.markdown import split_header
from loopstate.domains.goals.ordering import replay
from loopstate.domains.goals.projection import build_board
from loopstate.domains.goals.state import state_checksum


def _lifecycle(h: Harness) -> None:
    h.run(g.AddTodo(goal_id="g", title="Define the envelope", priority="P0"))
    h.run(g.AddTodo(goal_id="g", title="Replay deterministically", priority="P1"))
    h.run(g.AddTodo(goal_id="g", title="Export dashboard", priority="P2"))
    h.run(g.AddTodo(goal_id="g", title="Migrate quota", priority="P1"))
    h.run(g.ClaimTodo(goal_id="g", todo_id="T001", claimed_by="codex", lease_seconds=600))
    h.run(g.UpdateTodo(goal_id="g", todo_id="T002", title="Replay deterministically by sequence", priority="P0"))
    h.run(g.BlockTodo(goal_id="g", todo_id="T004", reason="waiting for the owner"))
    h.run(g.DeferTodo(goal_id="g", todo_id="T003", resume_when="after the bridge is clean"))
    h.run(g.CompleteTodo(goal_id="g", todo_id="T001", rationale="merged", validation_refs=["pr#1"]))


@pytest.mark.jsonl_only("reads or edits the stream file")
def test_markdown_remains_a_workbench_projection_not_canonical_truth(h: Harness) -> None:
    _lifecycle(h)
    h.run(g.RenderMarkdown(goal_id="g"))
    path = Path(h.root) / "ACTIVE_GOAL_STATE.md"
    before_stream = h.stream_bytes("g")
    before_board = msgspec.to_builtins(h.ask(g.GetBoard(goal_id="g")))
    edited = path.read_text().replace("Replay deterministically by sequence", "Replay it some other way")
    edited += "\n## Todos\n\n### agent\n\n- [ ] P0 `T099` A todo typed into the Markdown\n"
    path.write_text(edited)

    # Reading, checking and bridging the edited file change nothing in the store.
    status = h.ask(g.CheckMarkdown(goal_id="g", markdown=edited))
    report = h.ask(g.BridgeMarkdown(goal_id="g", markdown=edited))
    fresh_board = msgspec.to_builtins(h.fresh().query(h.root, g.GetBoard(goal_id="g")))
    assert h.stream_bytes("g") == before_stream
    assert {**fresh_board, "meta": {}} == {**before_board, "meta": {}}
    assert status.status == "edited"
    kinds = {(d.kind, d.subject, d.field) for d in report.differences}
    assert ("field_differs", "todo T002", "title") in kinds
    assert ("missing_in_events", "todo T099", None) in kinds

    # The projection never becomes a write API: rendering over edits is refused, and
    # a forced render brings back what the events say.
    with pytest.raises(LoopstateError) as refused:
        h.run(g.RenderMarkdown(goal_id="g"))
    assert refused.value.code is ErrorCode.CONFLICT
    assert h.stream_bytes("g") == before_stream
    h.run(g.RenderMarkdown(goal_id="g", force=True))
    text = path.read_text()
    assert "Replay deterministically by sequence" in text and "T099" not in text


def test_todo_lifecycle_events_replay_into_a_deterministic_projection(h: Harness) -> None:
    _lifecycle(h)
    events = h.events("g")
    assert [e["event_type"] for e in events][4:] == [
        "todo_claimed", "todo_updated", "todo_blocked", "todo_deferred", "todo_completed",
    ]
    live = h.service.folded(h.project, h.service.domains["goals"], "goals.g").state
    shuffled = list(events)
    random.Random(7).shuffle(shuffled)
    again = replay("g", shuffled)
    from_files = h.fresh().query(h.root, g.GetBoard(goal_id="g"))
    assert state_checksum(again) == state_checksum(live)
    at = "2026-03-02T12:00:00Z"
    assert msgspec.to_builtins(build_board(again, generated_at=at, public=False)) == msgspec.to_builtins(
        build_board(live, generated_at=at, public=False))
    assert {t.todo_id: t.status for grp in from_files.active for t in grp.todos} == {
        "T002": "open", "T003": "deferred", "T004": "blocked"}
    assert [t.todo_id for t in from_files.completed] == ["T001"]
    assert from_files.active[0].todos[0].title == "Replay deterministically by sequence"


def test_same_priority_todos_preserve_planner_order_and_append_order(h: Harness) -> None:
    h.run(g.AddTodo(goal_id="g", title="late planner step", priority="P0", planner_order=2))
    h.run(g.AddTodo(goal_id="g", title="unplanned first", priority="P0"))
    h.run(g.AddTodo(goal_id="g", title="early planner step", priority="P0", planner_order=1))
    h.run(g.AddTodo(goal_id="g", title="unplanned second", priority="P0"))
    h.run(g.AddTodo(goal_id="g", title="less urgent", priority="P1", planner_order=0))
    board = h.ask(g.GetBoard(goal_id="g"))
    assert [t.title for t in board.active[0].todos] == [
        "early planner step", "late planner step", "unplanned first", "unplanned second", "less urgent",
    ]
    text = h.ask(g.PreviewMarkdown(goal_id="g")).text
    positions = [text.index(t) for t in ("early planner", "late planner", "unplanned first", "unplanned second", "less urgent")]
    assert positions == sorted(positions)


@pytest.mark.jsonl_only("reads or edits the stream file")
def test_duplicate_identical_event_id_append_is_idempotent(h: Harness) -> None:
    command = g.AddTodo(goal_id="g", title="once", event_id="evt-add-1")
    first = h.run(command, "first-request")
    size = len(h.stream_bytes("g"))
    again = h.run(command, "another-request")  # a new request id: only the event id makes it a repeat
    assert len(first.events) == 1 and again.events == [] and not again.replayed
    assert len(h.stream_bytes("g")) == size
    assert again.head.sequence == 1
    # The same holds for an event whose time the caller pinned, and for consumers:
    # replaying a stream with the identical event twice folds it once.
    pinned = g.ClaimTodo(goal_id="g", todo_id="T001", claimed_by="codex", lease_seconds=60,
                         event_id="evt-claim-1", recorded_at="2026-03-02T13:00:00+01:00")
    h.run(pinned)
    h.clock.advance(3600)
    assert h.run(pinned).events == []
    events = h.events("g")
    assert replay("g", events + [events[0]]).store.event_count == 2


@pytest.mark.jsonl_only("reads or edits the stream file")
def test_duplicate_conflicting_event_id_append_fails_closed(h: Harness) -> None:
    h.run(g.AddTodo(goal_id="g", title="original", event_id="evt-1"))
    size = len(h.stream_bytes("g"))
    with pytest.raises(LoopstateError) as conflict:
        h.run(g.AddTodo(goal_id="g", title="changed", event_id="evt-1"))
    assert conflict.value.code is ErrorCode.EVENT_ID_CONFLICT
    assert "evt-1" in conflict.value.message and "append_sequence 1" in conflict.value.message
    with pytest.raises(LoopstateError) as moved:
        h.run(g.AddTodo(goal_id="g", title="original", event_id="evt-1", recorded_at="2020-01-01T00:00:00Z"))
    assert moved.value.code is ErrorCode.EVENT_ID_CONFLICT
    assert len(h.stream_bytes("g")) == size
    # Consumers fail closed too: a stream that carries a conflicting duplicate does not replay.
    event = h.events("g")[0]
    forged = {**event, "append_sequence": 2, "payload": {**event["payload"], "title": "forged"}}
    with pytest.raises(LoopstateError) as consumer:
        replay("g", [event, forged])
    assert consumer.value.code is ErrorCode.EVENT_ID_CONFLICT


@pytest.mark.jsonl_only("reads or edits the stream file")
def test_prior_events_are_never_mutated_or_deleted(h: Harness) -> None:
    h.run(g.AddTodo(goal_id="g", title="first", metadata={"area": "storage"}))
    h.run(g.AddGate(goal_id="g", title="approve", todo_id="T001"))
    prefix = h.stream_bytes("g")
    parent = h.events("g")[0]
    h.run(g.UpdateTodo(goal_id="g", todo_id="T001", title="first, renamed", refs={"parent_event_id": parent["event_id"]}))
    h.run(g.ResolveGate(goal_id="g", gate_id="G001", decision="approve"))
    h.run(g.CompleteTodo(goal_id="g", todo_id="T001", rationale="done"))
    h.run(g.RenderMarkdown(goal_id="g"))
    h.run(g.Compact(goal_id="g"))
    after = h.stream_bytes("g")
    assert after.startswith(prefix)  # append-only: every earlier byte is where it was
    assert h.events("g")[0] == parent  # the child did not rewrite its parent's payload
    assert h.events("g")[2]["refs"]["parent_event_id"] == parent["event_id"]
    # Re-adding or re-gating an existing id would rewrite its first event: refused.
    for command in (g.AddTodo(goal_id="g", todo_id="T001", title="again"),
                    g.AddGate(goal_id="g", gate_id="G001", title="again")):
        with pytest.raises(LoopstateError) as refused:
            h.run(command)
        assert refused.value.code is ErrorCode.RULE_VIOLATION
    with pytest.raises(LoopstateError) as orphan:
        h.run(g.AddTodo(goal_id="g", title="follow-up", refs={"parent_event_id": "no-such-event"}))
    assert orphan.value.code is ErrorCode.RULE_VIOLATION and "parent_event_id" in orphan.value.message
    # Changing an earlier byte is detected on the next read: history cannot be edited in place.
    h.stream_path("g").write_bytes(after.replace(b'"title":"first"', b'"title":"FIRST"', 1))
    with pytest.raises(LoopstateError) as corrupt:
        h.fresh().query(h.root, g.GetBoard(goal_id="g"))
    assert corrupt.value.code is ErrorCode.CORRUPT_LEDGER


def test_projections_expose_last_event_id_last_append_sequence_and_projection_version(h: Harness) -> None:
    _lifecycle(h)
    board = h.ask(g.GetBoard(goal_id="g"))
    last = h.events("g")[-1]
    meta = board.meta
    assert (meta.last_event_id, meta.last_append_sequence) == (last["event_id"], last["append_sequence"])
    assert meta.projection_version == "goals_projection_v0" and meta.schema_version == "loopx_state_projection_v0"
    assert meta.source_event_count == 9 and meta.goal_id == "g" and meta.generated_at == "2026-03-02T12:00:00Z"
    assert meta.source_checksum == "sha256:" + last["event_hash"]
    header, _ = split_header(h.ask(g.PreviewMarkdown(goal_id="g")).text)
    for name in ("schema_version", "goal_id", "generated_at", "source_event_count", "last_event_id",
                 "last_append_sequence", "projection_version", "source_checksum"):
        assert header[name] == getattr(meta, name), name


def test_public_projections_exclude_local_paths_credentials_transcripts_logs_and_private_bodies(h: Harness) -> None:
    secrets = {
        "path": "/home/alice/payments/logs/replay.log",
        "key": "sk-FAKEtestFAKEtestFAKEtest1234",
        "body": "PRIVATE-BODY-MARKER def handler(): return internal_secret_logic()",
        "transcript": "user: TRANSCRIPT-MARKER please keep this between us",
        "log": "LOG-MARKER 12:00:01 ERROR worker crashed",
    }
    h.run(g.AddTodo(goal_id="g", title=f"Investigate {secrets['path']}", privacy="local_private",
                    details=f"{secrets['body']}\n{secrets['transcript']}\n{secrets['log']}",
                    metadata={"api_key": secrets["key"]}))
    h.run(g.RecordRun(goal_id="g", run_id="run-1", status="failed", summary=f"token={secrets['key']}",
                      privacy="local_private"))
    h.run(g.AttachEvidence(goal_id="g", target_kind="todo", target_id="T001", ref="evidence bundle",
                           pointer=secrets["path"], privacy="private_pointer"))
    h.run(g.RecordRefresh(goal_id="g", summary=secrets["transcript"], privacy="local_private"))
    # The local board keeps them (it is the private workbench) ...
    local = json.dumps(msgspec.to_builtins(h.ask(g.GetBoard(goal_id="g"))))
    assert secrets["path"] in local and secrets["body"] in local
    # ... the public board and the public Markdown carry none of them, but say what was left out.
    public = h.ask(g.GetBoard(goal_id="g", public=True))
    outputs = [json.dumps(msgspec.to_builtins(public)), h.ask(g.PreviewMarkdown(goal_id="g", public=True)).text]
    for text in outputs:
        for name, value in secrets.items():
            for marker in (value, value.split()[0], "/home/alice"):
                assert marker not in text, (name, marker)
    assert any("details omitted" in note for note in public.omissions)
    assert any("title omitted" in note for note in public.omissions)


@pytest.mark.jsonl_only("reads or edits the stream file")
def test_ignored_private_state_may_reference_private_links_while_tracked_outputs_need_redaction(h: Harness) -> None:
    root = Path(h.root)
    subprocess.run(["git", "init", "-q", str(root)], check=True)
    (root / ".gitignore").write_text("ACTIVE_GOAL_STATE.md\n")
    h.run(g.AddTodo(goal_id="g", title="Reproduce /home/alice/crash.txt", privacy="local_private"))

    h.run(g.RenderMarkdown(goal_id="g"))  # ignored by git: the private workbench keeps the link
    assert "/home/alice/crash.txt" in (root / "ACTIVE_GOAL_STATE.md").read_text()

    h.run(g.RenderMarkdown(goal_id="g", target="docs/GOAL_STATE.md", public=True))
    tracked = (root / "docs" / "GOAL_STATE.md").read_text()
    assert "/home/alice" not in tracked and "[omitted: private]" in tracked and "title omitted" in tracked
    subprocess.run(["git", "-C", str(root), "add", "docs/GOAL_STATE.md"], check=True)  # now a commit would carry it

    size = len(h.stream_bytes("g"))
    with pytest.raises(LoopstateError) as refused:
        h.run(g.RenderMarkdown(goal_id="g", target="docs/GOAL_STATE.md"))
    assert refused.value.code is ErrorCode.PRIVACY_VIOLATION and "--public" in refused.value.message
    assert (root / "docs" / "GOAL_STATE.md").read_text() == tracked and len(h.stream_bytes("g")) == size


def test_an_untracked_workbench_in_a_git_repository_is_local_state(h: Harness) -> None:
    """`git status` shows ``?? ACTIVE_GOAL_STATE.md``: git does not carry it, so the private render is written."""
    root = Path(h.root)
    subprocess.run(["git", "init", "-q", str(root)], check=True)
    h.run(g.AddTodo(goal_id="g", title="Reproduce /home/alice/crash.txt", privacy="local_private"))
    h.run(g.RenderMarkdown(goal_id="g"))
    assert "/home/alice/crash.txt" in (root / "ACTIVE_GOAL_STATE.md").read_text()
    status = subprocess.run(["git", "-C", str(root), "status", "--porcelain"], capture_output=True, text=True).stdout
    assert "?? ACTIVE_GOAL_STATE.md" in status
