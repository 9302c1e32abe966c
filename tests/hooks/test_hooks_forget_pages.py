"""`/intent forget ID` finds its claim on any page of the session's view, not only the first.

The snapshot is paged (100 active claims by default, in handoff order): a claim
of the session that sorts after a page of others must still be forgotten by its
short id, through the real hook in a subprocess.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from hookkit import hook, host_input, loopstate, receipt_of
from loopstate_protocol import intent as p

from loopstate.service import Service


@pytest.fixture
def project(tmp_path: Path) -> Path:
    path = tmp_path / "proj"
    (path / ".git").mkdir(parents=True)
    return path


def test_forget_finds_a_claim_past_the_first_page_of_the_view(project: Path, data_dir: Path) -> None:
    def prompt(text: str, turn: str) -> str:
        out = hook("claude", "UserPromptSubmit", host_input("claude", "UserPromptSubmit", project, "sess-f", prompt=text,
                                                            turn_id=turn), data_dir=data_dir, cwd=project)
        return receipt_of("claude", out)

    remembered = prompt("/intent remember the parser keeps the old format", "turn-1")
    claim = remembered.rsplit("(claim ", 1)[1][:8]
    tasks = json.loads(loopstate("intent", "tasks", "--json", cwd=project, data_dir=data_dir).stdout)["tasks"]
    task = tasks[0]["task_id"]
    service = Service(data_dir=data_dir)
    for n in range(p.SNAPSHOT_PAGE + 5):  # hard constraints of the user's own: they sort before the outcome
        service.execute(str(project), p.IntentClaimAdd(task_id=task, actor="user", claim=p.ClaimInput(
            statement=f"limit {n}", role="user", epistemic_status="explicit", facets=["hard_constraint"])), f"lim-{n}")
    first = json.loads(loopstate("intent", "show", "--task", task, "--json", cwd=project, data_dir=data_dir).stdout)
    assert first["remaining"] > 0 and claim not in json.dumps(first["by_facet"])
    assert prompt(f"/intent forget {claim}", "turn-2").startswith(f"loopstate: forgot claim {claim}")
    audit = json.loads(loopstate("intent", "audit", "--task", task, "--limit", "1000", "--json", cwd=project,
                                 data_dir=data_dir).stdout)
    assert [c["state"] for c in audit["claims"] if c["claim_id"].startswith(claim)] == ["invalidated"]
