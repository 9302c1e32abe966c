"""Our hook registration merged into, and taken out of, a host config's text; and every hook a config holds.

Merging adds one group per event of ours (and our MCP server entry) and
touches nothing else: in JSON by
splicing (``jsonedit``), in TOML through tomlkit, which keeps comments and
layout. A group of ours that is already there unchanged is left alone (so a
re-apply changes no byte); one of ours for the same event that differs (an older
executable path) is replaced. Every result is checked: with our groups taken
out of both, the new document must equal the old one value for value.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Any

from loopstate.install import jsonedit
from loopstate.install.hosts import MCP_SERVER, Host, is_our_server, our_event


class ConfigShapeError(ValueError):
    """The config holds something where our entries go that is not the documented shape."""


@dataclass(frozen=True)
class Handler:
    """One registered hook handler: its event, the group's matcher, and the handler's fields."""

    event: str
    matcher: Any
    handler: dict[str, Any]

    @property
    def command(self) -> Any:
        return self.handler.get("command")


def is_our_group(group: Any, host: Host, event: str | None = None) -> bool:
    """A group whose handlers are all loopstate's hook for ``host`` (and ``event`` when given)."""
    if not isinstance(group, dict) or not set(group) <= {"matcher", "hooks"}:
        return False
    handlers = group.get("hooks")
    if not isinstance(handlers, list) or not handlers:
        return False
    for handler in handlers:
        found = our_event(handler.get("command"), host) if isinstance(handler, dict) else None
        if found is None or (event is not None and found != event):
            return False
    return True


def strip_ours(value: Any, host: Host) -> Any:
    """A parsed config with our groups and our MCP server taken out, and empty event lists, hooks and server
    tables dropped (so a container that only our entries filled compares equal to its absence)."""
    if not isinstance(value, dict):
        return value
    value = dict(value)
    if isinstance(value.get("hooks"), dict):
        hooks = {}
        for event, groups in value["hooks"].items():
            kept = [g for g in groups if not is_our_group(g, host)] if isinstance(groups, list) else groups
            if kept != []:
                hooks[event] = kept
        value["hooks"] = hooks
    for key in ("mcpServers", "mcp_servers"):
        if isinstance(value.get(key), dict):
            value[key] = {name: entry for name, entry in value[key].items()
                          if not (name == MCP_SERVER and is_our_server(entry))}
    return {k: v for k, v in value.items() if not (k in ("hooks", "mcpServers", "mcp_servers") and v == {})}


def _check_only_ours_changed(before: Any, after: Any, host: Host) -> None:
    if strip_ours(before, host) != strip_ours(after, host):
        raise AssertionError("an edit of a host config changed more than loopstate's own entries")


# JSON -------------------------------------------------------------------------------


def _json_object(text: str, where: str) -> jsonedit.Node:
    try:
        root = jsonedit.parse(text)
    except jsonedit.JsonEditError as exc:
        raise ConfigShapeError(f"it is not valid JSON ({exc}); fix it or move it aside") from None
    if not isinstance(root.value, dict):
        raise ConfigShapeError(f"its {where} is not a JSON object; fix it or move it aside")
    return root


def _hooks_node(text: str) -> tuple[jsonedit.Node, jsonedit.Node | None]:
    root = _json_object(text, "top level")
    hooks = root.member("hooks")
    if hooks is not None and not isinstance(hooks.value, dict):
        raise ConfigShapeError('its "hooks" is not an object of events; fix it by hand')
    return root, hooks


def _foreign_server(path_words: str) -> ConfigShapeError:
    return ConfigShapeError(f"it already names an MCP server {MCP_SERVER!r} that is not `loopstate mcp` "
                            f"({path_words}); rename or remove that entry, or set up with --no-mcp")


def _merge_json_server(text: str, entry: dict) -> str:
    root = _json_object(text, "top level")
    servers = root.member("mcpServers")
    if servers is None:
        return jsonedit.insert_member(text, root, "mcpServers", {MCP_SERVER: entry}, 0)
    if not isinstance(servers.value, dict):
        raise ConfigShapeError('its "mcpServers" is not an object of servers; fix it by hand')
    current = servers.member(MCP_SERVER)
    if current is None:
        return jsonedit.insert_member(text, servers, MCP_SERVER, entry, 1)
    if current.value == entry:
        return text
    if not is_our_server(current.value):
        raise _foreign_server(f"mcpServers.{MCP_SERVER}")
    text = jsonedit.remove_member(text, servers, MCP_SERVER)  # ours, from another executable: replaced
    return _merge_json_server(text, entry)


