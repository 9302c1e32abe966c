"""Paging of the intent audit: limit and cursor, counts of what a page leaves out, cursors that
stay right across appends and are refused (clearly) when they do not fit; and the CLI's pages
through the real CLI in subprocesses."""

from __future__ import annotations

import json
import shlex
import subprocess
import sys
from pathlib import Path

import pytest

from intentkit import Intent
from loopstate.core.errors import LoopstateError
from loopstate_protocol import intent as p
from loopstate_protocol.errors import ErrorCode
from tests.conftest import store_env

LOOPSTATE = Path(sys.executable).parent / "loopstate"


def claims_of(it: Intent, count: int, *, prefix: str = "rule") -> tuple[str, list[str]]:
    task = it.start()
    return task, [it.add(task, f"{prefix} {n}") for n in range(count)]


def pages(it: Intent, task: str | None, limit: int) -> list[p.AuditView]:
    out, cursor = [], None
    while True:
        view = it.ask(p.IntentAudit(task_id=task, limit=limit, cursor=cursor))
        out.append(view)
        cursor = view.next_cursor
        if cursor is None:
            return out


def test_pages_cover_the_audit_once_in_ledger_order_with_counts(it: Intent) -> None:
    task, ids = claims_of(it, 7)
    other, _ = claims_of(it, 2, prefix="other")
    newer = it.replace(task, [ids[1]], "rule 1, revised")
    got = pages(it, task, 3)
    assert [len(v.claims) for v in got] == [3, 3, 2]
    assert [v.remaining for v in got] == [5, 2, 0]
    assert {v.total for v in got} == {8}
    assert [c.claim_id for v in got for c in v.claims] == [*ids, newer]
    assert [(e.new, e.old) for e in got[0].edges] == [(newer, ids[1])]  # the edge shows beside both ends' pages
    assert [(e.new, e.old) for e in got[2].edges] == [(newer, ids[1])]
    whole = it.ask(p.IntentAudit(task_id=task, limit=1000))
    assert (whole.remaining, whole.next_cursor) == (0, None) and len(whole.claims) == 8
    project = pages(it, None, 4)  # the project's audit pages across tasks, in ledger order
    assert [c.claim_id for v in project for c in v.claims] == [c.claim_id for c in it.ask(p.IntentAudit(limit=1000)).claims]
    assert project[0].total == 10 and other


def test_the_default_page_is_bounded_and_says_what_it_left_out(it: Intent) -> None:
    task, ids = claims_of(it, p.AUDIT_PAGE + 5)
    view = it.audit(task)
    assert len(view.claims) == p.AUDIT_PAGE and view.remaining == 5 and view.total == p.AUDIT_PAGE + 5
    rest = it.ask(p.IntentAudit(task_id=task, cursor=view.next_cursor))
    assert [c.claim_id for c in rest.claims] == ids[p.AUDIT_PAGE:]


def test_a_cursor_stays_right_across_appends(it: Intent) -> None:
    task, ids = claims_of(it, 4)
    first = it.ask(p.IntentAudit(task_id=task, limit=2))
    later = [it.add(task, f"later {n}") for n in range(3)]
    it.replace(task, [ids[0]], "rule 0, revised")  # a lifecycle change of a shown claim moves nothing
    second = it.ask(p.IntentAudit(task_id=task, limit=2, cursor=first.next_cursor))
    assert [c.claim_id for c in second.claims] == ids[2:4]
    third = it.ask(p.IntentAudit(task_id=task, limit=10, cursor=second.next_cursor))
    assert [c.claim_id for c in third.claims][:3] == later and third.remaining == 0


def refusal(it: Intent, **query) -> str:
    with pytest.raises(LoopstateError) as refused:
        it.ask(p.IntentAudit(**query))
    assert refused.value.code == ErrorCode.VALIDATION_FAILED
    return refused.value.message


