"""A private Codex install for one test: HOME, CODEX_HOME, a project, the model server, and `codex exec` run in it.

The user's own ``$CODEX_HOME/config.toml`` names the scripted model server as a
custom provider (``mock``, the Responses wire API) and a model Codex has
metadata for (``gpt-5.5``: with an unknown model Codex offers no
``tool_search``, which is how it reaches MCP tools). Setup is then run as a
user runs it, through the real CLI, and merges into that file. Nothing of
the machine's own Codex or loopstate state is read: HOME, CODEX_HOME and the
project are under the test's tmp_path, and no LOOPSTATE_DATA_DIR is set unless
a test sets one, so the store is where Codex's environment puts it
(``$CODEX_HOME/plugin-data/loopstate/v1``).
"""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
import time
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Iterator

from tests.hosts.conftest import CODEX
from dialect_openai import DIALECTS
from modelserver import ModelServer, ToolCall

MODEL = "gpt-5.5"
API_KEY_VARIABLE = "LOOPSTATE_TEST_MODEL_KEY"
EXEC_TIMEOUT = 120
HOOK_LINE = re.compile(r"^hook: (\w+)(?: (\w+))?\s*$", re.M)


def provider_config(url: str) -> str:
    """The user's config.toml before setup: the model server as Codex's provider."""
    return (f'model = "{MODEL}"\nmodel_provider = "mock"\n\n[model_providers.mock]\nname = "mock"\n'
            f'base_url = "{url}/v1"\nwire_api = "responses"\nenv_key = "{API_KEY_VARIABLE}"\n')


@dataclass
class Session:
    """One finished `codex exec`: its exit code, output, and the hook runs its stderr reports."""

    returncode: int
    stdout: str
    stderr: str
    seconds: float

    @property
    def hooks(self) -> list[tuple[str, str | None]]:
        """(event, None) for ``hook: EVENT`` (started) and (event, outcome) for ``hook: EVENT Completed|Blocked``."""
        return [(m.group(1), m.group(2)) for m in HOOK_LINE.finditer(self.stderr)]

    def ran(self, event: str) -> bool:
        return (event, None) in self.hooks


@dataclass
class CodexKit:
    base: Path
    server: ModelServer
    home: Path = field(init=False)
    codex_home: Path = field(init=False)
    project: Path = field(init=False)
    extra_env: dict[str, str] = field(default_factory=dict)

    def __post_init__(self) -> None:
        self.home = self.base / "home"
        self.codex_home = self.base / "codex-home"
        self.project = self.base / "home" / "work" / "app"
        for folder in (self.home, self.codex_home, self.project):
            folder.mkdir(parents=True, exist_ok=True)
        subprocess.run(["git", "init", "-q", str(self.project)], check=True)
        self.config.write_text(provider_config(self.server.url), encoding="utf-8")

    @property
    def config(self) -> Path:
        return self.codex_home / "config.toml"

    @property
    def data_dir(self) -> Path:
        return Path(self.extra_env.get("LOOPSTATE_DATA_DIR") or self.codex_home / "plugin-data" / "loopstate" / "v1")

    def env(self) -> dict[str, str]:
        """What a user's shell would hold: PATH, a private HOME and CODEX_HOME, the provider's key."""
        env = {"PATH": os.environ.get("PATH", "/usr/bin:/bin"), "HOME": str(self.home), "CODEX_HOME": str(self.codex_home),
               API_KEY_VARIABLE: "test-key", "LANG": "C.UTF-8", "NO_COLOR": "1"}
        env.update(self.extra_env)
        return env

    def loopstate(self, *args: str, expect: int | None = 0, stdin: str | None = None) -> subprocess.CompletedProcess[str]:
        """The loopstate CLI as the user runs it, in the project (the venv's console script, as setup registers)."""
        done = subprocess.run([sys.executable, "-m", "loopstate.cli.main", *args], cwd=self.project, env=self.env(),
                              capture_output=True, text=True, timeout=120, input=stdin)
        if expect is not None:
            assert done.returncode == expect, (args, done.returncode, done.stdout, done.stderr)
        return done

    def setup(self, *extra: str) -> subprocess.CompletedProcess[str]:
        return self.loopstate("setup", "apply", "--host", "codex", "--mcp", *extra)

    def exec(self, prompt: str, *extra: str, resume: str | None = None) -> Session:
        """One `codex exec` turn in the project, as a user runs it non-interactively."""
        argv = [str(CODEX), "exec", "--skip-git-repo-check", "--dangerously-bypass-approvals-and-sandbox", *extra]
        argv += ["resume", resume, prompt] if resume else [prompt]
        started = time.monotonic()
        done = subprocess.run(argv, cwd=self.project, env=self.env(), capture_output=True, text=True,
                              timeout=EXEC_TIMEOUT, stdin=subprocess.DEVNULL)
        return Session(done.returncode, done.stdout, done.stderr, time.monotonic() - started)

    def hooks_list(self) -> list[dict]:
        """Codex's own report of its hooks: `codex app-server`'s ``hooks/list`` for the project."""
        proc = subprocess.Popen([str(CODEX), "app-server"], cwd=self.project, env=self.env(), stdin=subprocess.PIPE,
                                stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True)
        try:
            def send(message: dict) -> None:
                proc.stdin.write(json.dumps(message) + "\n")
                proc.stdin.flush()

            def answer(request_id: int) -> dict:
                while True:
                    line = proc.stdout.readline()
                    assert line, "codex app-server closed its stdout without answering"
                    message = json.loads(line)
                    if message.get("id") == request_id:
                        assert "result" in message, message
                        return message["result"]

            send({"jsonrpc": "2.0", "id": 0, "method": "initialize",
                  "params": {"clientInfo": {"name": "loopstate-tests", "version": "1"}}})
            answer(0)
            send({"jsonrpc": "2.0", "method": "initialized"})
            send({"jsonrpc": "2.0", "id": 1, "method": "hooks/list", "params": {"cwds": [str(self.project)]}})
            return answer(1)["data"][0]["hooks"]
        finally:
            proc.kill()
            proc.wait()


@contextmanager
def codex_kit(tmp_path: Path, script: list | None = None) -> Iterator[CodexKit]:
    """A kit whose model server runs for the ``with`` block; ``kit.server.script`` can be set later."""
    with ModelServer(DIALECTS, script=list(script or [])) as server:
        yield CodexKit(tmp_path, server)


def shell(cmd: str, call_id: str = "") -> ToolCall:
    """The model asks Codex to run a shell command (Codex 0.171's shell tool is ``exec_command``)."""
    return ToolCall("exec_command", {"cmd": cmd}, call_id)
