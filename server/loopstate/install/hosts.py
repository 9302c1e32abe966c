"""The hosts loopstate installs into: where each reads its hooks, which events we register, our command.

Facts from the hosts' documentation (../shared/HOSTS.md): Claude Code reads hooks
from ``settings.json`` (``~/.claude/`` for the user, ``<project>/.claude/`` for a
project; ``settings.local.json`` beside it is personal); Codex from ``hooks.json``
or ``[[hooks.<Event>]]`` tables in ``config.toml`` (``$CODEX_HOME``, default
``~/.codex/``, or ``<project>/.codex/``). Setup writes Codex's hooks into
``config.toml``, the one file that also carries its MCP servers, so one receipt
covers one file per host and scope. Both hosts take the same registration shape:
``{Event: [{matcher?, hooks: [{type: command, command, timeout}]}]}``.
"""

from __future__ import annotations

import os
import shlex
from dataclasses import dataclass

HOOK_TIMEOUT_SECONDS = 10
SCOPES = ("user", "project")


@dataclass(frozen=True)
class Host:
    name: str  # the CLI's spelling: `loopstate hook NAME EVENT`, `--host NAME`
    harness: str  # seed 002's harness enum
    label: str
    events: tuple[str, ...]  # what we register, in this order
    blocking_events: tuple[str, ...]  # events where another hook can deny or block
    file_format: str  # "json" or "toml"
    project_file: str  # relative to the project root
    version_command: tuple[str, ...]


CLAUDE = Host(
    name="claude", harness="claude_code", label="Claude Code",
    events=("SessionStart", "UserPromptSubmit", "PreToolUse", "Stop", "PreCompact", "SessionEnd"),
    blocking_events=("UserPromptSubmit", "PreToolUse", "Stop", "PreCompact"),
    file_format="json", project_file=".claude/settings.json", version_command=("claude", "--version"),
)
CODEX = Host(
    name="codex", harness="codex", label="Codex",
    events=("SessionStart", "UserPromptSubmit", "PreToolUse", "PreCompact", "PostCompact", "Stop", "SessionEnd"),
    blocking_events=("UserPromptSubmit", "PreToolUse", "Stop"),
    file_format="toml", project_file=".codex/config.toml", version_command=("codex", "--version"),
)
HOSTS = {host.name: host for host in (CLAUDE, CODEX)}


@dataclass(frozen=True)
class Target:
    """One host config file: ``root`` (absolute) and ``relative`` (the receipt's destination)."""

    host: Host
    scope: str
    root: str
    relative: str

    @property
    def path(self) -> str:
        return os.path.join(self.root, self.relative)


def target(host: Host, scope: str, *, home: str, codex_home: str | None, project: str | None) -> Target:
    """The file setup writes for ``host`` at ``scope``; ``project`` is needed for the project scope."""
    if scope == "project":
        assert project is not None
        return Target(host, scope, project, host.project_file)
    if host is CODEX and codex_home:
        return Target(host, scope, codex_home, "config.toml")
    return Target(host, scope, home, ".claude/settings.json" if host is CLAUDE else ".codex/config.toml")


def inspected_files(host: Host, *, home: str, codex_home: str | None, project: str | None) -> list[str]:
    """Every file the host reads hooks from (for doctor's collision check), user scope first."""
    if host is CLAUDE:
        files = [os.path.join(home, ".claude", "settings.json")]
        if project:
            files += [os.path.join(project, ".claude", "settings.json"),
                      os.path.join(project, ".claude", "settings.local.json")]
        return files
    base = codex_home or os.path.join(home, ".codex")
    files = [os.path.join(base, "hooks.json"), os.path.join(base, "config.toml")]
    if project:
        files += [os.path.join(project, ".codex", "hooks.json"), os.path.join(project, ".codex", "config.toml")]
    return files


def hook_command(executable: str, host: Host, event: str) -> str:
    return f"{shlex.quote(executable)} hook {host.name} {event}"


def our_event(command: object, host: Host) -> str | None:
    """The event a registered command runs if it is loopstate's hook for ``host``, else None."""
    if not isinstance(command, str):
        return None
    try:
        argv = shlex.split(command)
    except ValueError:
        return None
    if len(argv) == 4 and os.path.basename(argv[0]) == "loopstate" and argv[1:3] == ["hook", host.name]:
        return argv[3]
    return None


def registration(executable: str, host: Host) -> dict[str, dict]:
    """Our one group per event, as the host's config holds it. No matcher: an absent matcher matches every
    tool on both hosts (Codex reads a matcher as a regular expression, where Claude's ``*`` is not valid)."""
    return {event: {"hooks": [{"type": "command", "command": hook_command(executable, host, event),
                               "timeout": HOOK_TIMEOUT_SECONDS}]}
            for event in host.events}
