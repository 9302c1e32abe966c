"""The OpenAI Responses wire dialect: how the model server streams one turn to Codex (``POST /v1/responses``).

Codex reads a turn as Server-Sent Events: ``response.created``, then per output
item ``response.output_item.added`` and ``response.output_item.done`` (a
``message`` item with ``output_text`` content, or a ``function_call`` item whose
``arguments`` is a JSON string, which makes Codex run that tool and send its
``function_call_output`` in the next request), then ``response.completed``.
Only the events and fields Codex 0.171 needs to end a turn are sent.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from http.server import BaseHTTPRequestHandler
from typing import Any, Iterator

from modelserver import Step, Text, ToolCall, sse

PATH = "/v1/responses"


@dataclass(frozen=True)
class ToolSearch:
    """The model searches Codex's deferred tools (Codex 0.171 reaches MCP tools only this way): a
    ``tool_search_call`` item run by the client, whose ``tool_search_output`` lists the tools found."""

    query: str
    call_id: str = ""


@dataclass(frozen=True)
class NamespacedCall:
    """A call of a tool that a ``tool_search`` exposed inside a namespace (an MCP server's: ``mcp__loopstate``)."""

    namespace: str
    name: str
    arguments: dict[str, Any]
    call_id: str = ""


@dataclass(frozen=True)
class Usage:
    """Not an item: the token usage this turn reports in ``response.completed`` (Codex compacts its context
    when the usage passes ``model_auto_compact_token_limit``)."""

    total_tokens: int


def _items(steps: list[Step], turn: int) -> Iterator[dict[str, Any]]:
    for index, step in enumerate(steps):
        if isinstance(step, Text):
            yield {"type": "message", "role": "assistant", "id": f"msg_{turn}_{index}", "status": "completed",
                   "content": [{"type": "output_text", "text": step.text, "annotations": []}]}
        elif isinstance(step, ToolCall):
            yield {"type": "function_call", "id": f"fc_{turn}_{index}", "status": "completed", "name": step.name,
                   "call_id": step.call_id or f"call_{turn}_{index}", "arguments": json.dumps(step.arguments)}
        elif isinstance(step, NamespacedCall):
            yield {"type": "function_call", "id": f"fc_{turn}_{index}", "status": "completed", "name": step.name,
                   "namespace": step.namespace, "call_id": step.call_id or f"call_{turn}_{index}",
                   "arguments": json.dumps(step.arguments)}
        elif isinstance(step, ToolSearch):
            yield {"type": "tool_search_call", "id": f"tsc_{turn}_{index}", "status": "completed",
                   "execution": "client", "call_id": step.call_id or f"call_{turn}_{index}",
                   "arguments": {"query": step.query}}
        elif not isinstance(step, Usage):
            raise TypeError(f"a turn step must be Text, ToolCall, ToolSearch or Usage, not {step!r}")


def respond(handler: BaseHTTPRequestHandler, body: Any, steps: list[Step], turn: int) -> None:
    response_id = f"resp_{turn}"
    events: list[tuple[str, dict[str, Any]]] = [
        ("response.created", {"type": "response.created", "response": {"id": response_id}})]
    for index, item in enumerate(_items(steps, turn)):
        events.append(("response.output_item.added",
                       {"type": "response.output_item.added", "output_index": index, "item": item}))
        events.append(("response.output_item.done",
                       {"type": "response.output_item.done", "output_index": index, "item": item}))
    total = next((step.total_tokens for step in steps if isinstance(step, Usage)), 15)
    events.append(("response.completed", {"type": "response.completed", "response": {
        "id": response_id, "usage": {"input_tokens": total - 5, "input_tokens_details": None, "output_tokens": 5,
                                     "output_tokens_details": None, "total_tokens": total}}}))
    sse(handler, events)


DIALECTS = {PATH: respond}


def input_texts(body: Any) -> list[str]:
    """Every text a Responses request carries in its ``input`` (messages' text parts, tool outputs), in order."""
    found: list[str] = []
    for item in body.get("input", []) if isinstance(body, dict) else []:
        if not isinstance(item, dict):
            continue
        if item.get("type") == "function_call_output":
            output = item.get("output")
            found.append(output if isinstance(output, str) else json.dumps(output))
        for part in item.get("content") or [] if isinstance(item.get("content"), list) else []:
            if isinstance(part, dict) and isinstance(part.get("text"), str):
                found.append(part["text"])
    return found


def tool_outputs(body: Any) -> dict[str, str]:
    """The ``function_call_output`` items of a request, by call id."""
    out = {}
    for item in body.get("input", []) if isinstance(body, dict) else []:
        if isinstance(item, dict) and item.get("type") == "function_call_output":
            output = item.get("output")
            out[item.get("call_id")] = output if isinstance(output, str) else json.dumps(output)
    return out


def tool_names(body: Any) -> list[str]:
    """The names of the tools a request offers the model (functions, and namespaces' members)."""
    names = []
    for tool in body.get("tools", []) if isinstance(body, dict) else []:
        if isinstance(tool, dict):
            names.append(tool.get("name") or tool.get("type"))
    return names
