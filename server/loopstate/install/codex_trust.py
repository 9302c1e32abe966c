"""Codex's hook trust: the key and hash Codex checks before it runs a hook, computed as Codex computes them.

Codex 0.171 runs a command hook from a user or project config only when the
user's ``config.toml`` holds ``[hooks.state."<key>"] trusted_hash`` equal to
the hook's current hash (the TUI's ``/hooks`` writes it; ``codex exec`` skips an
untrusted hook without a word). Read in openai/codex,
``codex-rs/hooks/src/engine/discovery.rs`` (``append_matcher_groups``,
``command_hook_hash``), ``codex-rs/hooks/src/lib.rs`` (``hook_key``,
``hook_event_key_label``), ``codex-rs/config`` (``version_for_toml``) and
``codex-rs/hooks/src/config_rules.rs`` (``hook_states_from_stack``):

- key: ``<config file path>:<event label>:<group index>:<handler index>``,
  the label in snake case (``pre_tool_use``), the indices counted in that
  file's array for the event;
- hash: ``sha256:`` and the hex SHA-256 of the compact JSON, keys sorted, of
  ``{"event_name": label, "matcher"?: ..., "hooks": [handler]}`` where the
  handler is ``{"type": "command", "command", "timeout", "async"}`` (plus
  ``statusMessage`` when set) with the timeout as Codex runs it (default 600,
  at least 1, SessionEnd at most 3);
- only the user layer's ``[hooks.state]`` counts: a project's own config
  cannot trust its hooks, so a project's hooks are trusted in the user's file.

tests/hosts/test_codex_trust.py checks these against ``codex app-server``'s
``hooks/list`` (``key``, ``currentHash``) for what setup wrote.
"""

from __future__ import annotations

import hashlib
import json
import re
from typing import Any

from loopstate.install.hosts import Host

DEFAULT_TIMEOUT = 600
SESSION_END_MAX_TIMEOUT = 3
# Events whose matcher Codex ignores (it drops the matcher before hashing).
MATCHERLESS_EVENTS = ("UserPromptSubmit", "Stop", "SessionEnd")


def event_label(event: str) -> str:
    """Codex's key label of an event: ``PreToolUse`` -> ``pre_tool_use``."""
    return re.sub(r"(?<!^)(?=[A-Z])", "_", event).lower()


def state_key(source: str, event: str, group_index: int, handler_index: int) -> str:
    return f"{source}:{event_label(event)}:{group_index}:{handler_index}"


def effective_timeout(event: str, timeout: Any) -> int:
    seconds = timeout if isinstance(timeout, int) and not isinstance(timeout, bool) else DEFAULT_TIMEOUT
    seconds = max(seconds, 1)
    return min(seconds, SESSION_END_MAX_TIMEOUT) if event == "SessionEnd" else seconds


def hook_hash(event: str, matcher: Any, handler: dict[str, Any]) -> str:
    """The hash Codex gives one command handler of a group (what ``trusted_hash`` must equal)."""
    normalized: dict[str, Any] = {"type": "command", "command": handler.get("command"),
                                  "timeout": effective_timeout(event, handler.get("timeout")),
                                  "async": handler.get("async") is True}
    if isinstance(handler.get("statusMessage"), str):
        normalized["statusMessage"] = handler["statusMessage"]
    identity: dict[str, Any] = {"event_name": event_label(event), "hooks": [normalized]}
    if isinstance(matcher, str) and matcher.strip() and event not in MATCHERLESS_EVENTS:
        identity["matcher"] = matcher.strip()
    canonical = json.dumps(identity, sort_keys=True, separators=(",", ":"), ensure_ascii=False)
    return "sha256:" + hashlib.sha256(canonical.encode("utf-8")).hexdigest()


def our_hooks(config: Any, source: str, host: Host) -> dict[str, tuple[str, str]]:
    """Every loopstate handler in a parsed Codex config: its trust key -> (event, hash)."""
    from loopstate.install.registration import is_our_group

    found: dict[str, tuple[str, str]] = {}
    hooks = config.get("hooks") if isinstance(config, dict) else None
    for event, groups in (hooks.items() if isinstance(hooks, dict) else ()):
        if event == "state" or not isinstance(groups, list):
            continue
        for group_index, group in enumerate(groups):
            if not is_our_group(group, host, event):
                continue
            for handler_index, handler in enumerate(group["hooks"]):
                found[state_key(source, event, group_index, handler_index)] = (
                    event, hook_hash(event, group.get("matcher"), handler))
    return found


def trusted_hashes(config: Any) -> dict[str, str]:
    """The user config's ``[hooks.state]``: key -> trusted_hash (entries without one are left out)."""
    hooks = config.get("hooks") if isinstance(config, dict) else None
    state = hooks.get("state") if isinstance(hooks, dict) else None
    return {key.strip(): entry["trusted_hash"] for key, entry in (state.items() if isinstance(state, dict) else ())
            if isinstance(entry, dict) and isinstance(entry.get("trusted_hash"), str)}


def status(key: str, current: str, trusted: dict[str, str]) -> str:
    """Codex's trust status of one hook: trusted, modified (trusted once, changed since) or untrusted."""
    if key not in trusted:
        return "untrusted"
    return "trusted" if trusted[key] == current else "modified"


def record(doc: Any, entries: dict[str, tuple[str, str]]) -> None:
    """Write ``trusted_hash`` for each entry into a tomlkit document's ``[hooks.state]``, as /hooks does."""
    import tomlkit

    if "hooks" not in doc:
        doc["hooks"] = tomlkit.table(is_super_table=True)
    hooks = doc["hooks"]
    if "state" not in hooks:
        hooks["state"] = tomlkit.table(is_super_table=True)
    state = hooks["state"]
    for key, (_, current) in entries.items():
        if key in state and isinstance(state[key], dict):
            state[key]["trusted_hash"] = current
        else:
            entry = tomlkit.table()
            entry["trusted_hash"] = current
            entry.add(tomlkit.nl())
            state[key] = entry


def forget(doc: Any, keys: set[str]) -> None:
    """Take the trust of ``keys`` out of a tomlkit document (an ``enabled`` the user set stays)."""
    hooks = doc.get("hooks")
    state = hooks.get("state") if hooks is not None else None
    if state is None:
        return
    for key in [k for k in state if k.strip() in keys]:
        entry = state[key]
        if isinstance(entry, dict) and set(entry) - {"trusted_hash"}:
            entry.pop("trusted_hash", None)
        else:
            del state[key]
    if not state:
        del hooks["state"]
    if not hooks:
        del doc["hooks"]


def state_without(config: Any, keys: set[str]) -> Any:
    """A parsed config with the trust of ``keys`` taken out (for the "only ours changed" check)."""
    if not isinstance(config, dict) or not isinstance(config.get("hooks"), dict):
        return config
    hooks = dict(config["hooks"])
    state = hooks.get("state")
    if isinstance(state, dict):
        kept = {}
        for key, entry in state.items():
            if key.strip() in keys and isinstance(entry, dict):
                entry = {k: v for k, v in entry.items() if k != "trusted_hash"}
                if not entry:
                    continue
            kept[key] = entry
        hooks["state"] = kept
        if not kept:
            del hooks["state"]
    out = dict(config)
    out["hooks"] = hooks
    if not hooks:
        del out["hooks"]
    return out
