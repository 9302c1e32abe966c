"""Run the real `loopstate` CLI in a subprocess, from a chosen directory, with a private data dir."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path


def cli(*args: str, cwd: Path, data_dir: Path | None, env: dict[str, str] | None = None,
        stdin: str | None = None) -> subprocess.CompletedProcess[str]:
    base = {k: v for k, v in os.environ.items() if k not in ("LOOPSTATE_DATA_DIR", "CODEX_HOME", "PLUGIN_DATA")}
    if data_dir is not None:
        base["LOOPSTATE_DATA_DIR"] = str(data_dir)
    return subprocess.run([sys.executable, "-m", "loopstate.cli.main", *args], cwd=cwd, env={**base, **(env or {})},
                          capture_output=True, text=True, timeout=120, input=stdin)
