"""`loopstate mcp`: serve the store to an agent host as an MCP server on stdio."""

from __future__ import annotations

import argparse
import logging
import sys

EXIT_USAGE = 2
INSTALL_HINT = ("loopstate mcp needs the MCP Python SDK, which is an optional extra: "
                "pip install 'loopstate[mcp]' (into the environment that runs loopstate)\n")


def register(sub) -> None:
    mcp = sub.add_parser(
        "mcp", help="serve the store as an MCP server on stdio (tools and live resources for agents)",
        description="Serve loopstate to an MCP host (Claude Code, Codex) over stdin/stdout. The project is the "
        "host's (Codex's sandbox cwd, or the client's one root), else --root, else found from the current "
        "directory. Logs go to stderr. Needs the optional extra: pip install 'loopstate[mcp]'.",
    )
    mcp.add_argument("--root", default=argparse.SUPPRESS,
                     help="the project root when the host names none (a host's conflicting root is refused)")
    mcp.add_argument("--log-level", default="warning", choices=("debug", "info", "warning", "error"),
                     help="stderr log level (default: warning)")
    mcp.set_defaults(func=run_mcp)


def run_mcp(args: argparse.Namespace) -> int:
    try:
        import mcp.server.mcpserver  # noqa: F401 - only to know whether the SDK is there
    except ImportError:
        sys.stderr.write(INSTALL_HINT)
        return EXIT_USAGE
    from loopstate.mcpserver.server import run
    from loopstate.service.engine import Service

    logging.basicConfig(stream=sys.stderr, level=args.log_level.upper(),
                        format="loopstate mcp %(levelname)s %(name)s: %(message)s")
    # The SDK's stdio_server owns stdout: while it serves, fd 1 points at stderr,
    # so a stray print() anywhere can never corrupt a message.
    return run(Service(), getattr(args, "root", None))
