"""Rewrite a project's intent history as an attacker with loopstate's code would, for the extension's tests.

Changes the statement of the stream's second event, re-seals the whole stream so its hash
chain is whole again and drops the store's verification caches: what
tests/cli/test_cli_transparency.py's ``reseal`` does (imported from there, so there is one
attacker). Only a checkpoint signed before, and the witness's memory of it, can tell.
Usage: python rewrite_history.py PROJECT_ROOT (LOOPSTATE_DATA_DIR names the store).
"""

import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[4]
sys.path.insert(0, str(REPO))

from loopstate.core.project import Project  # noqa: E402
from tests.cli.test_cli_transparency import events_of, reseal  # noqa: E402

path = Project(Path(sys.argv[1])).dir / "streams" / "intent.jsonl"
events = events_of(path)
events[1]["payload"]["claim"]["statement"] = "Never said"
reseal(path, events)
print(f"rewrote event 2 of {path} and re-sealed {len(events)} events")
