"""`loopstate mcp`: the store as an MCP server on the official SDK's MCPServer, over stdio.

MCPServer gives the tools their typed input schemas, argument validation
and structured results. Three things it does not do are added on its
low-level server, the one place this module reaches below MCPServer:

- ``resources/list`` and ``resources/read`` are answered from the store (the
  runs and goals of the project, which change while the server runs), not
  from a fixed registry;
- ``resources/subscribe``/``unsubscribe``, answered with
  ``notifications/resources/updated`` when the store changes, and the SDK's
  ``subscriptions/listen`` (the 2026-07-28 protocol's way to follow URIs)
  made to follow the store for the URIs it names;
- the ``codex/sandbox-state-meta`` experimental capability, so Codex sends its
  sandbox cwd with each tool call (mcpserver/roots.py).

Every Service call runs on one worker thread, in arrival order, as in
``loopstate serve``.
"""

from __future__ import annotations

import asyncio
import contextvars
import io
import logging
import os
import warnings
from concurrent.futures import ThreadPoolExecutor
from typing import Any

import msgspec

from loopstate_protocol.errors import ErrorCode

from loopstate import __version__
from loopstate.core.errors import LoopstateError
from loopstate.core.ids import random_uuid
from loopstate.mcpserver import early, resources, roots
from loopstate.mcpserver.stdio import Answering, Noting
from loopstate.mcpserver.tools import tool_functions
from loopstate.service.engine import Service

log = logging.getLogger("loopstate.mcp")

INSTRUCTIONS = (
    "loopstate keeps this project's durable state. Start or resume your task with intent_task, record the user's "
    "intent with intent_claim (explicit only for the user's own words), act on runs under your lease (run_*), "
    "work goals with todo_ready and todo. To retry a change, resend its request_id. Errors start with a stable code. Resources "
    "(intent, runs, goals) can be subscribed to. Tell the user any notice."
)


class Session:
    """What this server knows about its one client: the roots it offers, the task it works on."""

    def __init__(self, explicit_root: str | None, cwd: str) -> None:
        self.explicit_root = explicit_root
        self.cwd = cwd
        self.client_roots: list[str] | None = None  # None: not asked yet (or changed since)
        self.last_sandbox: str | None = None
        self.task_id: str | None = None
        self.subscribed: set[str] = set()
        self.peer: Any = None  # the ServerSession, for notifications outside a request
        self.hinted: set[str] = set()  # the roots whose first answer was given (with its adoption notice, if any)


def _tool_error(exc: LoopstateError, notice: str | None = None) -> Any:
    from mcp.types import CallToolResult, TextContent

    text = f"{exc.code.value}: {exc.message}" + (f"\nnotice: {notice}" if notice else "")
    content = {"error": msgspec.to_builtins(exc.to_dict(), enc_hook=str), **({"notice": notice} if notice else {})}
    return CallToolResult(is_error=True, content=[TextContent(type="text", text=text)], structured_content=content)


def _compact_schema(schema: Any) -> Any:
    """The published input schema, said in fewer tokens than pydantic's: the same fields and types.

    Generated titles repeat the property names; an optional field's
    ``anyOf: [T, null]`` with ``default: null`` says what leaving it out of
    ``required`` already says. The arguments are still validated by the
    tool's full pydantic model, which also takes an explicit null.
    """
    if isinstance(schema, list):
        return [_compact_schema(v) for v in schema]
    if not isinstance(schema, dict):
        return schema
    out = {k: _compact_schema(v) for k, v in schema.items() if not (k == "title" and isinstance(v, str))}
    options = out.get("anyOf")
    if isinstance(options, list) and len(options) == 2 and {"type": "null"} in options and out.get("default", None) is None:
        kept = next(o for o in options if o != {"type": "null"})
        out = {**{k: v for k, v in out.items() if k not in ("anyOf", "default")}, **kept}
    return out


