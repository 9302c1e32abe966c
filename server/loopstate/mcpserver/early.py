"""The MCP handshake answered while the SDK is still being imported, then the stream handed to the SDK whole.

Both hosts build their first model request without a server that is still
starting, and importing the MCP SDK (pydantic models of three protocol
revisions) takes about 0.45 s on a quiet machine, seconds on a loaded one;
the interpreter is up in about 10 ms. So `loopstate mcp` starts this before
anything heavy (``cli/main.main``, as soon as argv is a plain ``mcp``):

- a thread, the only reader of the wire stdin for the whole process (fd 0
  is pointed at /dev/null, as the SDK's own stdio does), answers
  ``initialize`` and then ``tools/list``, ``prompts/list`` and
  ``resources/templates/list`` from ``handshake.json``: the SDK's own
  answers, recorded byte for byte from this server with these early answers
  off (``mcpserver/handshake.py`` writes it; tests/mcp/test_mcp_handshake.py
  fails when it is stale and compares the bytes on the wire both ways);
- every byte it reads, answered or not, goes on unchanged, in order, into a
  pipe that the SDK's stdio transport reads as its stdin. So the SDK still
  sees the host's ``initialize`` and commits the session's state as always;
  its own answers to the requests answered here are dropped on the way out
  (``stdio.Noting``), after a comparison that logs a warning if they ever
  differ.

Nothing is answered unless the table was recorded for exactly this install
(its ``fingerprint``: the sources that shape the answers and the SDK's and
pydantic's versions), the request is in a shape the SDK is sure to accept
(anything unusual waits for the SDK), and no SDK is serving yet. Only the
standard library is imported here.
"""

from __future__ import annotations

import hashlib
import json
import os
import sys
import threading
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent
TABLE = HERE / "handshake.json"
# The sources whose change can change an answer in the table (the tools, the
# instructions, the capabilities, the server's version).
SOURCES = (HERE.parent / "__init__.py", HERE / "server.py", HERE / "tools.py", HERE / "roots.py")
# The distributions whose version can change an answer (serialization, schema generation).
DISTRIBUTIONS = ("mcp", "mcp_types", "pydantic", "pydantic_core")
STATIC = ("tools/list", "prompts/list", "resources/templates/list")  # answered once initialize was
DISABLE = "LOOPSTATE_MCP_EARLY"  # =0: no early answers, the SDK answers everything (a diagnostic; tests compare)
MAX_LINE = 1 << 20  # a longer first line: leave the rest to the SDK

current: "Early | None" = None  # the running one, for mcpserver/server.serve to take over


def distributions() -> dict[str, str] | None:
    """The installed ``name-version`` of each of DISTRIBUTIONS, from the site folder that holds the ``mcp``
    package the import system will find; None when that folder has no ``mcp`` distribution (a stray
    ``mcp`` folder, a broken install: no early answers, the SDK's import says what is wrong)."""
    found: dict[str, str] = {}
    sdk_seen = False
    for entry in sys.path:
        folder = entry or "."
        try:
            names = os.listdir(folder)
        except OSError:
            continue
        if not sdk_seen and (("mcp" in names and os.path.isfile(os.path.join(folder, "mcp", "__init__.py")))
                             or "mcp.py" in names):  # a package, not the SDK's `mcp` script in a bin folder
            sdk_seen = True
            if not any(n.startswith("mcp-") and n.endswith(".dist-info") for n in names):
                return None
        for name in names:
            if name.endswith(".dist-info"):
                dist, _, version = name[: -len(".dist-info")].partition("-")
                if dist in DISTRIBUTIONS and dist not in found:
                    found[dist] = f"{dist}-{version}"
    if not sdk_seen or len(found) != len(DISTRIBUTIONS):
        return None
    return {name: found[name] for name in DISTRIBUTIONS}


def fingerprint(dists: dict[str, str]) -> str:
    digest = hashlib.sha256()
    for name in DISTRIBUTIONS:
        digest.update(dists[name].encode() + b"\0")
    for source in SOURCES:
        digest.update(source.name.encode() + b"\0" + source.read_bytes() + b"\0")
    return digest.hexdigest()


def load() -> dict[str, Any] | None:
    """The table if it was recorded for this install, else None."""
    dists = distributions()
    if dists is None:
        return None
    try:
        table = json.loads(TABLE.read_bytes())
    except (OSError, ValueError):
        return None
    if not isinstance(table, dict) or table.get("fingerprint") != fingerprint(dists):
        return None
    return table


def start() -> "Early | None":
    """Begin answering the handshake (once per process), unless disabled or the table does not fit."""
    global current
    if current is not None or os.environ.get(DISABLE) == "0":
        return current
    table = load()
    if table is None:
        return None
    current = Early(table)
    current.thread.start()
    return current


def _forbid_constant(name: str) -> Any:
    raise ValueError(name)  # NaN, Infinity: not JSON, which the SDK's parser refuses


