"""A standard LSP client (pygls's, through pytest-lsp) drives the sidecar like an editor would."""

from __future__ import annotations

import asyncio
import os
from pathlib import Path

import pytest
import pytest_asyncio
from lsprotocol import types
from pytest_lsp import ClientServerConfig
from rpckit import SERVE

from loopstate_protocol import PROTOCOL_VERSION, methods


@pytest_asyncio.fixture
async def editor(data_dir: Path):
    config = ClientServerConfig(server_command=SERVE, server_env=dict(os.environ, LOOPSTATE_DATA_DIR=str(data_dir)))
    client = await config.start()
    yield client
    await client.stop()


@pytest.mark.slow
@pytest.mark.asyncio
async def test_an_lsp_client_initializes_subscribes_executes_and_hears_the_change(editor, root: Path) -> None:
    result = await editor.initialize_session(types.InitializeParams(capabilities=types.ClientCapabilities()))
    assert result.capabilities.experimental["loopstate"]["protocolVersion"] == PROTOCOL_VERSION
    subscribed = await editor.protocol.send_request_async(methods.SUBSCRIBE, {"root": str(root), "topic": "intent/tasks"})
    assert subscribed.snapshot == [] and subscribed.head.sequence == 0

    changed = asyncio.ensure_future(editor.wait_for_notification(methods.CHANGED))  # listen before asking
    executed = await editor.protocol.send_request_async(methods.EXECUTE, {
        "root": str(root), "request_id": "from-the-editor", "command": {"kind": "intent.task_start", "label": "lsp"}})
    note = await asyncio.wait_for(changed, 30)
    assert executed.head.sequence == 1
    assert note.subscription_id == subscribed.subscription_id and note.head.sequence == 1
    assert note.snapshot[0].label == "lsp"

    await editor.shutdown_session()
    assert editor._server.returncode == 0
