"""The one SDK attribute loopstate reaches that is not public (docs/mcp.md, "The one private handle"):
an SDK where it moved must fail here, not in a host's session."""

from __future__ import annotations

import pytest

from tests.mcp.mcpkit import needs_sdk

pytestmark = needs_sdk


def test_the_low_level_server_is_where_the_pinned_sdk_keeps_it() -> None:
    from mcp.server.lowlevel import Server
    from mcp.server.mcpserver import MCPServer

    from loopstate.mcpserver.server import lowlevel_of

    lowlevel = lowlevel_of(MCPServer("probe"))
    assert isinstance(lowlevel, Server)
    for method in ("add_request_handler", "add_notification_handler", "get_request_handler",
                   "create_initialization_options"):
        assert callable(getattr(lowlevel, method)), method
    assert lowlevel.get_request_handler("subscriptions/listen") is not None


def test_an_sdk_without_it_is_refused_with_the_install_hint() -> None:
    from loopstate.mcpserver.server import lowlevel_of

    with pytest.raises(RuntimeError, match="pip install 'loopstate\\[mcp\\]'"):
        lowlevel_of(object())
