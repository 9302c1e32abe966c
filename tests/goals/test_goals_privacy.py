"""The privacy boundary: what public_safe events may hold, and public projections."""

from __future__ import annotations

import json

import msgspec
import pytest
from goalkit import Harness

from loopstate_protocol import goals as g
from loopstate_protocol.errors import ErrorCode

from loopstate.core.errors import LoopstateError
from loopstate.domains.goals.privacy import find_local_path, scrub

HOME_PATH = "/home/alice/work/payments/secrets.env"
API_KEY = "sk-FAKEtestFAKEtestFAKEtest1234"
PRIVATE_BODY = "PRIVATE-BODY: the customer's contract clause 7 reads ..."


@pytest.mark.jsonl_only("reads or edits the stream file")
def test_a_public_projection_of_a_stream_holding_a_home_path_an_api_key_and_a_private_body_contains_none(h: Harness) -> None:
    h.run(g.AddTodo(goal_id="g", title=f"Rotate the key in {HOME_PATH}", privacy="local_private",
                    details=PRIVATE_BODY, metadata={"key": API_KEY}))
    h.run(g.UpdateTodo(goal_id="g", todo_id="T001", details=f"{PRIVATE_BODY} (again)", privacy="local_private"))
    h.run(g.BlockTodo(goal_id="g", todo_id="T001", reason=f"api_key={API_KEY} leaked", privacy="local_private"))
    h.run(g.AddTodo(goal_id="g", title="A public todo", metadata={"area": "ops"}))
    raw = h.stream_bytes("g").decode()
    assert HOME_PATH in raw and API_KEY in raw and PRIVATE_BODY in raw  # the stream does hold them
    public_board = h.ask(g.GetBoard(goal_id="g", public=True))
    from_view = h.service.view(h.root, "goals", "public_board", "g")[1]
    texts = [json.dumps(msgspec.to_builtins(public_board)), json.dumps(msgspec.to_builtins(from_view)),
             h.ask(g.PreviewMarkdown(goal_id="g", public=True)).text]
    for text in texts:
        for secret in (HOME_PATH, "/home/alice", API_KEY, PRIVATE_BODY, "PRIVATE-BODY"):
            assert secret not in text
    # What is public stays, with notes for what was left out.
    titles = [t.title for grp in public_board.active for t in grp.todos]
    assert titles == ["[omitted: private]", "A public todo"]
    assert "todo T001: details omitted (private material stays local)" in public_board.omissions
    assert "todo T001: blocker_reason omitted (private record)" in public_board.omissions


@pytest.mark.parametrize("command, field", [
    (g.AddTodo(goal_id="g", title=f"look at {HOME_PATH}"), "payload.title"),
    (g.AddTodo(goal_id="g", title="x", metadata={"token": API_KEY}), "payload.metadata"),
    (g.AddTodo(goal_id="g", title="see C:\\Users\\alice\\notes.txt"), "payload.title"),
    (g.RecordRefresh(goal_id="g", summary="synced ~/private/notes"), "payload.summary"),
    (g.RecordRun(goal_id="g", run_id="r1", status="ok", summary="Authorization: Bearer abcdefghijklmnopqrstuvwxyz"),
     "payload.summary"),
    (g.AddTodo(goal_id="g", title="x", refs={"pr": "file:///home/alice/pr.diff"}), "refs.pr"),
])
def test_a_public_safe_event_refuses_local_paths_and_credentials(h: Harness, command, field: str) -> None:
    with pytest.raises(LoopstateError) as refused:
        h.run(command)
    assert refused.value.code is ErrorCode.PRIVACY_VIOLATION
    assert refused.value.details["field"].startswith(field) and "local_private" in refused.value.message
    assert not h.stream_path("g").exists()


def test_private_bodies_need_a_local_private_record_and_pointers_a_private_pointer_record(h: Harness) -> None:
    for command, code in (
        (g.AddTodo(goal_id="g", title="x", details="body"), ErrorCode.PRIVACY_VIOLATION),
        (g.AddTodo(goal_id="g", title="x", details="body", privacy="private_pointer", pointer="vault:1"),
         ErrorCode.PRIVACY_VIOLATION),
        (g.AddTodo(goal_id="g", title="x", pointer="vault:1"), ErrorCode.PRIVACY_VIOLATION),
        (g.AddTodo(goal_id="g", title="x", privacy="private_pointer"), ErrorCode.VALIDATION_FAILED),
        (g.AddTodo(goal_id="g", title=f"x {HOME_PATH}", privacy="private_pointer", pointer="vault:1"),
         ErrorCode.PRIVACY_VIOLATION),
    ):
        with pytest.raises(LoopstateError) as refused:
            h.run(command)
        assert refused.value.code is code
    h.run(g.AddTodo(goal_id="g", title="x", privacy="private_pointer", pointer=HOME_PATH))
    public = h.ask(g.GetBoard(goal_id="g", public=True))
    assert public.active[0].todos[0].title == "x" and public.active[0].todos[0].pointer is None
    assert h.ask(g.GetBoard(goal_id="g")).active[0].todos[0].pointer == HOME_PATH


def test_a_public_record_changed_by_a_private_one_shows_the_omission_not_the_old_value(h: Harness) -> None:
    h.run(g.AddTodo(goal_id="g", title="public title"))
    h.run(g.UpdateTodo(goal_id="g", todo_id="T001", title="renamed with client name ACME", privacy="local_private"))
    public = h.ask(g.GetBoard(goal_id="g", public=True)).active[0].todos[0]
    assert public.title == "[omitted: private]"
    h.run(g.UpdateTodo(goal_id="g", todo_id="T001", title="public again"))
    assert h.ask(g.GetBoard(goal_id="g", public=True)).active[0].todos[0].title == "public again"


