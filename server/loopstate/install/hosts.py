"""The hosts loopstate installs into: where each reads its hooks, which events we register, our command.

Facts from the hosts' documentation (../shared/HOSTS.md): Claude Code reads hooks
from ``settings.json`` (``~/.claude/`` for the user, ``<project>/.claude/`` for a
project; ``settings.local.json`` beside it is personal); Codex from ``hooks.json``
or ``[[hooks.<Event>]]`` tables in ``config.toml`` (``$CODEX_HOME``, default
``~/.codex/``, or ``<project>/.codex/``). Setup writes Codex's hooks into
``config.toml``, the one file that also carries its MCP servers, so one receipt
covers one file per host and scope. Both hosts take the same registration shape:
``{Event: [{matcher?, hooks: [{type: command, command, timeout}]}]}``. The MCP
server entry, ``loopstate`` running ``loopstate mcp``, goes into ``mcpServers``
(Claude Code: ``~/.claude.json`` or the project's ``.mcp.json``) or
``[mcp_servers.loopstate]`` (Codex's ``config.toml``).

Claude Code's ``CLAUDE_CONFIG_DIR``, when set, replaces ``~/.claude`` and moves
``.claude.json`` with it (``$CLAUDE_CONFIG_DIR/.claude.json``): setup writes
and doctor reads the user scope there, the files the host really reads. Claude
Code owns every prompt that starts with ``/``, so ``/intent`` reaches the
hooks only as a command file (``claude_commands``): ``commands/intent.md``
beside the settings of the same scope.
"""

from __future__ import annotations

import os
import shlex
from dataclasses import dataclass

HOOK_TIMEOUT_SECONDS = 10
# Codex gives SessionEnd hooks at most 3 s and warns on every run about a longer timeout.
CODEX_SESSION_END_TIMEOUT_SECONDS = 3
# What `loopstate mcp` reads to find the store, as the hooks do (core/paths.resolve_data_dir). Codex starts an MCP
# server with HOME and PATH only, so its entry names these to pass on: by name, not by value, so a project's entry
# holds nothing machine-specific and the server resolves the store from the same variables as the hooks.
STORE_VARIABLES = ("LOOPSTATE_DATA_DIR", "CODEX_HOME", "PLUGIN_DATA", "XDG_STATE_HOME")
SCOPES = ("user", "project")
MCP_SERVER = "loopstate"  # the server's name in the host's MCP config
COMMAND_FILE = "{folder}commands/intent.md"  # Claude Code's /intent, relative to a scope's root


@dataclass(frozen=True)
class Host:
    name: str  # the CLI's spelling: `loopstate hook NAME EVENT`, `--host NAME`
    harness: str  # the records' harness enum (records.Harness)
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
    """One host config file setup writes: ``root`` (absolute), ``relative`` (the receipt's destination), and
    what goes in it: our hook registration, our MCP server entry, or both."""

    host: Host
    scope: str
    root: str
    relative: str
    hooks: bool
    mcp: bool

    @property
    def path(self) -> str:
        return os.path.join(self.root, self.relative)

    @property
    def file_format(self) -> str:
        return "toml" if self.relative.endswith(".toml") else "command" if self.relative.endswith(".md") else "json"


def claude_user_root(home: str, claude_config_dir: str | None) -> tuple[str, str]:
    """Claude Code's user folder as (root, folder relative to it): ``$CLAUDE_CONFIG_DIR`` or ``~/.claude``."""
    return (claude_config_dir, "") if claude_config_dir else (home, ".claude")


def targets(host: Host, scope: str, *, home: str, codex_home: str | None, project: str | None,
            claude_config_dir: str | None = None) -> list[Target]:
    """The files setup writes for ``host`` at ``scope`` (``project`` is needed for the project scope).

    Claude Code keeps MCP servers apart from its settings: ``.claude.json`` for the user (in ``~`` or in
    ``$CLAUDE_CONFIG_DIR``), ``.mcp.json`` at the project's root; and the ``/intent`` command file beside the
    settings. Codex keeps hooks and servers in its ``config.toml``."""
    if host is CODEX:
        if scope == "project":
            assert project is not None
            return [Target(host, scope, project, ".codex/config.toml", True, True)]
        if codex_home:
            return [Target(host, scope, codex_home, "config.toml", True, True)]
        return [Target(host, scope, home, ".codex/config.toml", True, True)]
    if scope == "project":
        assert project is not None
        return [Target(host, scope, project, ".claude/settings.json", True, False),
                Target(host, scope, project, COMMAND_FILE.format(folder=".claude/"), False, False),
                Target(host, scope, project, ".mcp.json", False, True)]
    root, folder = claude_user_root(home, claude_config_dir)
    prefix = folder + "/" if folder else ""
    return [Target(host, scope, root, prefix + "settings.json", True, False),
            Target(host, scope, root, COMMAND_FILE.format(folder=prefix), False, False),
            Target(host, scope, root, ".claude.json", False, True)]


