"""The MCP front door: `loopstate mcp`, the store as tools and live resources for agents.

``server`` builds the SDK's MCPServer and runs it on stdio, ``tools`` are the
nine tool functions (each one protocol command or query), ``resources`` names
the views as URIs and tells subscribers when they change, ``roots`` decides
which project a call means. Like the CLI and ``loopstate serve``, it calls the
Service and holds no rule. The SDK is optional (``pip install 'loopstate[mcp]'``);
nothing here is imported unless the verb runs.
"""