def merge_json(text: str | None, host: Host, groups: dict[str, dict] | None, server: dict | None) -> str:
    before = {} if text is None or not text.strip() else _json_object(text, "top level").value
    if text is None or before == {}:  # nothing of anyone's to keep in place: a new document in the hosts' usual layout
        fresh: dict[str, Any] = {}
        if groups:
            fresh["hooks"] = {event: [group] for event, group in groups.items()}
        if server:
            fresh["mcpServers"] = {MCP_SERVER: server}
        return json.dumps(fresh, indent=2) + "\n"
    for event, group in (groups or {}).items():
        root, hooks = _hooks_node(text)
        if hooks is None:
            text = jsonedit.insert_member(text, root, "hooks", {event: [group]}, 0)
            continue
        arr = hooks.member(event)
        if arr is None:
            text = jsonedit.insert_member(text, hooks, event, [group], 1)
            continue
        if not isinstance(arr.value, list):
            raise ConfigShapeError(f'its "hooks.{event}" is not a list of groups; fix it by hand')
        if group in arr.value:
            continue
        stale = [i for i, item in enumerate(arr.value) if is_our_group(item, host, event)]
        if stale:
            text = jsonedit.remove_item(text, arr, stale[0])
            hooks = _hooks_node(text)[1]
            arr = None if hooks is None else hooks.member(event)
            assert arr is not None  # taking one group out leaves the event's list in place
        text = jsonedit.append_item(text, arr, group, 2)
    if server:
        text = _merge_json_server(text, server)
    _check_only_ours_changed(before, jsonedit.parse(text).value, host)
    return text


def unmerge_json(text: str, host: Host) -> str:
    before = _json_object(text, "top level").value
    while True:
        root, hooks = _hooks_node(text)
        if hooks is None:
            break
        found = next(((event, arr, i) for event, _, arr in hooks.members if isinstance(arr.value, list)
                      for i, item in enumerate(arr.value) if is_our_group(item, host)), None)
        if found is None:
            break
        event, arr, index = found
        if len(arr.items) > 1:
            text = jsonedit.remove_item(text, arr, index)
        elif len(hooks.members) > 1:
            text = jsonedit.remove_member(text, hooks, event)
        else:
            text = jsonedit.remove_member(text, root, "hooks")
    root = _json_object(text, "top level")
    servers = root.member("mcpServers")
    if servers is not None and isinstance(servers.value, dict) and is_our_server(servers.value.get(MCP_SERVER)):
        text = (jsonedit.remove_member(text, servers, MCP_SERVER) if len(servers.members) > 1
                else jsonedit.remove_member(text, root, "mcpServers"))
    _check_only_ours_changed(before, jsonedit.parse(text).value, host)
    return text


# TOML -------------------------------------------------------------------------------


def _toml_document(text: str | None):
    import tomlkit
    from tomlkit.container import OutOfOrderTableProxy
    from tomlkit.exceptions import TOMLKitError

    try:
        doc = tomlkit.parse(text or "")
    except TOMLKitError as exc:
        raise ConfigShapeError(f"it is not valid TOML ({exc}); fix it or move it aside") from None
    hooks = doc.get("hooks")
    # A table whose sub-tables are split by others (as Codex's /hooks leaves [hooks.state."..."] at the end of
    # the file) is tomlkit's out-of-order proxy: still a table.
    if hooks is not None and not isinstance(hooks, (tomlkit.items.Table, OutOfOrderTableProxy)):
        raise ConfigShapeError("its `hooks` is not a table of [[hooks.<Event>]] arrays; fix it by hand")
    return doc


def _toml_group(group: dict):
    import tomlkit

    table = tomlkit.table()
    for key, value in group.items():
        if key != "hooks":
            table[key] = value
    handlers = tomlkit.aot()
    for handler in group["hooks"]:
        item = tomlkit.table()
        item.update(handler)
        handlers.append(item)
    handlers[-1].add(tomlkit.nl())  # a blank line after the group, as a person would leave one
    table["hooks"] = handlers
    return table


