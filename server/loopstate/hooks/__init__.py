"""The harness front door: Claude Code and Codex hooks (``loopstate hook HOST EVENT``).

Each host adapter parses its host's JSON into a host-neutral event
(``service.hook_decisions.HookEvent``) and formats the answer as exactly the
JSON that host accepts. ``run`` wraps both so that a hook always fails open:
exit 0 and valid host JSON, whatever went wrong.
"""
