"""The real host CLIs, pinned in this folder's package-lock.json (``npm ci`` here; .ci/run does it).

A test here drives a whole real session of Claude Code or Codex against the scripted
model server (``modelserver.py``) after a real ``loopstate setup apply`` into a private
HOME / CLAUDE_CONFIG_DIR / CODEX_HOME, and asserts only on what the host sent the model,
the host's own report of its hooks, and loopstate's store or a side-effect file.
Without the CLIs installed the tests skip with "prerequisite missing:".
"""

from __future__ import annotations

from pathlib import Path

from tests.conftest import prerequisite

HOSTS_DIR = Path(__file__).resolve().parent
BIN = HOSTS_DIR / "node_modules" / ".bin"
CLAUDE = BIN / "claude"
CODEX = BIN / "codex"

needs_claude = prerequisite(CLAUDE.exists(), f"Claude Code CLI not installed ({CLAUDE}); run `npm ci` in {HOSTS_DIR}")
needs_codex = prerequisite(CODEX.exists(), f"Codex CLI not installed ({CODEX}); run `npm ci` in {HOSTS_DIR}")