def merge_toml(text: str | None, host: Host, groups: dict[str, dict] | None, server: dict | None,
               trust_source: str | None = None) -> str:
    """With ``trust_source`` (the file's path, as Codex names it in a trust key) our hooks in the result are
    also recorded as trusted in its ``[hooks.state]`` (codex_trust), as Codex's /hooks would."""
    import tomlkit

    from loopstate.install import codex_trust

    doc = _toml_document(text)
    before = doc.unwrap()
    if groups and "hooks" not in doc:
        doc["hooks"] = tomlkit.table(is_super_table=True)
    for event, group in (groups or {}).items():
        hooks = doc["hooks"]
        if event not in hooks:
            hooks[event] = tomlkit.aot()
        arr = hooks[event]
        if not isinstance(arr, tomlkit.items.AoT):
            raise ConfigShapeError(f"its `hooks.{event}` is not an array of tables ([[hooks.{event}]]); fix it by hand")
        current = arr.unwrap()
        if group in current:
            continue
        stale = [i for i, item in enumerate(current) if is_our_group(item, host, event)]
        if stale:
            del arr[stale[0]]
        arr.append(_toml_group(group))
    if server:
        if "mcp_servers" not in doc:
            doc["mcp_servers"] = tomlkit.table(is_super_table=True)
        servers = doc["mcp_servers"]
        if not isinstance(servers, tomlkit.items.Table):
            raise ConfigShapeError("its `mcp_servers` is not a table of [mcp_servers.<name>] tables; fix it by hand")
        existing = servers.get(MCP_SERVER)
        if existing is None or existing.unwrap() != server:
            if existing is not None and not is_our_server(existing.unwrap()):
                raise _foreign_server(f"[mcp_servers.{MCP_SERVER}]")
            if existing is not None:
                del servers[MCP_SERVER]
            table = tomlkit.table()
            table.update(server)
            table.add(tomlkit.nl())
            servers[MCP_SERVER] = table
    trusted: set[str] = set()
    if trust_source is not None:
        entries = codex_trust.our_hooks(doc.unwrap(), trust_source, host)
        codex_trust.record(doc, entries)
        trusted = set(entries)
    out = tomlkit.dumps(doc)
    _check_only_ours_changed(codex_trust.state_without(before, trusted),
                             codex_trust.state_without(tomlkit.parse(out).unwrap(), trusted), host)
    return out


def unmerge_toml(text: str, host: Host, trust_source: str | None = None) -> str:
    """With ``trust_source`` the trust Codex keeps for our hooks in this file (``[hooks.state]``, keyed by
    ``trust_source`` and each hook's place) goes too, whoever recorded it: setup or the user's /hooks."""
    import tomlkit

    from loopstate.install import codex_trust

    doc = _toml_document(text)
    before = doc.unwrap()
    trusted = set(codex_trust.our_hooks(before, trust_source, host)) if trust_source is not None else set()
    codex_trust.forget(doc, trusted)
    hooks = doc.get("hooks")
    if hooks is not None:
        for event in list(hooks.keys()):
            arr = hooks[event]
            if not isinstance(arr, tomlkit.items.AoT):
                continue
            ours = [i for i, item in enumerate(arr.unwrap()) if is_our_group(item, host)]
            if not ours:
                continue
            if len(ours) == len(arr):
                del hooks[event]
            else:
                for index in reversed(ours):
                    del arr[index]
        if not hooks:
            del doc["hooks"]
    servers = doc.get("mcp_servers")
    if isinstance(servers, tomlkit.items.Table) and MCP_SERVER in servers and is_our_server(servers[MCP_SERVER].unwrap()):
        del servers[MCP_SERVER]
        if not servers:
            del doc["mcp_servers"]
    out = tomlkit.dumps(doc)
    _check_only_ours_changed(codex_trust.state_without(before, trusted), tomlkit.parse(out).unwrap(), host)
    return out


def merge(file_format: str, text: str | None, host: Host, groups: dict[str, dict] | None, server: dict | None,
          *, trust_source: str | None = None) -> str:
    """``text`` with our hook ``groups`` and our MCP ``server`` entry merged in (either may be None); a
    ``command`` file (Claude Code's ``/intent``) is ours whole; for a Codex file with ``trust_source`` our
    hooks' trust is recorded too."""
    if file_format == "command":
        from loopstate.install import claude_commands

        return claude_commands.merge(text)
    if file_format == "json":
        return merge_json(text, host, groups, server)
    return merge_toml(text, host, groups, server, trust_source)


def unmerge(file_format: str, text: str, host: Host, *, trust_source: str | None = None) -> str | None:
    """``text`` with our entries taken out; None when nothing is left of the file (our command file)."""
    if file_format == "command":
        from loopstate.install import claude_commands

        claude_commands.unmerge(text)  # refuses a file that is no longer ours; nothing of ours is left
        return None
    return unmerge_json(text, host) if file_format == "json" else unmerge_toml(text, host, trust_source)


# Reading every hook ------------------------------------------------------------------


def load(file_format: str, text: str) -> Any:
    """A config's parsed value (strict: a key given twice is refused)."""
    if file_format == "json":
        return _json_object(text, "top level").value
    import tomllib

    try:
        return tomllib.loads(text)
    except tomllib.TOMLDecodeError as exc:
        raise ConfigShapeError(f"it is not valid TOML ({exc}); fix it or move it aside") from None


def handlers(value: Any) -> list[Handler]:
    """Every handler of every event in a parsed config, in file order; odd shapes are skipped, not guessed."""
    found: list[Handler] = []
    hooks = value.get("hooks") if isinstance(value, dict) else None
    if not isinstance(hooks, dict):
        return found
    for event, groups in hooks.items():
        for group in groups if isinstance(groups, list) else ():
            if not isinstance(group, dict) or not isinstance(group.get("hooks"), list):
                continue
            for handler in group["hooks"]:
                if isinstance(handler, dict):
                    found.append(Handler(event, group.get("matcher"), handler))
    return found
