"""Text in the store cannot drive the reader's terminal, and typed arguments cannot put control characters there.

The store is seeded through the service, as a sidecar or MCP client could
write it; then the real CLI prints it on a pseudo-terminal (escapes shown
visibly) and into a pipe (bytes as stored, so scripts see what was written).
"""

from __future__ import annotations

import os
from pathlib import Path

from clirun import cli
from clirun import on_a_terminal as seen_on_a_terminal
from loopstate_protocol import intent as p
from loopstate_protocol import runs as r

from loopstate.domains.runs import run_id_for_request
from loopstate.service.engine import Service

ESCAPE = "\x1b]0;pwned\x07\x1b[31mred\x1b[0m"


def seed(root: Path, data_dir: Path) -> str:
    service = Service(data_dir=data_dir)
    service.execute(str(root), p.IntentTaskStart(initial_claims=[p.ClaimInput(
        statement=f"Keep the API {ESCAPE}", role="user", epistemic_status="explicit", facets=["outcome"])]), "seed-1")
    created = service.execute(str(root), r.Create(
        run_id=run_id_for_request("seed-2"), objective=f"ship {ESCAPE}", done_gate=["tests pass"],
        asset={"name": "app", "root": ".", "track": "code", "boundaries": ["repository-local files only"]},
        actor={"harness": "manual", "actor": "alice", "session_id": "cli"}), "seed-2")
    return created.events[0]["run_id"]


def on_a_terminal(argv: list[str], root: Path, data_dir: Path) -> bytes:
    """Run the CLI with stdout and stderr on a pty; everything it wrote there."""
    # NO_COLOR: loopstate's own colours are escape sequences too; with them off, any escape seen came from the store.
    env = {**os.environ, "LOOPSTATE_DATA_DIR": str(data_dir), "NO_COLOR": "1", "LOOPSTATE_NO_PAGER": "1"}
    return seen_on_a_terminal(argv, root, env)


def test_stored_escapes_are_shown_not_obeyed_on_a_terminal_and_kept_in_a_pipe(tmp_path: Path) -> None:
    root, data_dir = tmp_path / "proj", tmp_path / "data"
    root.mkdir()
    seed(root, data_dir)
    for argv, needle in ((["intent", "show"], "Keep the API"), (["intent", "audit"], "Keep the API"),
                         (["run", "list"], "ship")):
        shown = on_a_terminal(argv, root, data_dir)
        assert needle.encode() in shown, (argv, shown)
        assert b"\x1b" not in shown and b"\x07" not in shown, (argv, shown)
        assert b"\\x1b]0;pwned\\x07" in shown, (argv, shown)
        piped = cli(*argv, cwd=root, data_dir=data_dir)
        assert piped.returncode == 0 and ESCAPE in piped.stdout, (argv, piped)  # the control: bytes as stored


def test_a_typed_argument_with_a_control_character_is_refused_and_writes_nothing(tmp_path: Path) -> None:
    root, data_dir = tmp_path / "proj", tmp_path / "data"
    root.mkdir()
    for argv in (("intent", "start", "--claim", "outcome:\x1b[31mX\x07"),
                 ("run", "create", "--objective", "\x1b[31m..", "--done-gate", "t", "--asset", "app"),
                 ("goals", "add", "g", "bell\x07")):
        done = cli(*argv, cwd=root, data_dir=data_dir)
        assert done.returncode == 1, done
        assert "INVALID_PARAMS" in done.stderr and "control character" in done.stderr, done.stderr
        assert "\x1b" not in done.stderr
    assert not data_dir.exists() or not list(data_dir.rglob("*.jsonl"))
    ok = cli("intent", "start", "--claim", "outcome:a claim\twith a tab", cwd=root, data_dir=data_dir)
    assert ok.returncode == 0, ok.stderr  # tabs and newlines are text
