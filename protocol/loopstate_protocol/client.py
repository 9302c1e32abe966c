"""LoopstateClient: a small synchronous stdio client for harness sidecars, scripts and tests.

It starts ``loopstate serve`` as a child process (or talks over streams it is
given), frames JSON-RPC with Content-Length, and has one reader thread that
files responses by id and queues notifications. It depends on the standard
library and msgspec alone.

    with LoopstateClient() as client:
        client.initialize()
        sub = client.subscribe("/path/to/project", "intent/snapshot")
        client.execute("/path/to/project", {"kind": "intent.task_start", "label": "demo"})
        change = client.next_change(timeout=5)
"""

from __future__ import annotations

import itertools
import os
import queue
import subprocess
import threading
import uuid
from typing import IO, Any, Callable, Sequence

import msgspec

from loopstate_protocol import methods
from loopstate_protocol.messages import (
    ChangedNotification,
    ExecuteResult,
    StreamErrorNotification,
    SubscribeResult,
    UnsubscribeResult,
)

DEFAULT_TIMEOUT = 30.0
DEFAULT_COMMAND = ("loopstate", "serve")

Trace = Callable[[str, bytes], None]
"""Called with ("send" or "recv", the JSON body) for every message, e.g. to record a session."""


class RpcError(Exception):
    """A JSON-RPC error response; ``code`` is the stable string from ``data.code``."""

    def __init__(self, error: dict[str, Any]) -> None:
        self.error = error
        self.number = error.get("code")
        self.message = error.get("message", "")
        raw = error.get("data")
        data: dict[str, Any] = raw if isinstance(raw, dict) else {}
        self.code = data.get("code")
        self.details = data.get("details", {})
        super().__init__(f"{self.code or self.number}: {self.message}")


class ServerGone(ConnectionError):
    """The server closed its stdout (it exited or crashed); ``returncode`` when known."""


