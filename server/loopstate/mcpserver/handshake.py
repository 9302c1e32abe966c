"""Writes ``handshake.json``: the SDK's own answers to the handshake, recorded from `loopstate mcp` itself.

For each protocol revision the SDK negotiates through ``initialize``, this
starts `loopstate mcp` with the early answers off (``LOOPSTATE_MCP_EARLY=0``,
so the SDK answers everything), sends ``initialize`` and the requests of
``early.STATIC`` over its real stdio, and keeps each answer's ``result`` as
the exact bytes the SDK wrote; for each 2026-07-28-era revision (no
handshake: every request carries its ``_meta`` envelope) the same with the
requests of ``early.MODERN``. So the tool list in the table is the one
MCPServer builds from mcpserver/tools.py, never a copy kept by hand; the
table's fingerprint (early.fingerprint) ties it to the sources and library
versions it was recorded with, and `loopstate mcp` uses it only while they
are the installed ones.

    python -m loopstate.mcpserver.handshake           # rewrite handshake.json
    python -m loopstate.mcpserver.handshake --check   # exit 1 when it is stale

tests/mcp/test_mcp_handshake.py runs the check.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import tempfile
from pathlib import Path
from typing import Any

from loopstate.mcpserver import early

CLIENT = {"capabilities": {}, "clientInfo": {"name": "loopstate-handshake", "version": "0"}}


def _line(message: dict[str, Any]) -> bytes:
    return (json.dumps(message) + "\n").encode()


def envelope(version: str) -> dict[str, Any]:
    """The 2026-07-28 per-request ``_meta`` of this recording client."""
    return {"_meta": {early.PROTOCOL_KEY: version, early.ENVELOPE + "clientInfo": CLIENT["clientInfo"],
                      early.ENVELOPE + "clientCapabilities": CLIENT["capabilities"]}}


LISTEN_FILTER = {"toolsListChanged": True, "promptsListChanged": True, "resourcesListChanged": True}  # Claude Code's
LISTEN_ID = "listen:0"


def sdk_answers(version: str, *, modern: bool = False, timeout: float = 60.0) -> dict[str, bytes]:
    """The lines the SDK-only `loopstate mcp` writes for initialize (asking ``version``) and each of early.STATIC,
    or (``modern``) for each of early.MODERN in ``version``'s envelope and a subscriptions/listen's
    acknowledgement, by method (requests numbered 0, 1, ...)."""
    methods: tuple[str, ...]
    if modern:
        methods = (*early.MODERN, early.LISTEN)
        requests = [{"jsonrpc": "2.0", "id": n, "method": method, "params": envelope(version)}
                    for n, method in enumerate(early.MODERN)]
        requests.append({"jsonrpc": "2.0", "id": LISTEN_ID, "method": early.LISTEN,
                         "params": {**envelope(version), "notifications": LISTEN_FILTER}})
    else:
        methods = ("initialize", *early.STATIC)
        requests = [{"jsonrpc": "2.0", "id": 0, "method": "initialize", "params": {"protocolVersion": version, **CLIENT}},
                    {"jsonrpc": "2.0", "method": "notifications/initialized"}]
        requests += [{"jsonrpc": "2.0", "id": n, "method": method} for n, method in enumerate(early.STATIC, start=1)]
    with tempfile.TemporaryDirectory(prefix="loopstate-handshake-") as tmp:
        env = {**os.environ, early.DISABLE: "0", "LOOPSTATE_DATA_DIR": str(Path(tmp, "data")),
               "XDG_CACHE_HOME": str(Path(tmp, "cache"))}
        proc = subprocess.Popen([sys.executable, "-m", "loopstate.cli.main", "mcp"], stdin=subprocess.PIPE,
                                stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, env=env, cwd=tmp)
        assert proc.stdin is not None and proc.stdout is not None  # both are pipes
        try:
            proc.stdin.write(b"".join(map(_line, requests)))
            proc.stdin.flush()
            lines = [proc.stdout.readline() for _ in methods]  # a listen stream stays open: read what is owed, then stop
        finally:
            proc.kill()
            proc.wait(timeout=timeout)
    found: dict[str, bytes] = {}
    for line in lines:
        message = json.loads(line)
        if message.get("method") == early.ACKNOWLEDGED:
            found[early.LISTEN] = line
        elif isinstance(message.get("id"), int) and message["id"] < len(methods) and "result" in message:
            found[methods[message["id"]]] = line
    if sorted(found) != sorted(methods):
        raise RuntimeError(f"unexpected answers from loopstate mcp: {b''.join(lines)[:500]!r}")
    return {method: found[method] for method in methods}


def listen_template(line: bytes) -> dict[str, Any]:
    """The acknowledgement of LISTEN_FILTER as the text before and after its subscription id."""
    text = line.decode()
    marker = f'"{early.SUBSCRIPTION_KEY}":"{LISTEN_ID}"'
    if text.count(marker) != 1 or not text.endswith("\n"):
        raise RuntimeError(f"not a plain acknowledgement: {text[:300]!r}")
    head, tail = text[:-1].split(marker)
    return {"notifications": LISTEN_FILTER, "head": head + f'"{early.SUBSCRIPTION_KEY}":', "tail": tail}


def result_text(line: bytes, request_id: int) -> str:
    """The ``result`` of a response line exactly as written, checked to rebuild the line around any id."""
    head = f'{{"jsonrpc":"2.0","id":{request_id},"result":'.encode()
    if not (line.startswith(head) and line.endswith(b"}\n")):
        raise RuntimeError(f"not a plain result line: {line[:200]!r}")
    return line[len(head):-2].decode()


def record() -> dict[str, Any]:
    """The table, freshly recorded from the installed SDK."""
    from mcp_types.version import HANDSHAKE_PROTOCOL_VERSIONS, LATEST_HANDSHAKE_VERSION, MODERN_PROTOCOL_VERSIONS

    dists = early.distributions()
    if dists is None:
        raise RuntimeError("the MCP SDK is not installed as a distribution here; pip install 'loopstate[mcp]'")
    answers = {}
    for version in HANDSHAKE_PROTOCOL_VERSIONS:
        lines = sdk_answers(version)
        answers[version] = {method: result_text(line, n) for n, (method, line) in enumerate(lines.items())}
        negotiated = json.loads(answers[version]["initialize"])["protocolVersion"]
        if negotiated != version:
            raise RuntimeError(f"asked for {version}, the SDK negotiated {negotiated}")
    modern, listen = {}, {}
    for version in MODERN_PROTOCOL_VERSIONS:
        lines = sdk_answers(version, modern=True)
        listen[version] = listen_template(lines.pop(early.LISTEN))
        modern[version] = {method: result_text(line, n) for n, (method, line) in enumerate(lines.items())}
    return {"about": "written by python -m loopstate.mcpserver.handshake; do not edit",
            "fingerprint": early.fingerprint(dists), "distributions": dists,
            "latest": LATEST_HANDSHAKE_VERSION, "answers": answers, "modern": modern, "listen": listen}


def dumps(table: dict[str, Any]) -> str:
    return json.dumps(table, indent=1, sort_keys=True, ensure_ascii=False) + "\n"


def main(argv: list[str] | None = None) -> int:
    argv = sys.argv[1:] if argv is None else argv
    fresh = dumps(record())
    if "--check" in argv:
        current = Path(early.TABLE).read_text(encoding="utf-8") if os.path.exists(early.TABLE) else ""
        if current != fresh:
            sys.stderr.write(f"{early.TABLE} is stale: run python -m loopstate.mcpserver.handshake\n")
            return 1
        return 0
    Path(early.TABLE).write_text(fresh, encoding="utf-8")
    sys.stderr.write(f"wrote {early.TABLE}\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