def inspected_files(host: Host, *, home: str, codex_home: str | None, project: str | None,
                    claude_config_dir: str | None = None) -> list[str]:
    """Every file the host reads hooks from (for doctor's collision check), user scope first."""
    if host is CLAUDE:
        files = [os.path.join(*claude_user_root(home, claude_config_dir), "settings.json")]
        if project:
            files += [os.path.join(project, ".claude", "settings.json"),
                      os.path.join(project, ".claude", "settings.local.json")]
        return files
    base = codex_home or os.path.join(home, ".codex")
    files = [os.path.join(base, "hooks.json"), os.path.join(base, "config.toml")]
    if project:
        files += [os.path.join(project, ".codex", "hooks.json"), os.path.join(project, ".codex", "config.toml")]
    return files


def mcp_files(host: Host, *, home: str, codex_home: str | None, project: str | None,
              claude_config_dir: str | None = None) -> list[str]:
    """Every file the host reads MCP servers from, user scope first."""
    if host is CODEX:
        return [path for path in inspected_files(host, home=home, codex_home=codex_home, project=project)
                if path.endswith(".toml")]
    return ([os.path.join(claude_config_dir or home, ".claude.json")]
            + ([os.path.join(project, ".mcp.json")] if project else []))


def command_files(host: Host, *, home: str, project: str | None, claude_config_dir: str | None = None) -> list[str]:
    """Where Claude Code reads the ``/intent`` command file from, user scope first (Codex: none)."""
    if host is not CLAUDE:
        return []
    root, folder = claude_user_root(home, claude_config_dir)
    return ([os.path.join(root, COMMAND_FILE.format(folder=folder + "/" if folder else ""))]
            + ([os.path.join(project, COMMAND_FILE.format(folder=".claude/"))] if project else []))


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


def hook_timeout(host: Host, event: str) -> int:
    return CODEX_SESSION_END_TIMEOUT_SECONDS if host is CODEX and event == "SessionEnd" else HOOK_TIMEOUT_SECONDS


def registration(executable: str, host: Host) -> dict[str, dict]:
    """Our one group per event, as the host's config holds it. No matcher: an absent matcher matches every
    tool on both hosts (Codex reads a matcher as a regular expression, where Claude's ``*`` is not valid)."""
    return {event: {"hooks": [{"type": "command", "command": hook_command(executable, host, event),
                               "timeout": hook_timeout(host, event)}]}
            for event in host.events}


def mcp_entry(executable: str, host: Host) -> dict:
    """Our MCP server entry: ``loopstate mcp`` on stdio (both hosts take command and args).

    For Codex also ``env_vars`` (the store's variables, passed on by name: Codex gives a server only HOME and
    PATH, so without them the server would open another store than the hooks with CODEX_HOME set) and
    ``required = true``: Codex then waits for the server before the first request instead of leaving a
    server still starting out of the turn ("omitting pending optional MCP server"); the cost is that a
    `loopstate mcp` that cannot start stops `codex exec` with an error naming it (doctor checks it starts)."""
    entry: dict = {"command": executable, "args": ["mcp"]}
    if host is CODEX:
        entry.update(env_vars=list(STORE_VARIABLES), required=True)
    return entry


def is_our_server(entry: object) -> bool:
    return (isinstance(entry, dict) and isinstance(entry.get("command"), str)
            and os.path.basename(entry["command"]) == "loopstate" and entry.get("args") == ["mcp"])


def servers_key(file_format: str) -> str:
    return "mcpServers" if file_format == "json" else "mcp_servers"
