"""The host's MCP opening answered while the SDK is still being imported, then the stream handed to the SDK whole.

Both hosts build their first model request without a server that is still
starting, and importing the MCP SDK (pydantic models of three protocol
revisions) takes about 0.45 s on a quiet machine, seconds on a loaded one;
the interpreter is up in about 10 ms. So `loopstate mcp` starts this before
anything heavy (``cli/main.main``, as soon as argv is a plain ``mcp``):

- a thread, the only reader of the wire stdin for the whole process (fd 0
  is pointed at /dev/null, as the SDK's own stdio does), answers from
  ``handshake.json``: in the handshake era (Codex) ``initialize`` and then
  ``tools/list``, ``prompts/list`` and ``resources/templates/list``; in the
  2026-07-28 era (Claude Code 2.1) ``server/discover`` and the same lists,
  and a ``subscriptions/listen``'s acknowledgement. Those are the SDK's own
  answers, recorded byte for byte from this server with these early answers
  off (``mcpserver/handshake.py`` writes it; tests/mcp/test_mcp_handshake.py
  fails when it is stale and compares the bytes on the wire both ways);
- in the 2026-07-28 era also ``resources/list``, which Claude Code waits for
  before it counts the server's tools: the store's list, read in a thread of
  its own and written in the SDK's JSON (``mcpserver/early_resources.py``);
- every byte it reads, answered or not, goes on unchanged, in order, into a
  pipe that the SDK's stdio transport reads as its stdin. So the SDK still
  sees the host's whole opening, decides the era and commits the session's
  state as always; its own answers to the requests answered here (and its
  acknowledgement of a listen acknowledged here) are dropped on the way out
  (``stdio.Noting``), after a comparison that logs a warning if they ever
  differ;
- the main thread waits for the opening (``Early.settle``) before it imports
  the SDK, so that no answer here waits for the GIL behind the import.

Nothing is answered unless the table was recorded for exactly this install
(its ``fingerprint``: the sources that shape the answers and the SDK's and
pydantic's versions; else this machine's own recording of the SDK's
answers, ``Recorder``), the request is in a shape the SDK is sure to answer
so (anything unusual waits for the SDK), and no SDK is serving yet. Only the
standard library is imported here (the resources thread imports the service).
"""

from __future__ import annotations

import json
import os
import sys
import threading

TYPE_CHECKING = False
if TYPE_CHECKING:  # typing is ~2.5 ms more, pathlib ~2.7: neither is imported at run time
    from hashlib import sha256  # the same function as the builtin modules' below, which have no stubs
    from typing import Any
else:
    try:  # the builtin hash module: hashlib's import (OpenSSL) is ~2.5 ms of a ~20 ms answer
        from _sha2 import sha256  # Python 3.12+
    except ImportError:
        try:
            from _sha256 import sha256  # Python 3.11
        except ImportError:
            from hashlib import sha256

HERE = os.path.dirname(os.path.abspath(__file__))
TABLE = os.path.join(HERE, "handshake.json")
# The sources whose change can change an answer in the table (the tools, the
# instructions, the capabilities, the server's version).
SOURCES = tuple(os.path.join(HERE, name) for name in (os.path.join(os.pardir, "__init__.py"), "server.py", "tools.py", "roots.py"))
# The distributions whose version can change an answer (serialization, schema generation).
DISTRIBUTIONS = ("mcp", "mcp_types", "pydantic", "pydantic_core")
STATIC = ("tools/list", "prompts/list", "resources/templates/list")  # answered once initialize was
MODERN = ("server/discover", *STATIC)  # the 2026-07-28 era's: no handshake, each request carries its envelope
RESOURCES = "resources/list"  # modern: the store's, computed in a thread of its own (mcpserver/early_resources.py)
ENVELOPE = "io.modelcontextprotocol/"
PROTOCOL_KEY = ENVELOPE + "protocolVersion"
LISTEN = "subscriptions/listen"  # modern: its acknowledgement is sent early; the stream itself is the SDK's
ACKNOWLEDGED = "notifications/subscriptions/acknowledged"
SUBSCRIPTION_KEY = ENVELOPE + "subscriptionId"
DISABLE = "LOOPSTATE_MCP_EARLY"  # =0: no early answers, the SDK answers everything (a diagnostic; tests compare)
MAX_LINE = 1 << 20  # a longer first line: leave the rest to the SDK
# How long the main thread waits for the opening (``Early.settled``) before it imports the SDK anyway. While
# it imports, it holds the GIL for long stretches, and on a loaded machine a descheduled holder makes every
# answer here wait for it: measured with Claude Code under three CPU hogs, its connection took 0.4-0.75 s with
# the import running beside this thread.
SETTLE_SECONDS = 2.0  # at most, in all
SETTLE_IDLE = 0.25  # or this long without a request answered here (a host that lists no tools first)
LISTING_SECONDS = 2.0  # how long the SDK's start waits for a resources/list being read here

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
    listen = table.setdefault("listen", {})
    if not (isinstance(listen, dict) and all(isinstance(v, dict) and isinstance(v.get("head"), str)
                                             and isinstance(v.get("tail"), str) for v in listen.values())):
        return None
    for era in ("answers", "modern"):
        answers = table.setdefault(era, {})
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


