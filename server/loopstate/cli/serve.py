"""`loopstate serve` (the JSON-RPC sidecar on stdio) and `loopstate schema` (the protocol's JSON Schema)."""

from __future__ import annotations

import argparse
import logging
import os
import sys


def register(sub) -> None:
    serve = sub.add_parser(
        "serve", help="serve the JSON-RPC sidecar on stdio (LSP framing)",
        description="Serve loopstate to an editor or harness over stdin/stdout, like a language server. "
        "Logs go to stderr; stdout carries only protocol frames.",
    )
    serve.add_argument("--log-level", default="warning", choices=("debug", "info", "warning", "error"),
                       help="stderr log level (default: warning)")
    serve.set_defaults(func=run_serve)

    schema = sub.add_parser("schema", help="print the JSON Schema of the whole protocol")
    schema.add_argument("--output", default=None, help="write to this file instead of stdout")
    schema.set_defaults(func=run_schema)


def run_serve(args: argparse.Namespace) -> int:
    from loopstate.rpc.stdio import run
    from loopstate.service.engine import Service

    logging.basicConfig(stream=sys.stderr, level=args.log_level.upper(),
                        format="loopstate serve %(levelname)s %(name)s: %(message)s")
    if args.log_level != "debug":
        # pygls logs every refused request with a traceback; the client already has the answer.
        logging.getLogger("pygls").setLevel(logging.CRITICAL)
    # The protocol owns stdout: keep a private copy of it and point fd 1 at
    # stderr, so a stray print() anywhere can never corrupt a frame.
    sys.stdout.flush()
    protocol_out = os.dup(1)
    os.dup2(2, 1)
    return run(Service(), 0, protocol_out)


def run_schema(args: argparse.Namespace) -> int:
    from loopstate_protocol.schema import schema_text

    text = schema_text()
    if args.output:
        with open(args.output, "w", encoding="utf-8") as out:
            out.write(text)
    else:
        sys.stdout.write(text)
    return 0