@pytest.mark.parametrize("text, found", [
    ("see /home/bob/x.txt now", "/home/bob/x.txt"),
    ("open /Users/carol/Library", "/Users/carol/Library"),
    ("~/notes/today.md", "~/notes/today.md"),
    ("file:///etc/passwd", "file:///etc/passwd"),
    ("D:\\work\\repo", "D:\\work\\repo"),
    ("in /tmp/build-1/out.log", "/tmp/build-1/out.log"),
    ("https://example.com/home/page", None),
    ("ratio 1/2 and docs/goals.md", None),
    ("pr#41 and tests/privacy smoke", None),
    ("roughly ~5/10 done", None),
    ("~bob/src/app.py", "~bob/src/app.py"),
])
def test_local_absolute_paths_are_recognised_and_urls_and_relative_paths_are_not(text: str, found: str | None) -> None:
    assert find_local_path(text) == found


def test_scrub_removes_paths_and_credentials_and_says_which() -> None:
    clean, kinds = scrub(f"key {API_KEY} at {HOME_PATH}")
    assert API_KEY not in clean and HOME_PATH not in clean
    assert "local_path" in kinds and "openai_key" in kinds


@pytest.mark.parametrize("text, kind", [
    ("Traceback (most recent call last):", "raw log"),
    ("worker 12:00:01 ERROR crashed in replay", "raw log"),
    ("[2026-03-02T12:00:00Z] WARN lease lost", "raw log"),
    ("at com.acme.Worker.run(Worker.java:42)", "raw log"),
    ("User: keep this between us Assistant: sure", "raw chat transcript"),
    ('{"role": "user", "content": "the contract says"}', "raw chat transcript"),
    ("<|im_start|>system you are", "raw chat transcript"),
])
def test_a_public_safe_event_refuses_raw_logs_and_transcripts(h: Harness, text: str, kind: str) -> None:
    with pytest.raises(LoopstateError) as refused:
        h.run(g.RecordRefresh(goal_id="g", summary=text))
    assert refused.value.code is ErrorCode.PRIVACY_VIOLATION and kind in refused.value.message
    assert "local_private" in refused.value.message and not h.stream_path("g").exists()
    h.run(g.RecordRefresh(goal_id="g", summary=text, privacy="local_private"))
    public = h.ask(g.GetBoard(goal_id="g", public=True))
    assert text not in json.dumps(msgspec.to_builtins(public))
    assert text not in h.ask(g.PreviewMarkdown(goal_id="g", public=True)).text


@pytest.mark.parametrize("text", [
    "Fix the ERROR handling in replay", "user story: resume after a crash", "release at 10:00 today",
    "document the INFO level",
])
def test_ordinary_compact_text_is_not_mistaken_for_a_log_or_transcript(h: Harness, text: str) -> None:
    h.run(g.AddTodo(goal_id="g", title=text))
    assert h.ask(g.GetBoard(goal_id="g", public=True)).active[0].todos[0].title == text


def test_scrub_replaces_a_raw_log_as_a_whole() -> None:
    assert scrub("12:00:01 ERROR token=abcdefgh1234 at /home/alice/x") == ("[omitted: raw log]", ["raw_log"])


def test_mac_volume_paths_are_local_paths() -> None:
    assert find_local_path("backup on /Volumes/Work/acme") == "/Volumes/Work/acme"


def test_a_role_chosen_in_a_private_record_is_not_shown_publicly(h: Harness) -> None:
    h.run(g.AddTodo(goal_id="g", title="review the ACME contract", role="acme-legal", privacy="local_private"))
    h.run(g.AddTodo(goal_id="g", title="public work", role="ops"))
    h.run(g.AddTodo(goal_id="g", title="x", privacy="local_private"))
    h.run(g.UpdateTodo(goal_id="g", todo_id="T003", role="acme-sales", privacy="local_private"))
    public = h.ask(g.GetBoard(goal_id="g", public=True))
    texts = [json.dumps(msgspec.to_builtins(public)), h.ask(g.PreviewMarkdown(goal_id="g", public=True)).text]
    for text in texts:
        assert "acme" not in text.lower()
    assert sorted(grp.role for grp in public.active) == ["[omitted: private]", "ops"]
    assert "todo T001: role omitted (private record)" in public.omissions
    assert sorted(grp.role for grp in h.ask(g.GetBoard(goal_id="g")).active) == ["acme-legal", "acme-sales", "ops"]


@pytest.mark.parametrize("envelope, field", [
    ({"event_id": "ghp_abcdefghijklmnopqrstuvwxyz0123456789"}, "envelope.event_id"),
    ({"producer": "sk-FAKEtestFAKEtestFAKEtest1234"}, "envelope.producer"),
])
def test_envelope_ids_may_not_be_credentials_even_in_private_records(h: Harness, envelope: dict, field: str) -> None:
    with pytest.raises(LoopstateError) as refused:
        h.run(g.AddTodo(goal_id="g", title="x", privacy="local_private", **envelope))
    assert refused.value.code is ErrorCode.PRIVACY_VIOLATION and refused.value.details["field"] == field
    assert not h.stream_path("g").exists()
