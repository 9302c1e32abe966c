"""Pages of the intent snapshot (`intent show`, intent.snapshot) and the capped hook context.

The snapshot lists a bounded page of active claims in handoff order, with the
count of the active claims after it and the cursor of the next page; its
disagreements, stale warnings and ``active_count`` stay of every active claim.
Walked with the command the CLI prints, the pages list every active claim
exactly once, also when claims are added or retired between pages. The hook
context's text and counts are those of a first-fit walk of every claim in
handoff order, whatever the size of the task.
"""

from __future__ import annotations

import json
import shlex
import subprocess
import sys
from pathlib import Path

import msgspec
import pytest

from intentkit import Intent
from loopstate.core.clock import FixedClock
from loopstate.core.errors import LoopstateError
from loopstate_protocol import intent as p
from loopstate_protocol.errors import ErrorCode
from tests.conftest import store_env

LOOPSTATE = Path(sys.executable).parent / "loopstate"
NEXT = "the next page: "


def cli(root: Path, data_dir: Path, *args: str) -> subprocess.CompletedProcess:
    env = {"LOOPSTATE_DATA_DIR": str(data_dir), "PATH": "/usr/bin:/bin", **store_env()}
    return subprocess.run([str(LOOPSTATE), *args, "--root", str(root)], capture_output=True, text=True, env=env, timeout=60)


def mixed_task(it: Intent, clock: FixedClock, count: int) -> tuple[str, dict[str, str]]:
    """A task whose claims spread over the handoff order: the user's own words, agent inferences, unknowns,
    disputes and several facets, added a minute apart. Returns the task and statement -> claim id."""
    task = it.start()
    ids = {}
    kinds = [
        dict(actor="user", status="explicit", facets=("outcome",)),
        dict(actor="agent", status="inferred", facets=("soft_constraint", "tradeoff"), confidence=0.6),
        dict(actor="user", status="explicit", facets=("hard_constraint",)),
        dict(actor="agent", status="unknown", facets=("unknown",)),
        dict(actor="agent", status="disputed", facets=("disagreement",)),
    ]
    for n in range(count):
        clock.advance(60)
        statement = f"claim {n:03d}"
        ids[statement] = it.add(task, statement, **kinds[n % len(kinds)])
    return task, ids


def statements(view: dict) -> list[str]:
    """The page's claims once each (a claim of two facets is listed under both)."""
    seen = {c["claim_id"]: c["statement"] for by_status in view["by_facet"].values() for claims in by_status.values()
            for c in claims}
    return list(seen.values())


def shown_in_table(stdout: str) -> list[str]:
    return [line.split("  ")[-1] for line in stdout.splitlines() if line.split("  ")[-1].startswith("claim ")]


def printed_next(stdout: str) -> list[str] | None:
    """The next-page command the CLI printed, as argv without the program name (None on the last page)."""
    last = stdout.strip().splitlines()[-1]
    if NEXT not in last:
        return None
    argv = shlex.split(last.split(NEXT, 1)[1])
    assert argv[:3] == ["loopstate", "intent", "show"]
    return argv[1:]


# --- the query ------------------------------------------------------------------------------------


def test_the_query_takes_limit_and_cursor_with_a_bounded_default() -> None:
    assert msgspec.json.decode(b'{"kind":"intent.snapshot"}', type=p.IntentSnapshot) == p.IntentSnapshot(limit=100)
    query = msgspec.json.decode(b'{"kind":"intent.snapshot","task_id":"t","limit":7,"cursor":"c"}', type=p.IntentSnapshot)
    assert (query.task_id, query.limit, query.cursor) == ("t", 7, "c")
    with pytest.raises(msgspec.ValidationError):
        msgspec.json.decode(b'{"kind":"intent.snapshot","limits":7}', type=p.IntentSnapshot)


def test_pages_follow_handoff_order_and_count_what_they_leave_out(it: Intent, clock: FixedClock) -> None:
    task, ids = mixed_task(it, clock, 23)
    whole = it.ask(p.IntentSnapshot(task_id=task, limit=1000))
    assert (whole.active_count, whole.remaining, whole.next_cursor) == (23, 0, None)
    first = it.ask(p.IntentSnapshot(task_id=task, limit=4))
    assert (first.active_count, first.remaining) == (23, 19) and first.next_cursor
    # The user's own words come first: the first page holds none of the agent's claims.
    shown = {c.claim_id: c for by_status in first.by_facet.values() for claims in by_status.values() for c in claims}
    assert len(shown) == 4 and all(c.direct_user for c in shown.values())
    # Every open dispute is listed on every page, though the disputed claims sort last.
    assert len(first.disagreements) == len(whole.disagreements) == 4
    assert first.unknowns == [] and len(whole.unknowns) == 4
    walked, cursor, remaining = [], None, []
    while True:
        view = it.ask(p.IntentSnapshot(task_id=task, limit=4, cursor=cursor))
        walked += [c.claim_id for by_status in view.by_facet.values() for claims in by_status.values() for c in claims]
        remaining.append(view.remaining)
        cursor = view.next_cursor
        if cursor is None:
            break
    assert sorted(set(walked)) == sorted(ids.values())
    assert len(walked) == len(set(walked)) + 5  # only the five two-facet claims appear twice, each on one page
    assert remaining == [19, 15, 11, 7, 3, 0]