class LoopstateClient:
    def __init__(
        self,
        command: Sequence[str] = DEFAULT_COMMAND,
        *,
        env: dict[str, str] | None = None,
        cwd: str | None = None,
        stderr: int | IO[bytes] | None = None,
        trace: Trace | None = None,
    ) -> None:
        self.command = list(command)
        self.env = env
        self.cwd = cwd
        self.stderr = stderr
        self.trace = trace
        self.process: subprocess.Popen[bytes] | None = None
        self._in: IO[bytes] | None = None
        self._out: IO[bytes] | None = None
        self._ids = itertools.count(1)
        self._send_lock = threading.Lock()
        self._cond = threading.Condition()
        self._responses: dict[Any, dict[str, Any]] = {}
        self.unmatched: list[dict[str, Any]] = []  # responses with id null or an id never sent
        self.notifications: queue.Queue[tuple[str, Any]] = queue.Queue()
        self._sent_ids: set[Any] = set()
        self._closed = False
        self._exit_sent = False
        self._reader: threading.Thread | None = None

    # connection -------------------------------------------------------------------

    @classmethod
    def over(cls, reader: IO[bytes], writer: IO[bytes], *, trace: Trace | None = None) -> "LoopstateClient":
        """A client over existing streams (a server in this process, a socket...)."""
        client = cls((), trace=trace)
        client._attach(reader, writer)
        return client

    def start(self) -> "LoopstateClient":
        self.process = subprocess.Popen(
            self.command, stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=self.stderr,
            env=self.env, cwd=self.cwd, bufsize=0,
        )
        assert self.process.stdin is not None and self.process.stdout is not None
        self._attach(self.process.stdout, self.process.stdin)
        return self

    def _attach(self, reader: IO[bytes], writer: IO[bytes]) -> None:
        self._in, self._out = reader, writer
        self._reader = threading.Thread(target=self._read_loop, name="loopstate-client-reader", daemon=True)
        self._reader.start()

    def __enter__(self) -> "LoopstateClient":
        if self.process is None and self._in is None:
            self.start()
        return self

    def __exit__(self, *exc: Any) -> None:
        self.close()

    def close(self, timeout: float = 10.0) -> int | None:
        """Shut down politely if still connected, then make sure the process is gone."""
        if not self._closed and not self._exit_sent:
            try:
                self.shutdown(timeout=timeout)
                self.exit()
            except (RpcError, ConnectionError, TimeoutError, OSError):
                pass
        return self.wait_exit(timeout)

    def wait_exit(self, timeout: float = 10.0) -> int | None:
        if self._out is not None:
            try:
                self._out.close()
            except OSError:
                pass
        if self.process is None:
            return None
        try:
            return self.process.wait(timeout)
        except subprocess.TimeoutExpired:
            self.process.kill()
            return self.process.wait()

    # framing ----------------------------------------------------------------------

    def send_frame(self, body: bytes, *, header: bytes | None = None, expect_id: Any = None) -> None:
        """Write one frame as given (``header`` overrides the Content-Length header block).

        ``expect_id``: the body is a request with this id, so ``response`` may wait for it.
        """
        if self._out is None:
            raise ServerGone("not connected")
        if expect_id is not None:
            with self._cond:
                self._sent_ids.add(expect_id)
        if self.trace is not None:
            self.trace("send", body)
        frame = (header if header is not None else b"Content-Length: %d\r\n\r\n" % len(body)) + body
        with self._send_lock:
            try:
                self._out.write(frame)
                self._out.flush()
            except (BrokenPipeError, ValueError) as exc:
                raise ServerGone(f"the server is not reading: {exc}") from None

    def _read_frame(self) -> bytes | None:
        assert self._in is not None
        length = None
        while True:
            line = self._in.readline()
            if not line:
                return None
            line = line.rstrip(b"\r\n")
            if not line:
                if length is None:
                    continue
                break
            name, _, value = line.partition(b":")
            if name.strip().lower() == b"content-length":
                length = int(value.strip())
        body = b""
        while len(body) < length:
            chunk = self._in.read(length - len(body))
            if not chunk:
                return None
            body += chunk
        return body

    def _read_loop(self) -> None:
        try:
            while (body := self._read_frame()) is not None:
                if self.trace is not None:
                    self.trace("recv", body)
                message = msgspec.json.decode(body)
                if "method" in message and "id" not in message:
                    self.notifications.put((message["method"], message.get("params")))
                    continue
                with self._cond:
                    msg_id = message.get("id")
                    if msg_id is None or msg_id not in self._sent_ids or msg_id in self._responses:
                        self.unmatched.append(message)
                    else:
                        self._responses[msg_id] = message
                    self._cond.notify_all()
        finally:
            with self._cond:
                self._closed = True
                self._cond.notify_all()

    # JSON-RPC -------------------------------------------------------------------------

    def send(self, method: str, params: Any = None, *, msg_id: Any = None) -> Any:
        """Send a request without waiting; returns its id (for pipelining)."""
        msg_id = next(self._ids) if msg_id is None else msg_id
        message: dict[str, Any] = {"jsonrpc": "2.0", "id": msg_id, "method": method}
        if params is not None:
            message["params"] = msgspec.to_builtins(params)
        with self._cond:
            self._sent_ids.add(msg_id)
        self.send_frame(msgspec.json.encode(message))
        return msg_id

    def response(self, msg_id: Any, timeout: float = DEFAULT_TIMEOUT) -> dict[str, Any]:
        """The whole response message to ``msg_id`` (result or error)."""
        with self._cond:
            if not self._cond.wait_for(lambda: msg_id in self._responses or self._closed, timeout):
                raise TimeoutError(f"no response to request {msg_id!r} within {timeout} s")
            if msg_id not in self._responses:
                raise ServerGone(f"the server closed the connection before answering {msg_id!r}")
            return self._responses.pop(msg_id)

    def wait(self, msg_id: Any, timeout: float = DEFAULT_TIMEOUT) -> Any:
        """The result of ``msg_id``; raises RpcError for an error response."""
        message = self.response(msg_id, timeout)
        if "error" in message:
            raise RpcError(message["error"])
        return message.get("result")

    def request(self, method: str, params: Any = None, timeout: float = DEFAULT_TIMEOUT) -> Any:
        return self.wait(self.send(method, params), timeout)

    def notify(self, method: str, params: Any = None) -> None:
        message: dict[str, Any] = {"jsonrpc": "2.0", "method": method}
        if params is not None:
            message["params"] = msgspec.to_builtins(params)
        self.send_frame(msgspec.json.encode(message))

    def next_notification(self, timeout: float = DEFAULT_TIMEOUT) -> tuple[str, Any]:
        try:
            return self.notifications.get(timeout=timeout)
        except queue.Empty:
            raise TimeoutError(f"no notification within {timeout} s") from None

    # the lifecycle --------------------------------------------------------------------

    def initialize(self, *, process_id: int | None = None, timeout: float = DEFAULT_TIMEOUT) -> dict[str, Any]:
        result: dict[str, Any] = self.request("initialize", {  # InitializeResult, an object
            "processId": os.getpid() if process_id is None else process_id,
            "clientInfo": {"name": "loopstate-client"},
            "capabilities": {},
        }, timeout)
        self.notify("initialized", {})
        return result

    def shutdown(self, timeout: float = DEFAULT_TIMEOUT) -> None:
        self.request("shutdown", None, timeout)

    def exit(self, timeout: float = 10.0) -> int | None:
        """Send ``exit``; returns the server's exit code when it is a child process."""
        self._exit_sent = True
        try:
            self.notify("exit")
        except ConnectionError:
            pass
        return self.wait_exit(timeout)

    # loopstate methods -----------------------------------------------------------------

    def execute(self, root: str, command: Any, request_id: str | None = None,
                timeout: float = DEFAULT_TIMEOUT) -> ExecuteResult:
        params = {"root": root, "request_id": request_id or str(uuid.uuid4()), "command": msgspec.to_builtins(command)}
        return msgspec.convert(self.request(methods.EXECUTE, params, timeout), ExecuteResult)

    def query(self, root: str, query: Any, timeout: float = DEFAULT_TIMEOUT) -> Any:
        return self.request(methods.QUERY, {"root": root, "query": msgspec.to_builtins(query)}, timeout)

    def subscribe(self, root: str, topic: str, *, since: int | None = None, deliver: str = "snapshot",
                  timeout: float = DEFAULT_TIMEOUT) -> SubscribeResult:
        params: dict[str, Any] = {"root": root, "topic": topic, "deliver": deliver}
        if since is not None:
            params["since"] = since
        return msgspec.convert(self.request(methods.SUBSCRIBE, params, timeout), SubscribeResult)

    def unsubscribe(self, subscription_id: str, timeout: float = DEFAULT_TIMEOUT) -> UnsubscribeResult:
        result = self.request(methods.UNSUBSCRIBE, {"subscription_id": subscription_id}, timeout)
        return msgspec.convert(result, UnsubscribeResult)

    def next_change(self, timeout: float = DEFAULT_TIMEOUT) -> ChangedNotification | StreamErrorNotification:
        """The next loopstate notification (other notifications are skipped)."""
        while True:
            method, params = self.next_notification(timeout)
            if method == methods.CHANGED:
                return msgspec.convert(params, ChangedNotification)
            if method == methods.STREAM_ERROR:
                return msgspec.convert(params, StreamErrorNotification)
