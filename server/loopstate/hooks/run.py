"""One hook invocation, failing open: whatever happens, exit 0 and JSON the host accepts.

A fault (no project, a corrupt or locked store, garbage on stdin, an unknown
host or event) becomes ``{"continue": true}`` with a ``systemMessage`` saying
what is wrong and what fixes it, and, once per session, the same as context
(``service.hook_decisions.fault_answer``: print modes show the user no
systemMessage); nothing else reaches stdout. A folder with no state that looks
like a moved or re-cloned project says so, with the command that adopts it
(``hooks.adoption``). The one thing a
fault does not lift is a visible kill switch: PreToolUse still denies.
"""

from __future__ import annotations

from typing import Mapping

import msgspec

from loopstate.hooks.adoption import adoption_hint, with_hint
from loopstate.hooks.hosts import HOSTS


def run(host_name: str | None, event: str | None, data: bytes, env: Mapping[str, str]) -> str:
    """The stdout of ``loopstate hook HOST EVENT`` for stdin ``data`` (always one JSON object and a newline)."""
    host = HOSTS.get(host_name or "")
    if host is None:
        return _fail_open(f"unknown host {host_name!r}; use `loopstate hook claude EVENT` or `loopstate hook codex EVENT`")
    hook_event = None
    try:
        from loopstate.hooks.hostinput import parse
        from loopstate.service.front import hook_answer, resolve_root

        hook_event = parse(data, event, prompt_id_field=host.prompt_id_field)
        root = resolve_root(cwd=hook_event.cwd).root
        answer = hook_answer(root, hook_event, env)
        said = adoption_hint(root, hook_event.event, hook_event.session_id)
        if said is not None:
            with_hint(answer, hook_event.event, said)
        out = host.output(hook_event.event, answer)
    except Exception as error:  # fail open: every fault is said, none is raised
        from loopstate.hooks.hostinput import BadInput
        from loopstate.service.front import hook_fault, hook_fault_answer

        said = str(error) if isinstance(error, BadInput) else hook_fault(error)
        session_id = hook_event.session_id if hook_event is not None else None
        # Answered as the event the host sent, when it said (its own reply format); a wrong registration
        # of a PreToolUse still denies while a kill switch stands.
        sent = hook_event.event if hook_event is not None else (
            error.named if isinstance(error, BadInput) and error.named else event or "")
        command = " ".join(("loopstate hook", host.name, *((event,) if event else ())))
        out = host.output(sent, hook_fault_answer(sent, session_id, command, said))
        if sent == "PreToolUse" or event == "PreToolUse":
            denial = _switch_denial(hook_event.cwd if hook_event is not None else None)
            if denial is not None:
                out["hookSpecificOutput"] = {"hookEventName": "PreToolUse", "permissionDecision": "deny",
                                             "permissionDecisionReason": denial}
    return _json(out)


def _switch_denial(cwd: str | None) -> str | None:
    """A kill switch the user can see denies even when the store cannot be read (or stdin names no cwd:
    then the directory the host started the hook in, which is the project's)."""
    try:
        from loopstate.service.front import hook_switch_denial, resolve_root

        return hook_switch_denial(resolve_root(cwd=cwd).root)
    except Exception:
        return None


def _fail_open(message: str) -> str:
    return _json({"continue": True, "systemMessage": f"loopstate hook: {message}"})


def _json(out: dict) -> str:
    """One line of JSON, as both hosts read it (msgspec, loaded already: the json module is ~1 ms of a start)."""
    return msgspec.json.encode(out).decode("utf-8") + "\n"
