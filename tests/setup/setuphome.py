"""A synthetic home (HOME, a project, a data dir) holding other tools' hooks and comments, and the real CLI run in it."""

from __future__ import annotations

import json
import os
import stat
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path

# Another tool's hooks in the user's own layout: 4-space indent, a one-line group, non-ASCII text, no final newline.
CLAUDE_SETTINGS = """{
    "model": "opus",
    "statusLine": {"type": "command", "command": "echo \u00e9t\u00e9"},
    "hooks": {
        "PreToolUse": [
            {"matcher": "Bash", "hooks": [{"type": "command", "command": "guard.sh --token ghp_notARealToken0123"}]}
        ],
        "Notification": [{"hooks": [{"type": "command", "command": "notify-send done"}]}]
    },
    "permissions": {"allow": ["Bash(git status)"]}
}"""

# Claude Code's own state file, which also holds the user's MCP servers.
CLAUDE_STATE = '{"numStartups": 12, "mcpServers": {"github": {"command": "npx", "args": ["gh-mcp"]}}, "projects": {}}\n'

CLAUDE_LOCAL = '{"hooks": {"Stop": [{"hooks": [{"type": "command", "command": "./checks.sh"}]}]}}\n'

CODEX_CONFIG = """# my Codex settings
model = "gpt-5"   # the default model
approval_policy = "on-request"

[features]
hooks = true

# guard every shell call
[[hooks.PreToolUse]]
matcher = "Bash"
[[hooks.PreToolUse.hooks]]
type = "command"
command = "python3 ~/bin/guard.py"
timeout = 5

[mcp_servers.docs]
command = "docs-server"
args = ["--stdio"]  # keep this comment
"""


@dataclass
class Home:
    base: Path
    home: Path
    project: Path
    data: Path
    codex_home: Path | None = None
    claude_config: Path | None = None  # CLAUDE_CONFIG_DIR

    def env(self) -> dict[str, str]:
        env = {k: v for k, v in os.environ.items()
               if k not in ("LOOPSTATE_DATA_DIR", "CODEX_HOME", "PLUGIN_DATA", "XDG_STATE_HOME", "CLAUDE_PROJECT_DIR",
                            "CLAUDE_CONFIG_DIR")}
        env.update(HOME=str(self.home), LOOPSTATE_DATA_DIR=str(self.data))
        if self.codex_home is not None:
            env["CODEX_HOME"] = str(self.codex_home)
        if self.claude_config is not None:
            env["CLAUDE_CONFIG_DIR"] = str(self.claude_config)
        return env

    def cli(self, *args: str, expect: int | None = 0) -> subprocess.CompletedProcess[str]:
        done = subprocess.run([sys.executable, "-m", "loopstate.cli.main", *args], cwd=self.project, env=self.env(),
                              capture_output=True, text=True, timeout=120)
        if expect is not None:
            assert done.returncode == expect, (done.returncode, done.stdout, done.stderr)
        return done

    def json(self, *args: str, expect: int | None = 0) -> dict:
        return json.loads(self.cli(*args, "--json", expect=expect).stdout)

    def snapshot(self) -> dict[str, tuple[str, bytes | None, int]]:
        """Every folder and file under the home and the project: kind, bytes, permission bits."""
        found = {}
        for top in (self.home, self.project):
            for folder, dirs, files in os.walk(top):
                for name in dirs + files:
                    path = os.path.join(folder, name)
                    info = os.lstat(path)
                    data = Path(path).read_bytes() if stat.S_ISREG(info.st_mode) else None
                    found[os.path.relpath(path, self.base)] = (stat.filemode(info.st_mode), data, info.st_nlink)
        return found

    def data_snapshot(self) -> dict[str, bytes]:
        if not self.data.exists():
            return {}
        return {str(p.relative_to(self.data)): p.read_bytes() for p in sorted(self.data.rglob("*")) if p.is_file()}


def make_home(tmp_path: Path, *, foreign: bool = True) -> Home:
    h = Home(tmp_path, tmp_path / "home", tmp_path / "home" / "work" / "app", tmp_path / "data")
    h.project.mkdir(parents=True)
    (h.project / ".git").mkdir()  # the project root is found from the cwd upward
    if foreign:
        (h.home / ".claude").mkdir()
        (h.home / ".claude" / "settings.json").write_text(CLAUDE_SETTINGS, encoding="utf-8")
        os.chmod(h.home / ".claude" / "settings.json", 0o640)
        (h.home / ".claude.json").write_text(CLAUDE_STATE, encoding="utf-8")
        (h.home / ".codex").mkdir()
        (h.home / ".codex" / "config.toml").write_text(CODEX_CONFIG, encoding="utf-8")
        (h.project / ".claude").mkdir()
        (h.project / ".claude" / "settings.local.json").write_text(CLAUDE_LOCAL, encoding="utf-8")
    return h


def config_path(h: Home, host: str, scope: str) -> Path:
    if scope == "project":
        return h.project / (".claude/settings.json" if host == "claude" else ".codex/config.toml")
    if host == "codex" and h.codex_home is not None:
        return h.codex_home / "config.toml"
    return h.home / (".claude/settings.json" if host == "claude" else ".codex/config.toml")


def servers_path(h: Home, host: str, scope: str) -> Path:
    """Where the host reads our MCP server entry from."""
    if host == "codex":
        return config_path(h, host, scope)
    return h.project / ".mcp.json" if scope == "project" else h.home / ".claude.json"
