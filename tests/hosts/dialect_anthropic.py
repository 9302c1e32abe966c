"""Claude Code's model API as the scripted model server speaks it: ``POST /v1/messages``, answered as SSE.

One turn is one assistant message: ``message_start``, then per step a content
block (``content_block_start``, its deltas, ``content_block_stop``): a ``Text``
is a text block streamed as one ``text_delta``; a ``ToolCall`` is a
``tool_use`` block whose input is streamed as one ``input_json_delta``. Then
``message_delta`` with the stop reason (``tool_use`` when the turn called a
tool, so the host runs it and sends the ``tool_result`` in its next request)
and ``message_stop``.

With ``CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC=1`` (claude_kit sets it) Claude
Code 2.1.332 sends no side requests here (no title, no quota probe): every
request to this path is one of the session's turns.
"""

from __future__ import annotations

import json
from http.server import BaseHTTPRequestHandler
from typing import Any

from modelserver import Step, Text, ToolCall, sse

MESSAGES_PATH = "/v1/messages"


def stream(handler: BaseHTTPRequestHandler, body: Any, steps: list[Step], turn: int) -> None:
    model = body.get("model", "claude") if isinstance(body, dict) else "claude"
    events: list[tuple[str, dict[str, Any]]] = [("message_start", {"type": "message_start", "message": {
        "id": f"msg_scripted_{turn}", "type": "message", "role": "assistant", "model": model, "content": [],
        "stop_reason": None, "stop_sequence": None,
        "usage": {"input_tokens": 10, "output_tokens": 1, "cache_creation_input_tokens": 0,
                  "cache_read_input_tokens": 0}}})]
    called = False
    for index, step in enumerate(steps):
        if isinstance(step, Text):
            events += [
                ("content_block_start", {"type": "content_block_start", "index": index,
                                         "content_block": {"type": "text", "text": ""}}),
                ("content_block_delta", {"type": "content_block_delta", "index": index,
                                         "delta": {"type": "text_delta", "text": step.text}}),
            ]
        else:
            assert isinstance(step, ToolCall)
            called = True
            call_id = step.call_id or f"toolu_scripted_{turn}_{index}"
            events += [
                ("content_block_start", {"type": "content_block_start", "index": index, "content_block": {
                    "type": "tool_use", "id": call_id, "name": step.name, "input": {}}}),
                ("content_block_delta", {"type": "content_block_delta", "index": index, "delta": {
                    "type": "input_json_delta", "partial_json": json.dumps(step.arguments)}}),
            ]
        events.append(("content_block_stop", {"type": "content_block_stop", "index": index}))
    events += [
        ("message_delta", {"type": "message_delta", "delta": {"stop_reason": "tool_use" if called else "end_turn",
                                                              "stop_sequence": None},
                           "usage": {"output_tokens": 5}}),
        ("message_stop", {"type": "message_stop"}),
    ]
    sse(handler, events)