def test_a_walk_lists_every_claim_active_throughout_exactly_once_across_changes(it: Intent, clock: FixedClock) -> None:
    task, ids = mixed_task(it, clock, 12)
    first = it.ask(p.IntentSnapshot(task_id=task, limit=3))
    seen = [c.claim_id for by_status in first.by_facet.values() for claims in by_status.values() for c in claims]
    # Between pages: a claim that sorts before the cursor, one that sorts after it, and the cursor's own claim retired.
    early = it.add(task, "claim new, the user's", actor="user", status="explicit", facets=("hard_constraint",))
    late = it.add(task, "claim new, inferred", actor="agent", status="inferred", facets=("tradeoff",), confidence=0.5)
    last_shown = first.next_cursor.rsplit(":", 1)[1]
    it.run(p.IntentClaimInvalidate(task_id=task, claim_id=last_shown, actor="user", reason="changed my mind"))
    cursor = first.next_cursor
    while cursor is not None:
        view = it.ask(p.IntentSnapshot(task_id=task, limit=3, cursor=cursor))
        seen += [c.claim_id for by_status in view.by_facet.values() for claims in by_status.values() for c in claims]
        cursor = view.next_cursor
    unique = set(seen)
    assert set(ids.values()) <= unique and late in unique and early not in unique
    two_facets = {c for s, c in ids.items() if int(s.split()[1]) % 5 == 1}
    assert sorted(seen) == sorted([*unique, *two_facets])


def refusal(it: Intent, **query) -> str:
    with pytest.raises(LoopstateError) as refused:
        it.ask(p.IntentSnapshot(**query))
    assert refused.value.code == ErrorCode.VALIDATION_FAILED
    return refused.value.message


@pytest.mark.jsonl_only("purge rewrites the intent file; on PostgreSQL it is refused (tests/team/test_team_proofs_on_pg.py)")
def test_a_cursor_or_limit_that_does_not_fit_is_refused_with_what_to_do(it: Intent, clock: FixedClock) -> None:
    task, ids = mixed_task(it, clock, 6)
    other = it.start()
    cursor = it.ask(p.IntentSnapshot(task_id=task, limit=2)).next_cursor
    audit_cursor = it.ask(p.IntentAudit(task_id=task, limit=2)).next_cursor
    assert "is not a cursor of a loopstate intent listing" in refusal(it, task_id=task, cursor="garbage")
    assert "of intent.audit, not of intent.snapshot" in refusal(it, task_id=task, cursor=audit_cursor)
    assert f"was made for {task}, not for {other}" in refusal(it, task_id=other, cursor=cursor)
    assert "not for project" in refusal(it, cursor=cursor)
    assert "is not a cursor of a loopstate intent listing" in refusal(it, task_id=task, cursor=cursor.rsplit(":", 1)[0] + ":")
    for limit in (0, 1001, -1):
        assert f"limit: {limit} is out of range; give 1-1000" in refusal(it, task_id=task, limit=limit)
    it.run(p.IntentPurge(target="claim", id=cursor.rsplit(":", 1)[1], confirm=True))
    assert "ends at a claim this project no longer holds (a purge removed it)" in refusal(it, task_id=task, cursor=cursor)


# --- through the real CLI -------------------------------------------------------------------------


def test_the_printed_next_page_commands_walk_every_active_claim_once(
    it: Intent, clock: FixedClock, root: Path, data_dir: Path,
) -> None:
    task, ids = mixed_task(it, clock, 17)
    argv: list[str] | None = ["intent", "show", "--task", task, "--limit", "5"]
    pages = []
    while argv is not None:
        done = cli(root, data_dir, *argv)
        assert done.returncode == 0, done.stderr
        assert done.stdout.splitlines()[0].endswith(": 17 active claim(s)")  # the total, on every page
        pages.append(done.stdout)
        argv = printed_next(done.stdout)
    assert len(pages) == 4
    assert pages[0].strip().splitlines()[-1].startswith(f"12 more active claim(s) not shown; {NEXT}loopstate intent show")
    listed = [s for page in pages for s in dict.fromkeys(shown_in_table(page))]
    assert sorted(listed) == sorted(ids)
    assert all("open dispute: " in page for page in pages)  # the disputes, whatever page their claims are on


