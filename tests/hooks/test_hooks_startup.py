"""What a tool-call hook imports: nothing of the domains, the engine or a ledger when nothing can deny.

PreToolUse runs before every tool call, so its common path (no run bound, no
kill switch) must stay a probe of a few files. The registration that
`loopstate setup` writes runs exactly `loopstate hook HOST EVENT`.
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

from hookkit import hook, host_input

PROBE = ("import json, sys\n"
         "from loopstate.cli.main import main  # as the console script does\n"
         "try:\n    main()\n"
         "except SystemExit:\n    pass\n"
         "sys.stderr.write('\\nMODULES ' + json.dumps(sorted(sys.modules)))\n")


def test_the_common_tool_call_path_loads_no_domain_and_no_ledger(tmp_path: Path, data_dir: Path) -> None:
    project = tmp_path / "proj"
    (project / ".git").mkdir(parents=True)
    hook("claude", "SessionStart", host_input("claude", "SessionStart", project, "s"), data_dir=data_dir, cwd=project)
    payload = json.dumps(host_input("claude", "PreToolUse", project, "s"))
    done = subprocess.run([sys.executable, "-c", PROBE, "hook", "claude", "PreToolUse"], input=payload, cwd=project,
                          capture_output=True, text=True, timeout=60, env={"LOOPSTATE_DATA_DIR": str(data_dir),
                                                                            "PATH": "/usr/bin:/bin"})
    assert json.loads(done.stdout) == {"continue": True}
    modules = set(json.loads(done.stderr.rsplit("MODULES ", 1)[1]))
    heavy = {m for m in modules if m.startswith(("loopstate.domains.intent", "loopstate.domains.runs",
                                                 "loopstate.domains.goals", "loopstate_protocol.intent",
                                                 "loopstate_protocol.runs", "loopstate_protocol.goals"))}
    assert heavy == set()
    assert not modules & {"loopstate.service.engine", "loopstate.core.ledger", "loopstate.core.stream",
                          "loopstate.service.intent_effects", "loopstate.service.runs_effects"}