def start(explicit_root: str | None = None) -> "Early | None":
    """Begin answering the handshake (once per process), unless disabled or no table fits (then the SDK's
    own answers of this session are recorded for the next one, ``Recorder``); ``explicit_root`` is the
    server's ``--root``."""
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
        current = Early(table, explicit_root)
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
        return None  # a missing field, _meta, anything else: the SDK decides
    if not (isinstance(params["protocolVersion"], str) and _capabilities(params["capabilities"])
            and _client_info(params["clientInfo"])):
        return None
    return params["protocolVersion"]


def opening_era(message: Any) -> str | None:
    """The era the SDK serves a connection in when ``message`` is its first request: ``modern`` when it carries
    the 2026-07-28 envelope (and is not initialize), ``legacy`` otherwise; None when it is no request (a
    notification, which decides nothing); ``unsure`` for a line the SDK might not take as a request at all."""
    if not isinstance(message, dict) or "method" not in message:
        return "unsure"
    if "id" not in message:
        return None
    if (message.get("jsonrpc") != "2.0" or not isinstance(message["method"], str) or _id_text(message["id"]) is None
            or not set(message) <= {"jsonrpc", "id", "method", "params"}
            or not isinstance(message.get("params", {}), dict)):
        return "unsure"
    meta = message.get("params", {}).get("_meta")
    return "modern" if message["method"] != "initialize" and isinstance(meta, dict) and PROTOCOL_KEY in meta else "legacy"


def _client_info(value: Any) -> bool:
    return (isinstance(value, dict) and isinstance(value.get("name"), str) and isinstance(value.get("version"), str)
            and "icons" not in value and _typed(value, {"title": str, "description": str, "websiteUrl": str}))


def _capabilities(value: Any) -> bool:
    if not isinstance(value, dict):
        return False
    for name, capability in value.items():
        if name in ("experimental", "extensions"):
            ok = isinstance(capability, dict) and all(isinstance(v, dict) for v in capability.values())
        elif name in CAPABILITIES:
            fields = CAPABILITIES[name]
            ok = capability == {} if fields is None else _typed(capability, fields)
        else:
            ok = True  # a capability the SDK does not know: it ignores it
        if not ok:
            return False
    return True