def test_a_cursor_that_does_not_fit_is_refused_with_what_to_do(it: Intent) -> None:
    task, _ = claims_of(it, 5)
    other, _ = claims_of(it, 5, prefix="other")
    cursor = it.ask(p.IntentAudit(task_id=task, limit=2)).next_cursor
    assert "is not a cursor of a loopstate intent listing" in refusal(it, task_id=task, cursor="garbage")
    assert "pass the next_cursor of the page before, or no cursor for the first page" in refusal(it, task_id=task, cursor="x")
    assert f"was made for {task}, not for {other}" in refusal(it, task_id=other, cursor=cursor)
    assert "not for project" in refusal(it, cursor=cursor)
    assert "of intent.tasks, not of intent.audit" in refusal(it, task_id=task, cursor=cursor.replace(":audit:", ":tasks:"))
    assert "no longer matches" in refusal(it, task_id=task, cursor=cursor.replace(":2:", ":4:"))
    assert "no longer matches" in refusal(it, task_id=task, cursor=cursor.replace(":2:", ":99:"))
    for limit in (0, 1001, -1):
        assert "limit: " in refusal(it, task_id=task, limit=limit)


@pytest.mark.jsonl_only("purge rewrites the intent file; on PostgreSQL it is refused (tests/team/test_team_proofs_on_pg.py)")
def test_a_cursor_from_before_a_purge_that_removed_its_claim_is_refused(it: Intent) -> None:
    task, ids = claims_of(it, 5)
    cursor = it.ask(p.IntentAudit(task_id=task, limit=2)).next_cursor
    it.run(p.IntentPurge(target="claim", id=ids[1], confirm=True))
    assert "no longer matches the listing (a purge removed what it pointed at)" in refusal(it, task_id=task, cursor=cursor)


# --- through the real CLI ---------------------------------------------------------------------------


def cli(root: Path, data_dir: Path, *args: str) -> subprocess.CompletedProcess:
    env = {"LOOPSTATE_DATA_DIR": str(data_dir), "PATH": "/usr/bin:/bin", **store_env()}
    return subprocess.run([str(LOOPSTATE), *args, "--root", str(root)], capture_output=True, text=True, env=env, timeout=60)


def test_the_cli_pages_the_audit_and_prints_how_to_see_more(root: Path, data_dir: Path) -> None:
    started = json.loads(cli(root, data_dir, "intent", "start", "--claim", "rule zero", "--json").stdout)
    task = started["events"][0]["task_id"]
    for n in range(1, 5):
        assert cli(root, data_dir, "intent", "add", task, f"rule {n}").returncode == 0
    first = cli(root, data_dir, "intent", "audit", "--task", task, "--limit", "2")
    assert first.returncode == 0, first.stderr
    assert "rule zero" in first.stdout and "rule 1" in first.stdout and "rule 2" not in first.stdout
    more = first.stdout.strip().splitlines()[-1]
    assert more.startswith("3 more claim(s) not shown (5 in all); the next page: loopstate intent audit")
    command = shlex.split(more.split("the next page: ", 1)[1])
    assert command[:3] == ["loopstate", "intent", "audit"] and "--limit" in command
    second = cli(root, data_dir, *command[1:])  # the printed command, as a user would paste it
    assert second.returncode == 0, second.stderr
    assert "rule 2" in second.stdout and "rule 3" in second.stdout and "rule 1" not in second.stdout
    last = cli(root, data_dir, *shlex.split(second.stdout.strip().splitlines()[-1].split("the next page: ", 1)[1])[1:])
    assert "rule 4" in last.stdout and "more claim(s) not shown" not in last.stdout
    as_json = json.loads(cli(root, data_dir, "intent", "audit", "--task", task, "--limit", "4", "--json").stdout)
    assert (as_json["total"], as_json["remaining"], len(as_json["claims"])) == (5, 1, 4)
    tail = json.loads(cli(root, data_dir, "intent", "audit", "--task", task, "--cursor", as_json["next_cursor"], "--json").stdout)
    assert [c["statement"] for c in tail["claims"]] == ["rule 4"] and tail["next_cursor"] is None


def test_the_cli_refuses_a_bad_cursor_or_limit_with_a_clear_message(root: Path, data_dir: Path) -> None:
    task = json.loads(cli(root, data_dir, "intent", "start", "--claim", "rule zero", "--json").stdout)["events"][0]["task_id"]
    bad = cli(root, data_dir, "intent", "audit", "--task", task, "--cursor", "page-2")
    assert bad.returncode == 1 and bad.stdout == ""
    assert "VALIDATION_FAILED: cursor: 'page-2' is not a cursor of a loopstate intent listing" in bad.stderr
    assert "or no cursor for the first page" in bad.stderr
    limit = cli(root, data_dir, "intent", "audit", "--limit", "0")
    assert limit.returncode == 1 and "limit: 0 is out of range; give 1-1000" in limit.stderr
