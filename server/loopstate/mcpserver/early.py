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

import json
import os
import sys
import threading

try:  # the builtin hash module: hashlib's import (OpenSSL) is ~2.5 ms of a ~20 ms answer
    from _sha2 import sha256  # Python 3.12+
except ImportError:
    try:
        from _sha256 import sha256  # Python 3.11
    except ImportError:
        from hashlib import sha256

TYPE_CHECKING = False
if TYPE_CHECKING:  # typing is ~2.5 ms more, pathlib ~2.7: neither is imported at run time
    from typing import Any

HERE = os.path.dirname(os.path.abspath(__file__))
TABLE = os.path.join(HERE, "handshake.json")
# The sources whose change can change an answer in the table (the tools, the
# instructions, the capabilities, the server's version).
SOURCES = tuple(os.path.join(HERE, name) for name in (os.path.join(os.pardir, "__init__.py"), "server.py", "tools.py", "roots.py"))
# The distributions whose version can change an answer (serialization, schema generation).
DISTRIBUTIONS = ("mcp", "mcp_types", "pydantic", "pydantic_core")
STATIC = ("tools/list", "prompts/list", "resources/templates/list")  # answered once initialize was
DISABLE = "LOOPSTATE_MCP_EARLY"  # =0: no early answers, the SDK answers everything (a diagnostic; tests compare)
MAX_LINE = 1 << 20  # a longer first line: leave the rest to the SDK

current: "Early | None" = None  # the running one, for mcpserver/server.serve to take over
recording: "Recorder | None" = None  # when no table fits: what the SDK answers, for the next start


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
    digest = sha256()
    for name in DISTRIBUTIONS:
        digest.update(dists[name].encode() + b"\0")
    for source in SOURCES:
        with open(source, "rb") as file:
            digest.update(os.path.basename(source).encode() + b"\0" + file.read() + b"\0")
    return digest.hexdigest()


def cache_path() -> str:
    """This machine's table, for an install the checked-in one was not recorded for (``Recorder``)."""
    base = os.environ.get("XDG_CACHE_HOME") or os.path.join(os.path.expanduser("~"), ".cache")
    return os.path.join(base, "loopstate", "mcp-handshake.json")


def _read_table(path: str, expected: str) -> dict[str, Any] | None:
    try:
        with open(path, "rb") as file:
            table = json.loads(file.read())
    except (OSError, ValueError, RecursionError):
        return None
    if not isinstance(table, dict) or table.get("fingerprint") != expected:
        return None
    answers = table.get("answers")
    if not (isinstance(answers, dict) and all(isinstance(a, dict) and all(isinstance(t, str) for t in a.values())
                                              for a in answers.values())):
        return None
    return table


def load(dists: dict[str, str] | None = None) -> dict[str, Any] | None:
    """The checked-in table if it was recorded for this install, else this machine's if it was, else None."""
    dists = dists or distributions()
    if dists is None:
        return None
    expected = fingerprint(dists)
    return _read_table(TABLE, expected) or _read_table(cache_path(), expected)


def start() -> "Early | None":
    """Begin answering the handshake (once per process), unless disabled or no table fits (then the SDK's
    own answers of this session are recorded for the next one, ``Recorder``)."""
    global current, recording
    if current is not None or os.environ.get(DISABLE) == "0":
        return current
    dists = distributions()
    table = load(dists) if dists is not None else None
    if dists is not None and table is not None and table.get("latest") is None:
        recording = Recorder(dists)  # this machine's table: a version it lacks is kept when the SDK answers it
    if table is None:
        recording = Recorder(dists) if dists is not None else None
        return None
    try:
        current = Early(table)
    except OSError:  # no stdin to take (closed), no descriptor for the pipe: the SDK's stdio says what is wrong
        return None
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


def _typed(value: Any, fields: dict[str, Any]) -> bool:
    """An object whose ``fields`` that are present have their type; other fields are the SDK's to ignore (its
    capability and implementation models all take unknown fields and drop them)."""
    return isinstance(value, dict) and all(isinstance(value[k], kind) for k, kind in fields.items() if k in value)


# The capabilities the SDK's models know, with the types of their known fields;
# None: a known capability left to the SDK unless it is an empty object.
CAPABILITIES: dict[str, dict[str, Any] | None] = {
    "roots": {"listChanged": bool},
    "elicitation": {"form": dict, "url": dict},
    "sampling": {"context": dict, "tools": dict},
    "tasks": None,
}


def _handshake_version(params: Any) -> str | None:
    """The protocol version an ``initialize`` asks for, when its params are in a shape the SDK accepts as is."""
    if not isinstance(params, dict) or set(params) != {"protocolVersion", "capabilities", "clientInfo"}:
        return None  # a missing field, _meta (a 2026 envelope), anything else: the SDK decides
    version, capabilities, client = params["protocolVersion"], params["capabilities"], params["clientInfo"]
    if not isinstance(version, str) or not isinstance(capabilities, dict):
        return None
    if not (isinstance(client, dict) and isinstance(client.get("name"), str) and isinstance(client.get("version"), str)
            and "icons" not in client and _typed(client, {"title": str, "description": str, "websiteUrl": str})):
        return None
    for name, value in capabilities.items():
        if name in ("experimental", "extensions"):
            ok = isinstance(value, dict) and all(isinstance(v, dict) for v in value.values())
        elif name in CAPABILITIES:
            fields = CAPABILITIES[name]
            ok = value == {} if fields is None else _typed(value, fields)
        else:
            ok = True  # a capability the SDK does not know: it ignores it
        if not ok:
            return None
    return version


