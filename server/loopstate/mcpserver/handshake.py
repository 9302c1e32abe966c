"""Writes ``handshake.json``: the SDK's own answers to the handshake, recorded from `loopstate mcp` itself.

For each protocol revision the SDK negotiates through ``initialize``, this
starts `loopstate mcp` with the early answers off (``LOOPSTATE_MCP_EARLY=0``,
so the SDK answers everything), sends ``initialize`` and the requests of
``early.STATIC`` over its real stdio, and keeps each answer's ``result`` as
the exact bytes the SDK wrote. So the tool list in the table is the one
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


def sdk_answers(version: str, *, timeout: float = 60.0) -> dict[str, bytes]:
    """The lines the SDK-only `loopstate mcp` writes for initialize (asking ``version``) and each of early.STATIC,
    by method (requests numbered 0, 1, ... in that order)."""
    methods = ("initialize", *early.STATIC)
    requests = [{"jsonrpc": "2.0", "id": 0, "method": "initialize", "params": {"protocolVersion": version, **CLIENT}},
                {"jsonrpc": "2.0", "method": "notifications/initialized"}]
    requests += [{"jsonrpc": "2.0", "id": n, "method": method} for n, method in enumerate(early.STATIC, start=1)]
    with tempfile.TemporaryDirectory(prefix="loopstate-handshake-") as tmp:
        env = {**os.environ, early.DISABLE: "0", "LOOPSTATE_DATA_DIR": str(Path(tmp, "data"))}
        done = subprocess.run([sys.executable, "-m", "loopstate.cli.main", "mcp"], input=b"".join(map(_line, requests)),
                              capture_output=True, env=env, cwd=tmp, timeout=timeout, check=True)
    lines = done.stdout.splitlines(keepends=True)
    by_id = {json.loads(line)["id"]: line for line in lines}
    if sorted(by_id) != list(range(len(methods))) or len(lines) != len(methods):
        raise RuntimeError(f"unexpected answers from loopstate mcp: {done.stdout[:500]!r}")
    return {method: by_id[n] for n, method in enumerate(methods)}


def result_text(line: bytes, request_id: int) -> str:
    """The ``result`` of a response line exactly as written, checked to rebuild the line around any id."""
    head = f'{{"jsonrpc":"2.0","id":{request_id},"result":'.encode()
    if not (line.startswith(head) and line.endswith(b"}\n")):
        raise RuntimeError(f"not a plain result line: {line[:200]!r}")
    return line[len(head):-2].decode()


def record() -> dict[str, Any]:
    """The table, freshly recorded from the installed SDK."""
    from mcp_types.version import HANDSHAKE_PROTOCOL_VERSIONS, LATEST_HANDSHAKE_VERSION

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
    return {"about": "written by python -m loopstate.mcpserver.handshake; do not edit",
            "fingerprint": early.fingerprint(dists), "distributions": dists,
            "latest": LATEST_HANDSHAKE_VERSION, "answers": answers}


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