def test_show_json_pages_and_the_default_page_is_bounded(it: Intent, clock: FixedClock, root: Path, data_dir: Path) -> None:
    task, ids = mixed_task(it, clock, p.SNAPSHOT_PAGE + 3)
    first = json.loads(cli(root, data_dir, "intent", "show", "--task", task, "--json").stdout)
    assert (first["active_count"], first["remaining"], len(statements(first))) == (p.SNAPSHOT_PAGE + 3, 3, p.SNAPSHOT_PAGE)
    rest = json.loads(cli(root, data_dir, "intent", "show", "--task", task, "--cursor", first["next_cursor"], "--json").stdout)
    assert (rest["remaining"], rest["next_cursor"], len(statements(rest))) == (0, None, 3)
    assert sorted(statements(first) + statements(rest)) == sorted(ids)
    text = cli(root, data_dir, "intent", "show", "--task", task)
    assert text.stdout.strip().splitlines()[-1] == (
        f"3 more active claim(s) not shown; {NEXT}loopstate intent show --task {task} --cursor {first['next_cursor']}"
    )
    project = cli(root, data_dir, "intent", "show", "--limit", "1000")  # the project's view, all on one page
    assert NEXT not in project.stdout and sorted(dict.fromkeys(shown_in_table(project.stdout))) == sorted(ids)


def test_the_cli_refuses_a_bad_cursor_or_limit_clearly(it: Intent, clock: FixedClock, root: Path, data_dir: Path) -> None:
    task, _ = mixed_task(it, clock, 3)
    bad = cli(root, data_dir, "intent", "show", "--task", task, "--cursor", "page-2")
    assert bad.returncode == 1 and bad.stdout == ""
    assert "VALIDATION_FAILED: cursor: 'page-2' is not a cursor of a loopstate intent listing" in bad.stderr
    assert "or no cursor for the first page" in bad.stderr
    for limit in ("0", "1001"):
        refused = cli(root, data_dir, "intent", "show", "--limit", limit)
        assert refused.returncode == 1 and f"limit: {limit} is out of range; give 1-1000" in refused.stderr
    word = cli(root, data_dir, "intent", "show", "--limit", "many")
    assert word.returncode == 2 and "--limit: invalid int value: 'many'" in word.stderr


# --- the hook context -----------------------------------------------------------------------------


def first_fit(claims: list[p.ClaimView], max_chars: int) -> tuple[list[str], int]:
    """The hook context's lines by its rule, from the whole view: first fit in handoff order."""
    order = {f: i for i, f in enumerate(("hard_constraint", "outcome", "success_signal", "failure_signal",
                                         "disagreement", "unknown", "soft_constraint", "tradeoff", "result_feedback"))}
    used = len("User-stated intent (verbatim claims from the user's own messages):")
    ids, over = [], 0
    for claim in claims:
        line = f"- [{min(claim.facets, key=order.__getitem__)}] {claim.statement}"
        if used + 1 + len(line) > max_chars:
            over += 1
            continue
        ids.append(claim.claim_id)
        used += 1 + len(line)
    return ids, over


def test_the_hook_context_fills_its_budget_first_fit_and_counts_everything_else(
    it: Intent, clock: FixedClock, root: Path, data_dir: Path,
) -> None:
    task = it.start()
    for n in range(300):
        clock.advance(60)
        # Long and short statements interleaved: a short one still fits after a long one did not.
        words = f"rule {n} " + ("and a long explanation of it " * 4 if n % 3 else "")
        it.add(task, words.strip(), facets=("outcome",) if n % 2 else ("hard_constraint",))
        if n % 10 == 0:
            it.add(task, f"guess {n}", actor="agent", status="inferred", facets=("tradeoff",), confidence=0.4)
    whole = it.ask(p.IntentSnapshot(task_id=task, limit=1000))
    in_order = sorted(
        {c.claim_id: c for by_status in whole.by_facet.values() for claims in by_status.values() for c in claims}.values(),
        key=lambda c: (not c.direct_user, c.epistemic_status != "explicit",
                       0 if "hard_constraint" in c.facets else 1, c.valid_from, c.claim_id),
    )
    expected_ids, over = first_fit([c for c in in_order if c.direct_user], 1800)
    done = cli(root, data_dir, "intent", "hook-context", task, "--max-chars", "1800", "--json")
    assert done.returncode == 0, done.stderr
    hook = json.loads(done.stdout)
    assert hook["claim_ids"] == expected_ids
    assert hook["omitted"] == {"over_budget": over, "inferred": 30}
    assert len(hook["text"]) <= 1800 and len(hook["claim_ids"]) + sum(hook["omitted"].values()) == whole.active_count