def plain_request(message: Any) -> tuple[Any, str, str | None] | None:
    """``(id, method, requested version)`` of a handshake request (initialize, one of STATIC) in a shape the
    SDK is sure to answer from its table alone (the version is None but for initialize); None for the rest."""
    if (not isinstance(message, dict) or message.get("jsonrpc") != "2.0" or not isinstance(message.get("method"), str)
            or "id" not in message or not set(message) <= {"jsonrpc", "id", "method", "params"}):
        return None
    request_id, method = message["id"], message["method"]
    if _id_text(request_id) is None:
        return None
    if method == "initialize":
        requested = _handshake_version(message.get("params"))
        return None if requested is None else (request_id, method, requested)
    if method in STATIC and message.get("params", {}) == {}:
        return request_id, method, None
    return None


def _line_head(request_id: Any) -> bytes:
    return f'{{"jsonrpc":"2.0","id":{_id_text(request_id)},"result":'.encode()


def answer_key(table: dict[str, Any], requested: str) -> str | None:
    """Which of the table's answers an initialize asking for ``requested`` gets: its own, else (a version the
    SDK does not negotiate, in the checked-in table) the SDK's latest; None when the table cannot say."""
    answers = table["answers"]
    if requested in answers:
        return requested
    latest = table.get("latest")
    return latest if latest in answers else None


class Recorder:
    """The SDK's own answers to this session's plain handshake requests, kept in this machine's table.

    Used when neither the checked-in table nor this machine's fits the
    install (another SDK or pydantic version than the one the repository
    records with): the next `loopstate mcp` of the same install answers the
    same handshake early. Keyed like the checked-in table (``fingerprint``),
    by the version the client asked for. stdio.Answering reports the requests,
    stdio.Noting the SDK's answer lines.
    """

    def __init__(self, dists: dict[str, str]) -> None:
        self.fingerprint = fingerprint(dists)
        self.asked: dict[Any, tuple[str, str | None]] = {}  # request id -> (method, requested version)
        self.key: str | None = None
        self.got: dict[str, str] = {}
        self.done = False
        self.seen = 0

    def request(self, message: dict[str, Any]) -> None:
        self.seen += 1
        if self.seen > 50:  # the handshake is long over
            self.done = True
        plain = plain_request(message)
        if plain is not None and plain[0] not in self.asked and (plain[1] != "initialize" or self.key is None):
            self.asked[plain[0]] = plain[1], plain[2]

    def response(self, request_id: Any, line: bytes) -> None:
        asked = self.asked.pop(request_id, None)
        if asked is None:
            return
        head = _line_head(request_id)
        if not (line.startswith(head) and line.endswith(b"}\n")):
            return  # an error: nothing to keep
        method, requested = asked
        if method == "initialize":
            self.key, self.got = requested, {}
        elif self.key is None:
            return
        self.got[method] = line[len(head):-2].decode()
        if "initialize" in self.got and "tools/list" in self.got:
            self.save()
            self.done = len(self.got) == 1 + len(STATIC)

    def save(self) -> None:
        path = cache_path()
        table = _read_table(path, self.fingerprint) or {"fingerprint": self.fingerprint, "answers": {}}
        kept = {**table["answers"].get(self.key, {}), **self.got}
        if kept == table["answers"].get(self.key):
            return  # known already
        table["answers"][self.key] = kept
        temp = f"{path}.{os.getpid()}.tmp"
        try:
            os.makedirs(os.path.dirname(path), exist_ok=True)
            with open(temp, "w", encoding="utf-8") as file:
                json.dump(table, file, ensure_ascii=False, sort_keys=True, indent=1)
            os.replace(temp, path)
        except OSError:
            try:
                os.unlink(temp)
            except OSError:
                pass


class Early:
    """The handshake answerer and the pump from the wire's stdin into the SDK's (module docstring)."""

    def __init__(self, table: dict[str, Any]) -> None:
        self.table = table
        self.answers: dict[str, dict[str, str]] = table["answers"]
        self.lock = threading.Lock()
        self.handed_over = False
        self.version: str | None = None  # the table's key for this session, once initialize was answered here
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
            plain = plain_request(json.loads(line, parse_constant=_forbid_constant))
        except (ValueError, RecursionError):
            return
        if plain is None or plain[0] in self.sent:
            return
        request_id, method, requested = plain
        if method == "initialize" and self.version is None:
            version = answer_key(self.table, requested)
        elif method != "initialize" and self.version is not None:
            version = self.version
        else:
            return
        result = self.answers.get(version, {}).get(method) if version is not None else None
        if result is None:
            return
        answer = _line_head(request_id) + result.encode() + b"}\n"
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
