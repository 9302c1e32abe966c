"""A scripted model server on 127.0.0.1 that the real host CLIs talk to instead of a model provider.

A test gives it a script: one *turn* per model request the host will make, each a
list of steps (``Text("...")`` to answer, ``ToolCall(name, arguments)`` to make the
host run a tool). Every request the host sends is recorded (path, headers, parsed
JSON body), so a test asserts on what the host really sent the model: the injected
context, the tools offered, the tool results.

The wire dialects (how a turn is streamed back) live beside this file, one per
provider API: ``dialect_anthropic`` (Claude Code's ``POST /v1/messages``) and
``dialect_openai`` (Codex's ``POST /v1/responses``). A request to a path no dialect
answers gets 404, which both hosts tolerate for their side endpoints.

When the script runs out, the server answers with a plain text turn ("done"), so a
host that makes one more request than the test expected ends its turn instead of
hanging; ``extra_requests`` says how often that happened.
"""

from __future__ import annotations

import json
import threading
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any, Callable, Iterable


@dataclass(frozen=True)
class Text:
    text: str


@dataclass(frozen=True)
class ToolCall:
    name: str
    arguments: dict[str, Any]
    call_id: str = ""


Step = Text | ToolCall


@dataclass
class Recorded:
    method: str
    path: str
    headers: dict[str, str]
    body: Any


# A dialect streams one turn: (handler, request body, steps, turn number) -> None; it writes the response itself.
Dialect = Callable[[BaseHTTPRequestHandler, Any, list[Step], int], None]


@dataclass
class ModelServer:
    """Start with ``with ModelServer(dialects) as server:``; ``server.url`` is its base URL."""

    dialects: dict[str, Dialect]  # request path -> dialect
    script: list[list[Step]] = field(default_factory=list)
    requests: list[Recorded] = field(default_factory=list)
    extra_requests: int = 0

    def __post_init__(self) -> None:
        self._lock = threading.Lock()
        self._turn = 0
        server = self

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def log_message(self, *args: Any) -> None:  # quiet: the recording is the log
                pass

            def _read_body(self) -> Any:
                length = int(self.headers.get("Content-Length") or 0)
                raw = self.rfile.read(length) if length else b""
                try:
                    return json.loads(raw) if raw else None
                except ValueError:
                    return raw.decode("utf-8", "replace")

            def _answer(self, method: str) -> None:
                body = self._read_body() if method == "POST" else None
                path = self.path.split("?", 1)[0]
                dialect = server.dialects.get(path) if method == "POST" else None
                with server._lock:
                    server.requests.append(Recorded(method, path, dict(self.headers.items()), body))
                    steps, turn = server._next_turn() if dialect is not None else ([], -1)
                if dialect is None:
                    self.send_response(404)
                    self.send_header("Content-Type", "application/json")
                    self.send_header("Content-Length", "2")
                    self.end_headers()
                    self.wfile.write(b"{}")
                    return
                dialect(self, body, steps, turn)

            def do_POST(self) -> None:
                self._answer("POST")

            def do_GET(self) -> None:
                self._answer("GET")

        self._httpd = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self._httpd.daemon_threads = True
        self._thread = threading.Thread(target=self._httpd.serve_forever, daemon=True)

    def _next_turn(self) -> tuple[list[Step], int]:
        turn = self._turn
        self._turn += 1
        if turn < len(self.script):
            return self.script[turn], turn
        self.extra_requests += 1
        return [Text("done")], turn

    def then(self, script: list[list[Step]]) -> None:
        """Play ``script`` from the next request on (the turns of a test's next session in the same host home)."""
        with self._lock:
            self.script = self.script[:self._turn] + [[]] * max(0, self._turn - len(self.script)) + list(script)

    @property
    def url(self) -> str:
        host, port = self._httpd.server_address[:2]
        return f"http://{host}:{port}"

    def model_requests(self) -> list[Recorded]:
        """The requests a dialect answered, in order (what the host sent the model)."""
        return [r for r in self.requests if r.method == "POST" and r.path in self.dialects]

    def __enter__(self) -> "ModelServer":
        self._thread.start()
        return self

    def __exit__(self, *exc: Any) -> None:
        self._httpd.shutdown()
        self._httpd.server_close()


def sse(handler: BaseHTTPRequestHandler, events: Iterable[tuple[str, dict[str, Any]]]) -> None:
    """Write a complete Server-Sent Events response (event name, JSON data) and close it."""
    payload = b"".join(
        f"event: {name}\ndata: {json.dumps(data)}\n\n".encode("utf-8") for name, data in events)
    handler.send_response(200)
    handler.send_header("Content-Type", "text/event-stream")
    handler.send_header("Cache-Control", "no-cache")
    handler.send_header("Content-Length", str(len(payload)))
    handler.end_headers()
    handler.wfile.write(payload)
    handler.wfile.flush()