def lowlevel_of(server: Any) -> Any:
    """MCPServer's low-level ``Server``: the one SDK attribute loopstate reaches that is not public.

    MCPServer (mcp 2.3) has no public handle on the low-level server it builds,
    and offers no public way to answer ``resources/list`` from a live store, to
    add ``resources/subscribe``, to extend ``subscriptions/listen`` or to
    advertise an experimental capability; the low-level server's own methods
    for that (``add_request_handler``, ``create_initialization_options``) are
    public. Building the low-level server here instead would mean copying
    MCPServer's tool-call handling. So the SDK is pinned to 2.3 and
    tests/mcp/test_mcp_sdk_seam.py fails loudly if the attribute moves.
    """
    from mcp.server.lowlevel import Server

    lowlevel = getattr(server, "_lowlevel_server", None)
    if not isinstance(lowlevel, Server):
        raise RuntimeError("this MCP SDK's MCPServer has no low-level server where mcp 2.3 keeps it; "
                           "install the version loopstate pins: pip install 'loopstate[mcp]'")
    return lowlevel


def build_server(service: Service, session: Session) -> tuple[Any, Any]:
    """The MCPServer with loopstate's tools and resources (module docstring), and what closes it."""
    from mcp.server.mcpserver import Context, MCPServer
    from mcp.server.mcpserver.tools import Tool
    from mcp.shared.exceptions import MCPError
    from mcp.types import (
        INVALID_PARAMS,
        CallToolResult,
        EmptyResult,
        ListResourcesResult,
        ReadResourceResult,
        Resource,
        TextContent,
        TextResourceContents,
    )
    from pydantic import ValidationError

    worker = ThreadPoolExecutor(max_workers=1, thread_name_prefix="loopstate-service")
    state: dict[str, Any] = {"updates": None}

    async def on_worker(fn: Any, *args: Any) -> Any:
        return await asyncio.get_running_loop().run_in_executor(worker, fn, *args)

    async def client_root(peer: Any) -> str | None:
        params = getattr(peer, "client_params", None)
        if params is None or params.capabilities.roots is None:
            return None
        if session.client_roots is None:
            from mcp.shared.exceptions import NoBackChannelError

            try:
                with warnings.catch_warnings():
                    warnings.simplefilter("ignore")  # roots are deprecated from 2026-07-28 on; hosts still offer them
                    listed = await peer.list_roots()
            except NoBackChannelError:
                # A 2026-07-28 connection (Claude Code 2.1's): the server cannot ask the client anything,
                # so the roots it advertises cannot be read; the project is --root's or the cwd's, as
                # for a client without roots.
                session.client_roots = []
                return None
            except Exception as exc:  # the host's answer, whatever went wrong with it: refuse rather than guess
                raise LoopstateError(ErrorCode.INVALID_ROOT, f"the client offers roots, but roots/list failed "
                                     f"({type(exc).__name__}: {exc}); the project cannot be told") from None
            session.client_roots = [str(root.uri) for root in listed.roots]
        return roots.single_file_root(session.client_roots)

    async def root_of(ctx: Any | None) -> str:
        request = ctx.request_context if ctx is not None else None
        meta = request.meta if request is not None else None
        peer = request.session if request is not None else session.peer
        sandbox = roots.sandbox_cwd(meta)
        if sandbox is not None:
            session.last_sandbox = sandbox
        choice = roots.choose(sandbox=sandbox or session.last_sandbox, client_root=await client_root(peer) if peer else None,
                              explicit=session.explicit_root, cwd=session.cwd)
        return choice.root

    call_root: contextvars.ContextVar[str] = contextvars.ContextVar("call_root")  # per call: calls may overlap

    async def execute(command: Any, request_id: str | None = None) -> dict[str, Any]:
        """Apply ``command`` under the caller's request id (an exact retry returns the first
        result, replayed), or a fresh one when the caller gave none."""
        outcome = await on_worker(service.execute, call_root.get(), command, request_id or random_uuid())
        return {"events": outcome.events, "head": msgspec.to_builtins(outcome.head), "replayed": outcome.replayed}

    async def query(message: Any) -> Any:
        return msgspec.to_builtins(await on_worker(service.query, call_root.get(), message))

    async def first_notice(root: str) -> str | None:
        """The first answer for a root says when it has no state but looks like a moved or re-cloned
        project (service/adopt.py), with the `loopstate project adopt` that carries the state over."""
        if root in session.hinted:
            return None
        session.hinted.add(root)
        from loopstate.service.adopt import hint

        return await on_worker(hint, root)

    def wrap(fn: Any) -> Any:
        """The tool as MCPServer calls it: the call's root first, loopstate errors as tool errors."""

        async def call(ctx: Context, **arguments: Any) -> CallToolResult:
            session.peer = ctx.request_context.session
            said = None
            try:
                root = await root_of(ctx)
                call_root.set(root)
                said = await first_notice(root)
                result = await fn(**arguments)
            except LoopstateError as exc:
                return _tool_error(exc, said)
            if said is not None and isinstance(result, dict):
                result = {**result, "notice": said}
            text = msgspec.json.encode(result).decode()
            return CallToolResult(content=[TextContent(type="text", text=text)], structured_content=result)

        return call

    class CheckedTool(Tool):
        """A tool whose malformed arguments are INVALID_PARAMS naming each field, like every loopstate refusal.

        (MCPServer's own message has no code, and it drops unknown argument
        names silently; the protocol refuses unknown fields, so this does too.)
        """

        async def run(self, arguments: dict[str, Any], context: Any, convert_result: bool = False) -> Any:
            known = {field.alias or name for name, field in self.fn_metadata.arg_model.model_fields.items()}
            unknown = sorted(set(arguments) - known)
            try:
                if unknown:
                    raise LoopstateError(ErrorCode.INVALID_PARAMS,
                                         f"{self.name}: unknown argument(s) {', '.join(unknown)}; it takes {', '.join(sorted(known))}",
                                         unknown=unknown)
                self.fn_metadata.validate_arguments(arguments)
            except ValidationError as exc:
                problems = "; ".join(f"{'.'.join(str(p) for p in e['loc']) or 'arguments'}: {e['msg']}" for e in exc.errors())
                return _tool_error(LoopstateError(ErrorCode.INVALID_PARAMS, f"{self.name}: {problems}"))
            except LoopstateError as exc:
                return _tool_error(exc)
            return await super().run(arguments, context, convert_result)

    tools = []
    for fn in tool_functions(execute, query, session):
        tool = CheckedTool.from_function(fn, name=fn.__name__, description=fn.__doc__, structured_output=False)
        tool.parameters = _compact_schema(tool.parameters)
        tools.append(tool.model_copy(update={"fn": wrap(fn), "context_kwarg": "ctx"}))
    from mcp.server.subscriptions import InMemorySubscriptionBus

    bus = InMemorySubscriptionBus()  # the subscriptions/listen fan-out, handed to MCPServer so it stays ours to publish on
    server = MCPServer("loopstate", instructions=INSTRUCTIONS, version=__version__, tools=tools, log_level="WARNING",
                       subscriptions=bus)
    lowlevel = lowlevel_of(server)

    def resource_error(exc: LoopstateError, uri: str) -> MCPError:
        return MCPError(code=INVALID_PARAMS, message=f"{exc.code.value}: {exc.message}",
                        data={"uri": uri, "code": exc.code.value, "details": msgspec.to_builtins(exc.details, enc_hook=str)})

    async def list_resources(ctx: Any, params: Any) -> Any:
        session.peer = ctx.session
        try:
            found = await on_worker(resources.listing, service, await root_of(None))
        except LoopstateError as exc:
            raise resource_error(exc, "") from None
        return ListResourcesResult(resources=[
            Resource(uri=view.uri, name=name, mime_type="application/json") for view, name in found
        ])

    async def read_resource(ctx: Any, params: Any) -> Any:
        session.peer = ctx.session
        uri = str(params.uri)
        try:
            view = resources.parse(uri)
            text = await on_worker(resources.read, service, await root_of(None), view)
        except LoopstateError as exc:
            raise resource_error(exc, uri) from None
        return ReadResourceResult(contents=[TextResourceContents(uri=uri, text=text, mime_type="application/json")])

    async def notify(uri: str) -> None:
        from mcp.server.subscriptions import ResourceUpdated

        if uri in session.subscribed and session.peer is not None:
            await session.peer.send_resource_updated(uri)
        await bus.publish(ResourceUpdated(uri=uri))

    async def follow(uri: str) -> None:
        """Start following ``uri`` for a subscriber; refused (NOT_FOUND) for a URI that is not this project's."""
        view = resources.parse(uri)
        root = await root_of(None)
        await on_worker(resources.check_project, service, root, view)
        if state["updates"] is None:
            from loopstate.service.live import Live

            loop = asyncio.get_running_loop()
            state["updates"] = resources.Updates(service, Live(service, worker, loop), loop, notify)
        await state["updates"].subscribe(root, view)

    def unfollow(uri: str) -> None:
        if state["updates"] is not None:
            state["updates"].unsubscribe(uri)

    async def subscribe(ctx: Any, params: Any) -> Any:
        session.peer = ctx.session
        uri = str(params.uri)
        if uri not in session.subscribed:  # subscribing twice is one subscription
            try:
                await follow(uri)
            except LoopstateError as exc:
                raise resource_error(exc, uri) from None
            session.subscribed.add(uri)
        return EmptyResult()

    async def unsubscribe(ctx: Any, params: Any) -> Any:
        uri = str(params.uri)
        if uri in session.subscribed:
            session.subscribed.discard(uri)
            unfollow(uri)
        return EmptyResult()

    listen_entry = lowlevel.get_request_handler("subscriptions/listen")

    async def listen(ctx: Any, params: Any) -> Any:
        """The SDK's subscriptions/listen stream (2026-07-28), with the store followed for its URIs while it lasts.

        A URI that is not this project's is acknowledged and never fires, as the SDK does for any unknown URI.
        """
        followed = []
        for uri in params.notifications.resource_subscriptions or ():
            try:
                await follow(uri)
                followed.append(uri)
            except LoopstateError as exc:
                log.info("listen: %s is not followed: %s", uri, exc.message)
        try:
            return await listen_entry.handler(ctx, params)
        finally:
            for uri in followed:
                unfollow(uri)

    async def roots_changed(ctx: Any, params: Any) -> None:
        session.client_roots = None

    from mcp.types import (
        NotificationParams,
        PaginatedRequestParams,
        ReadResourceRequestParams,
        SubscribeRequestParams,
        UnsubscribeRequestParams,
    )

    lowlevel.add_request_handler("resources/list", PaginatedRequestParams, list_resources)
    lowlevel.add_request_handler("resources/read", ReadResourceRequestParams, read_resource)
    lowlevel.add_request_handler("resources/subscribe", SubscribeRequestParams, subscribe)
    lowlevel.add_request_handler("resources/unsubscribe", UnsubscribeRequestParams, unsubscribe)
    lowlevel.add_request_handler("subscriptions/listen", listen_entry.params_type, listen)
    lowlevel.add_notification_handler("notifications/roots/list_changed", NotificationParams, roots_changed)

    def close() -> None:
        if state["updates"] is not None:
            state["updates"].close()
        worker.shutdown(wait=False, cancel_futures=True)

    return server, close


async def serve(service: Service, explicit_root: str | None) -> None:
    import anyio
    from mcp.server.stdio import stdio_server

    session = Session(explicit_root, os.getcwd())
    server, close = build_server(service, session)
    lowlevel = lowlevel_of(server)
    options = lowlevel.create_initialization_options(experimental_capabilities={roots.SANDBOX_META: {}})
    stdin, written, acks = None, {}, {}
    if early.current is not None:  # the handshake may be answered already: the SDK takes the whole stream from here
        fd, written, acks = early.current.hand_over()
        stdin = anyio.wrap_file(io.TextIOWrapper(os.fdopen(fd, "rb"), encoding="utf-8", errors="replace"))
        if written or acks:
            log.info("answered request(s) %s before the SDK was loaded", ", ".join(map(repr, [*written, *acks])))
    try:
        async with stdio_server(stdin=stdin) as (read_stream, write_stream):
            writer = Noting(write_stream, written, early.recording, acks)
            await lowlevel.run(Answering(read_stream, writer), writer, options)
    finally:
        close()


def run(service: Service, explicit_root: str | None) -> int:
    import anyio

    anyio.run(serve, service, explicit_root)
    return 0