def plain_request(message: Any, era: str) -> tuple[Any, str, str | None] | None:
    """``(id, method, version)`` of a request this module may answer in ``era``, in a shape the SDK is sure to
    answer from its table alone; None for the rest. The version is the one an initialize asks for, or a
    modern request's envelope names; None for a legacy list request (the session's)."""
    if opening_era(message) != era:
        return None  # not a request, an unsure one, or one the SDK refuses in this era
    request_id, method, params = message["id"], message["method"], message.get("params", {})
    if era == "modern":
        meta = params["_meta"]
        keys = {"_meta", "notifications"} if method == LISTEN else {"_meta"}
        if ((method in MODERN or method in (LISTEN, RESOURCES)) and set(params) == keys and isinstance(meta[PROTOCOL_KEY], str)
                and set(meta) == {PROTOCOL_KEY, ENVELOPE + "clientInfo", ENVELOPE + "clientCapabilities"}
                and _client_info(meta[ENVELOPE + "clientInfo"]) and _capabilities(meta[ENVELOPE + "clientCapabilities"])):
            return request_id, method, meta[PROTOCOL_KEY]
        return None
    if method == "initialize":
        requested = _handshake_version(params)
        return None if requested is None else (request_id, method, requested)
    if method in STATIC and (params == {} or params == {"_meta": {"progressToken": params.get("_meta", {}).get("progressToken")}}
                             and type(params["_meta"]["progressToken"]) in (int, str)):
        return request_id, method, None  # Codex sends a progressToken with tools/list
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
        self.era: str | None = None
        self.asked: dict[Any, tuple[str, str | None]] = {}  # request id -> (method, version)
        self.key: str | None = None  # the legacy session's: the version its initialize asked for
        self.got: dict[tuple[str, str, str], str] = {}  # (era, version, method) -> result text
        self.listens: dict[Any, tuple[str | None, Any]] = {}  # listen request id -> (version, notifications filter)
        self.listen: dict[str, dict[str, Any]] = {}  # version -> the acknowledgement's template
        self.done = False
        self.seen = 0

    def request(self, message: dict[str, Any]) -> None:
        self.seen += 1
        if self.seen > 50:  # the handshake is long over
            self.done = True
        if self.era is None:
            self.era = opening_era(message)
            if self.era in (None, "unsure"):
                self.era, self.done = None, self.era == "unsure"
                return
        plain = plain_request(message, self.era)
        if plain is not None and plain[0] not in self.asked:
            self.asked[plain[0]] = plain[1], plain[2]
            if plain[1] == LISTEN:
                self.listens[plain[0]] = plain[2], message["params"]["notifications"]

    def acknowledged(self, subscription_id: Any, line: bytes) -> None:
        """The SDK's acknowledgement of a listen stream: kept as the text around its subscription id."""
        version, notifications = self.listens.pop(subscription_id, (None, None))
        marker = f'"{SUBSCRIPTION_KEY}":{_id_text(subscription_id)}'
        text = line.decode()
        if version is None or text.count(marker) != 1 or not text.endswith("\n"):
            return
        head, tail = text[:-1].split(marker)
        self.listen[version] = {"notifications": notifications, "head": head + f'"{SUBSCRIPTION_KEY}":', "tail": tail}
        if any(k[2] == "tools/list" for k in self.got):
            self.save()

    def response(self, request_id: Any, line: bytes) -> None:
        asked = self.asked.pop(request_id, None)
        if asked is None:
            return
        head = _line_head(request_id)
        if not (line.startswith(head) and line.endswith(b"}\n")):
            return  # an error: nothing to keep
        method, version = asked
        if self.era == "legacy":
            if method == "initialize":
                if self.key is not None:
                    return
                self.key = version
            version = self.key
        if version is None or self.era is None:  # (a request is asked only once its era is known)
            return
        self.got[(self.era, version, method)] = line[len(head):-2].decode()
        if any(k[2] == "tools/list" for k in self.got):
            self.save()

    def save(self) -> None:
        path = cache_path()
        table = _read_table(path, self.fingerprint) or {"fingerprint": self.fingerprint, "answers": {}}
        before = json.dumps(table, sort_keys=True)
        for (era, version, method), text in self.got.items():
            table.setdefault("answers" if era == "legacy" else "modern", {}).setdefault(version, {})[method] = text
        table.setdefault("listen", {}).update(self.listen)
        if json.dumps(table, sort_keys=True) == before:
            return  # known already
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

    def __init__(self, table: dict[str, Any], explicit_root: str | None = None) -> None:
        self.table = table
        self.explicit_root = explicit_root  # `loopstate mcp --root`: the project of a connection that names none
        self.listing: dict[Any, threading.Thread] = {}  # resources/list request id -> its ``_list_resources``
        self.answers: dict[str, dict[str, str]] = table["answers"]
        self.lock = threading.Lock()
        self.handed_over = False
        self.era: str | None = None  # legacy or modern, as the SDK will decide it from the first request
        self.version: str | None = None  # the legacy table's key for this session, once initialize was answered here
        self.sent: dict[Any, bytes] = {}  # request id -> the line written for it
        self.acks: dict[Any, bytes] = {}  # listen request id -> the acknowledgement written for it
        self.wire = os.dup(0)  # the host's stdin, read only here; fd 0 itself reads EOF from now on
        os.set_inheritable(self.wire, False)
        null = os.open(os.devnull, os.O_RDONLY)
        os.dup2(null, 0)
        os.close(null)
        self.sdk_stdin, self._to_sdk = os.pipe()
        self.thread = threading.Thread(target=self._pump, name="loopstate-mcp-early", daemon=True)
        self.settled = threading.Event()  # tools/list answered here, or nothing more will be: import the SDK

    def settle(self, timeout: float = SETTLE_SECONDS, idle: float = SETTLE_IDLE) -> None:
        """Wait (the GIL free) until the host has its tools, nothing more will be answered here, ``idle``
        seconds pass without an answer here, or ``timeout`` in all."""
        import time

        deadline = time.monotonic() + timeout
        while not self.settled.is_set():
            answered = len(self.sent) + len(self.acks)
            if self.settled.wait(min(idle, max(0.0, deadline - time.monotonic()))) or time.monotonic() >= deadline:
                return
            if len(self.sent) + len(self.acks) == answered:
                return  # nothing answered for ``idle``: the SDK is needed

    def hand_over(self) -> tuple[int, dict[Any, bytes], dict[Any, bytes]]:
        """Stop answering; the SDK's stdin (a pipe of every byte read), the answers already written by request
        id, and the listen acknowledgements by subscription (request) id. A resources/list still being read
        is waited for (LISTING_SECONDS at most, in all): it is a few reads, where the SDK would answer it only
        after its own start."""
        import time

        deadline = time.monotonic() + LISTING_SECONDS
        for thread in list(self.listing.values()):
            thread.join(max(0.0, deadline - time.monotonic()))
        with self.lock:
            self.handed_over = True
            self.settled.set()
            return self.sdk_stdin, dict(self.sent), dict(self.acks)

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
                    if self.handed_over:
                        self.settled.set()
                view = memoryview(data)
                while view:
                    view = view[os.write(self._to_sdk, view):]
        except OSError:
            pass  # the host's stdin is gone, or the SDK's end: the SDK sees the end of its input
        finally:
            self.settled.set()
            os.close(self._to_sdk)

    def _consider(self, line: bytes) -> None:
        """Answer ``line`` here if it is one of the handshake's requests in a plain shape; else leave it be."""
        if b"\r" in line:
            self.handed_over = self.handed_over or self.era is None
            return  # the SDK's text reader splits lines at a bare CR too
        try:
            message = json.loads(line, parse_constant=_forbid_constant)
        except (ValueError, RecursionError):
            if self.era is None:  # it might be the SDK's first request, deciding an era unseen here: stop
                self.handed_over = True
            return
        if self.era is None:
            era = opening_era(message)
            if era is None:
                return  # a notification before the first request
            if era == "unsure":
                self.handed_over = True
                return
            self.era = era
        plain = plain_request(message, self.era)
        if plain is None or plain[0] in self.sent:
            return
        request_id, method, version = plain
        if self.era == "modern" and method == LISTEN:
            self._acknowledge(request_id, message["params"]["notifications"], version)
            return
        if self.era == "modern" and method == RESOURCES:
            self._list_resources_soon(request_id, version)
            return
        if self.era == "modern":
            result = self.table.get("modern", {}).get(version, {}).get(method)
        else:
            if (method == "initialize") != (self.version is None):
                return  # a second initialize, or a list request before the first: the SDK's
            if method == "initialize":  # (an initialize always names the version it asks for)
                key = answer_key(self.table, version) if version is not None else None
            else:
                key = self.version
            result = self.answers.get(key, {}).get(method) if key is not None else None
            if method == "initialize" and result is not None:
                self.version = key
        if result is None:
            return
        if not self._write_answer(request_id, result):
            if method == "initialize":
                self.version = None
            return
        if method == "tools/list":
            self.settled.set()

    def _write_answer(self, request_id: Any, result: str) -> bool:
        """Write the response line of ``request_id`` (the lock held) and note it; False when the host's end is gone."""
        answer = _line_head(request_id) + result.encode() + b"}\n"
        try:
            view = memoryview(answer)
            while view:
                view = view[os.write(1, view):]
        except OSError:
            self.handed_over = True  # the host's end is gone: the SDK finds out on its own
            return False
        self.sent[request_id] = answer
        return True

    def _list_resources_soon(self, request_id: Any, version: str | None) -> None:
        """Start computing a modern ``resources/list`` in a thread of its own (the store is read: the pump must go
        on), when the table has the same version's ``prompts/list`` envelope to write it in."""
        from loopstate.mcpserver.early_resources import PROMPTS_LIST, envelope_of

        recorded = self.table.get("modern", {}).get(version, {}).get(PROMPTS_LIST)
        envelope = envelope_of(recorded) if isinstance(recorded, str) else None
        if envelope is not None and request_id not in self.listing:
            thread = threading.Thread(target=self._list_resources, args=(request_id, envelope),
                                      name="loopstate-mcp-resources", daemon=True)
            self.listing[request_id] = thread
            thread.start()

    def _list_resources(self, request_id: Any, envelope: str) -> None:
        from loopstate.mcpserver.early_resources import result_text

        try:
            result = result_text(envelope, self.explicit_root)
        except Exception:  # a bad root, a corrupt store, anything: the SDK answers it, with its error
            return
        with self.lock:
            if not self.handed_over and request_id not in self.sent:
                self._write_answer(request_id, result)

    def _acknowledge(self, request_id: Any, notifications: Any, version: str | None) -> None:
        """A listen stream's first frame, its acknowledgement, when the table has it for this filter
        (a modern request always names its version; None finds nothing)."""
        listen = self.table.get("listen", {}).get(version)
        if not (isinstance(listen, dict) and listen.get("notifications") == notifications) or request_id in self.acks:
            return
        line = (listen["head"] + _id_text(request_id) + listen["tail"] + "\n").encode()
        try:
            view = memoryview(line)
            while view:
                view = view[os.write(1, view):]
        except OSError:
            self.handed_over = True
            return
        self.acks[request_id] = line
