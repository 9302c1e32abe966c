"""The real `loopstate` CLI in a subprocess, against one project root and one data dir."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path
from typing import Any

from tests.conftest import REPO, env_for_child


class Cli:
    def __init__(self, root: Path, data_dir: Path) -> None:
        self.root = root
        self.data_dir = data_dir

    def __call__(self, *args: str, cwd: Path | None = None, root: bool = True) -> subprocess.CompletedProcess:
        argv = [sys.executable, "-m", "loopstate.cli.main", *args, *(["--root", str(self.root)] if root else [])]
        return subprocess.run(argv, capture_output=True, text=True, env=env_for_child(self.data_dir),
                              cwd=cwd or REPO, timeout=60)

    def ok(self, *args: str, **kw: Any) -> str:
        done = self(*args, **kw)
        assert done.returncode == 0, f"{args}: rc {done.returncode}\n{done.stderr}{done.stdout}"
        return done.stdout

    def json(self, *args: str, **kw: Any) -> Any:
        return json.loads(self.ok(*args, "--json", **kw))

    def refused(self, *args: str, **kw: Any) -> dict[str, Any]:
        """The error object of a command that must fail (exit 1, JSON error on stdout)."""
        done = self(*args, "--json", **kw)
        assert done.returncode == 1, f"{args}: rc {done.returncode}\n{done.stderr}{done.stdout}"
        return json.loads(done.stdout)["error"]

    # shorthands ---------------------------------------------------------------------------

    def create(self, *extra: str, asset: str = "app") -> str:
        return self.json("run", "create", "--objective", "ship it", "--done-gate", "tests pass", "--asset", asset,
                         *extra)["run_id"]

    def acquire(self, run_id: str, actor: str = "bot") -> list[str]:
        """Take the run's lease; returns the --lease/--generation flags, the lease given by an 8-character prefix."""
        lease = self.json("run", "acquire", run_id, "--harness", "codex", "--actor", actor)["events"][0]["projection"]["lease"]
        return ["--lease", lease["lease_id"][:8], "--generation", str(lease["generation"])]

    def status(self, run_id: str) -> dict[str, Any]:
        return self.json("run", "status", run_id)


def files_under(path: Path) -> list[str]:
    """Every file and folder below ``path`` (relative), or [] when it does not exist."""
    if not path.exists():
        return []
    return sorted(str(p.relative_to(path)) for p in path.rglob("*"))
