"""Drive the real Claude Code CLI through whole sessions against the scripted model server.

A ``ClaudeHome`` is a private HOME, ``CLAUDE_CONFIG_DIR``, project (a git work
tree) and loopstate data dir. ``loopstate(...)`` runs this checkout's real
``loopstate`` console script there (so ``setup apply`` registers the program a
user's install would), and ``session(...)`` runs one turn of ``claude -p PROMPT
--output-format stream-json --verbose --include-hook-events`` against a fresh
``ModelServer`` playing the given script, and returns what the host printed
(its stream, including its own report of each hook it ran) and every request
it sent the model.

The environment is only what a user's shell would hold plus the settings that
keep the host offline and quiet: ``ANTHROPIC_BASE_URL`` (the model server),
``ANTHROPIC_API_KEY`` (any), ``DISABLE_AUTOUPDATER``,
``CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC``, ``DISABLE_TELEMETRY``. Tests run
as root, where ``--dangerously-skip-permissions`` is refused, so the tools a
script calls are allowed with ``--allowedTools``.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import dialect_anthropic
from modelserver import ModelServer, Recorded, Step

from tests.hosts.conftest import CLAUDE

LOOPSTATE = Path(sys.executable).parent / "loopstate"  # this checkout's console script, as pip installed it
SESSION_TIMEOUT = 120


@dataclass
class Session:
    """One ``claude -p`` run: its stream-json lines, the model requests, its wall time."""

    lines: list[dict[str, Any]]
    requests: list[Recorded]
    wall: float
    returncode: int
    stderr: str
    extra_requests: int

    @property
    def init(self) -> dict[str, Any]:
        return next(o for o in self.lines if o.get("type") == "system" and o.get("subtype") == "init")

    @property
    def session_id(self) -> str:
        return self.init["session_id"]

    def hooks(self, event: str) -> list[dict[str, Any]]:
        """The host's own report of each hook it ran for ``event`` (its ``hook_response`` lines)."""
        return [o for o in self.lines if o.get("subtype") == "hook_response" and o.get("hook_event") == event]

    def hook_outputs(self, event: str) -> list[dict[str, Any]]:
        """What loopstate's hook printed for ``event``, as the host received it (parsed)."""
        return [json.loads(o["stdout"]) for o in self.hooks(event) if o.get("stdout", "").startswith("{")]

    def informational(self) -> list[str]:
        """The notices the host shows the user (``systemMessage``, blocks, stops)."""
        return [o["content"] for o in self.lines if o.get("subtype") == "informational"]

    def sent(self, index: int) -> str:
        """Request ``index``'s messages, as JSON text (where the injected context and tool results are)."""
        return json.dumps(self.requests[index].body.get("messages"))

    def tool_results(self, index: int) -> list[dict[str, Any]]:
        """The tool_result blocks request ``index`` added: the results of the turn before, in the messages after
        its last assistant message (the host may put a note of its own after them, such as the MCP tools that
        became available meanwhile)."""
        messages = self.requests[index].body.get("messages", [])
        last_turn = max((n for n, m in enumerate(messages) if m.get("role") == "assistant"), default=-1)
        return [block for m in messages[last_turn + 1:] if isinstance(m.get("content"), list)
                for block in m["content"] if block.get("type") == "tool_result"]

    def tools_offered(self, index: int = 0) -> list[str]:
        return [tool["name"] for tool in self.requests[index].body.get("tools", [])]


@dataclass
class ClaudeHome:
    base: Path
    home: Path = field(init=False)
    config: Path = field(init=False)
    project: Path = field(init=False)
    data: Path = field(init=False)

    def __post_init__(self) -> None:
        self.home, self.config = self.base / "home", self.base / "claude-config"
        self.project, self.data = self.home / "work" / "app", self.base / "data"
        (self.project / ".git").mkdir(parents=True)
        self.config.mkdir()

    def env(self, **extra: str) -> dict[str, str]:
        path = os.pathsep.join([str(LOOPSTATE.parent), "/usr/local/bin", "/usr/bin", "/bin"])
        return {"PATH": path, "HOME": str(self.home), "CLAUDE_CONFIG_DIR": str(self.config),
                "LOOPSTATE_DATA_DIR": str(self.data), "LANG": "C.UTF-8", **extra}

    def loopstate(self, *args: str, expect: int | None = 0, **extra: str) -> subprocess.CompletedProcess[str]:
        done = subprocess.run([str(LOOPSTATE), *args], cwd=self.project, env=self.env(**extra), capture_output=True,
                              text=True, timeout=120)
        if expect is not None:
            assert done.returncode == expect, (args, done.returncode, done.stdout, done.stderr)
        return done

    def json_doctor(self, expect: int = 0) -> dict[str, Any]:
        """``loopstate doctor --host claude --json`` in this environment (the host's CLI on its PATH)."""
        path = os.pathsep.join([str(CLAUDE.parent), self.env()["PATH"]])
        return json.loads(self.loopstate("doctor", "--host", "claude", "--json", expect=expect, PATH=path).stdout)

    def session(self, prompt: str, script: list[list[Step]], *, allowed: str = "Bash", resume: str | None = None,
                **extra: str) -> Session:
        with ModelServer({dialect_anthropic.MESSAGES_PATH: dialect_anthropic.stream}, script=script) as server:
            env = self.env(ANTHROPIC_BASE_URL=server.url, ANTHROPIC_API_KEY="sk-loopstate-test",
                           DISABLE_AUTOUPDATER="1", CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC="1",
                           DISABLE_TELEMETRY="1", **extra)
            argv = [str(CLAUDE), "-p", prompt, "--output-format", "stream-json", "--verbose",
                    "--include-hook-events", "--allowedTools", allowed, *(["--resume", resume] if resume else [])]
            start = time.monotonic()
            done = subprocess.run(argv, cwd=self.project, env=env, capture_output=True, text=True,
                                  timeout=SESSION_TIMEOUT, stdin=subprocess.DEVNULL)
            wall = time.monotonic() - start
            requests = server.model_requests()
        lines = [json.loads(line) for line in done.stdout.splitlines() if line.startswith("{")]
        assert done.returncode == 0, (done.returncode, done.stdout[-3000:], done.stderr[-3000:])
        return Session(lines, requests, wall, done.returncode, done.stderr, server.extra_requests)

    def files(self) -> dict[str, bytes]:
        """Every file under the home and the Claude config folder, with its bytes (the user's side of setup)."""
        return {str(p.relative_to(self.base)): p.read_bytes() for top in (self.home, self.config)
                for p in sorted(top.rglob("*")) if p.is_file()}