def _id_text(request_id: Any) -> str | None:
    """The id as the SDK writes it back, for the ids where that is certain (plain ints, plain ASCII strings)."""
    if type(request_id) is int:
        return str(request_id)
    if type(request_id) is str and len(request_id) <= 200 and all(" " <= c <= "~" and c not in '"\\' for c in request_id):
        return f'"{request_id}"'
    return None


def _is_object_of(value: Any, keys: set[str], kind: type | tuple[type, ...]) -> bool:
    return isinstance(value, dict) and set(value) <= keys and all(isinstance(v, kind) for v in value.values())


def _handshake_version(params: Any) -> str | None:
    """The protocol version an ``initialize`` asks for, when its params are in a shape the SDK accepts as is."""
    if not isinstance(params, dict) or set(params) != {"protocolVersion", "capabilities", "clientInfo"}:
        return None  # a missing field, _meta (a 2026 envelope), anything else: the SDK decides
    version, capabilities, client = params["protocolVersion"], params["capabilities"], params["clientInfo"]
    if not isinstance(version, str) or not isinstance(client, dict):
        return None
    if not (isinstance(client.get("name"), str) and isinstance(client.get("version"), str)
            and _is_object_of(client, {"name", "version", "title"}, str)):
        return None
    if not isinstance(capabilities, dict):
        return None
    for name, value in capabilities.items():
        if name == "roots":
            ok = _is_object_of(value, {"listChanged"}, bool)
        elif name == "elicitation":
            ok = _is_object_of(value, {"form", "url"}, dict) and all(not v for v in value.values())
        elif name == "sampling":
            ok = value == {}
        elif name in ("experimental", "extensions"):
            ok = isinstance(value, dict) and all(isinstance(v, dict) for v in value.values())
        else:
            ok = False
        if not ok:
            return None
    return version


class Early:
    """The handshake answerer and the pump from the wire's stdin into the SDK's (module docstring)."""

    def __init__(self, table: dict[str, Any]) -> None:
        self.answers: dict[str, dict[str, str]] = table["answers"]
        self.latest: str = table["latest"]
        self.lock = threading.Lock()
        self.handed_over = False
        self.version: str | None = None  # negotiated here, once initialize was answered here
        self.sent: dict[Any, bytes] = {}  # request id -> the line written for it
        self.wire = os.dup(0)  # the host's stdin, read only here; fd 0 itself reads EOF from now on
        os.set_inheritable(self.wire, False)
        null = os.open(os.devnull, os.O_RDONLY)
        os.dup2(null, 0)
        os.close(null)
        self.sdk_stdin, self._to_sdk = os.pipe()
        self.thread = threading.Thread(target=self._pump, name="loopstate-mcp-early", daemon=True)

    def hand_over(self) -> tuple[int, dict[Any, bytes]]:
        """Stop answering; the SDK's stdin (a pipe of every byte read) and the lines already written, by id."""
        with self.lock:
            self.handed_over = True
            return self.sdk_stdin, dict(self.sent)

    def _pump(self) -> None:
        partial = b""
        try:
            while True:
                data = os.read(self.wire, 1 << 16)
                if not data:
                    break
                if not self.handed_over:
                    lines = (partial + data).split(b"\n")
                    partial = lines.pop()
                    with self.lock:
                        for line in lines:
                            if self.handed_over:
                                break
                            self._consider(line)
                    if len(partial) > MAX_LINE:
                        with self.lock:
                            self.handed_over = True
                view = memoryview(data)
                while view:
                    view = view[os.write(self._to_sdk, view):]
        except OSError:
            pass  # the host's stdin is gone, or the SDK's end: the SDK sees the end of its input
        finally:
            os.close(self._to_sdk)

    def _consider(self, line: bytes) -> None:
        """Answer ``line`` here if it is one of the handshake's requests in a plain shape; else leave it be."""
        if b"\r" in line:
            return  # the SDK's text reader splits lines at a bare CR too
        try:
            message = json.loads(line, parse_constant=_forbid_constant)
        except (ValueError, RecursionError):
            return
        if (not isinstance(message, dict) or message.get("jsonrpc") != "2.0" or not isinstance(message.get("method"), str)
                or "id" not in message or not set(message) <= {"jsonrpc", "id", "method", "params"}):
            return
        request_id, method = message["id"], message["method"]
        id_text = _id_text(request_id)
        if id_text is None or request_id in self.sent:
            return
        if method == "initialize" and self.version is None:
            requested = _handshake_version(message.get("params"))
            if requested is None:
                return
            version = requested if requested in self.answers else self.latest
        elif method in STATIC and self.version is not None and message.get("params", {}) == {}:
            version = self.version
        else:
            return
        answer = f'{{"jsonrpc":"2.0","id":{id_text},"result":{self.answers[version][method]}}}\n'.encode()
        try:
            view = memoryview(answer)
            while view:
                view = view[os.write(1, view):]
        except OSError:
            self.handed_over = True  # the host's end is gone: the SDK finds out on its own
            return
        self.sent[request_id] = answer
        if method == "initialize":
            self.version = version
