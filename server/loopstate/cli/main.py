"""`loopstate`: the entry point. Each module in SUBCOMMANDS registers its own verbs.

A hook starts a fresh process on every prompt, so startup is paid each time.
`main` therefore looks at argv for the verb and imports only the module that
registers it, and builds of that verb's tree only the sub-verbs argv names
(cli/parser.only_subverbs_in); the whole parser (every module) is built only
when nothing narrower will do: top-level help, shell completion, an unknown verb.
"""

from __future__ import annotations

import sys

from loopstate import __version__

# module -> the top-level verbs it registers (register(subparsers) sets a `func(args) -> int`
# default on each). Adding a command is one line here; tests/cli/test_cli_startup.py checks the verbs.
SUBCOMMANDS = {
    "loopstate.cli.store": ("verify", "recover", "log", "store"),
    "loopstate.cli.init": ("init",),
    "loopstate.cli.root": ("root",),
    "loopstate.cli.project": ("project",),
    "loopstate.cli.serve": ("serve", "schema"),
    "loopstate.cli.mcp": ("mcp",),
    "loopstate.cli.intent": ("intent",),
    "loopstate.cli.runs": ("run", "validate"),
    "loopstate.cli.goals": ("goals",),
    "loopstate.cli.demo": ("demo",),
    "loopstate.cli.completion": ("completion",),
    "loopstate.cli.setup": ("setup", "doctor"),
    "loopstate.cli.hook": ("hook",),
    "loopstate.cli.compact": ("compact",),
    "loopstate.cli.transparency": ("checkpoint", "prove", "check-proof"),
}
MODULE_OF = {verb: module for module, verbs in SUBCOMMANDS.items() for verb in verbs}


def build_parser(modules=None):
    """The parser with the verbs of ``modules`` (default: every module) registered."""
    import importlib

    from loopstate.cli.parser import ROOT_HELP, VERBOSE_HELP, VerbParser

    parser = VerbParser(
        prog="loopstate",
        description="A local, append-only, hash-chained state store for AI coding-agent loops.",
    )
    parser.add_argument("--version", action="version", version=f"loopstate {__version__}")
    # Also accepted after the verb (cli/output.add_common); whichever is given wins.
    parser.add_argument("--root", default=None, help=ROOT_HELP)
    parser.add_argument("-v", "--verbose", action="store_true", help=VERBOSE_HELP)
    sub = parser.add_subparsers(dest="command", metavar="COMMAND")
    for name in SUBCOMMANDS if modules is None else modules:
        importlib.import_module(name).register(sub)
    from loopstate.cli.parser import group_verbs

    group_verbs(parser, "intent goals run init root project verify log doctor setup",
                "recover store compact checkpoint prove check-proof validate schema serve mcp hook completion demo",
                "for editors, hosts, repairs and scripts")
    return parser


def peek_verb(argv: list[str]) -> str | None:
    """The verb in argv, past the top-level options; None when a top-level option needs the whole parser."""
    items = iter(argv)
    for item in items:
        if item == "--root":
            next(items, None)
        elif item.startswith("--root=") or item in ("-v", "--verbose"):
            continue
        elif item.startswith("-"):
            return None  # --help, --version, an abbreviation or a typo: argparse says
        else:
            return item
    return None


def parser_for(argv: list[str]):
    """The narrowest parser that parses argv exactly as the whole one would."""
    module = MODULE_OF.get(peek_verb(argv) or "")
    if module is not None:
        from loopstate.cli.parser import only_subverbs_in

        with only_subverbs_in(argv):
            return build_parser([module])
    if "--version" in argv and peek_verb(argv[: argv.index("--version")]) is None:
        return build_parser([])  # --version prints before any verb is looked at
    return build_parser()


def parse_argv(argv: list[str]):
    """argv parsed by the narrowest parser, or by the whole one if the narrow one lacks the sub-verb chosen."""
    from loopstate.cli.parser import NotBuilt

    try:
        return parser_for(argv).parse_args(argv)
    except NotBuilt:
        return build_parser().parse_args(argv)


def is_plain_hook(argv: list[str]) -> bool:
    """``hook [HOST [EVENT]]`` and nothing else: what a host's hook registration runs, on every event.

    That form is answered without argparse (whose import, with the ``shutil``
    and ``gettext`` it brings, is ~5 ms of a ~40 ms tool-call hook); anything
    else (``--help``, an option, a third word) goes to the parser, which says
    what is wrong with it.
    """
    return argv[:1] == ["hook"] and len(argv) <= 3 and not any(item.startswith("-") for item in argv[1:])


MCP_OPTIONS = {"--root": None, "--log-level": ("debug", "info", "warning", "error")}


def is_plain_mcp(argv: list[str]) -> bool:
    """``mcp`` with only well-formed ``--root DIR`` / ``--log-level LEVEL``: what a host's MCP entry runs.

    That form starts answering the MCP handshake before anything else is
    imported (mcpserver/early.py); anything else (``--help``, a typo) goes to
    the parser first, as for every verb.
    """
    if argv[:1] != ["mcp"]:
        return False
    items = iter(argv[1:])
    for item in items:
        name, eq, value = item.partition("=")
        if name not in MCP_OPTIONS:
            return False
        given = value if eq else next(items, None)
        choices = MCP_OPTIONS[name]
        if given is None or given.startswith("-") or (choices is not None and given not in choices):
            return False
    return True


def mcp_root(argv: list[str]) -> str | None:
    """The ``--root`` of a plain ``mcp`` argv (``is_plain_mcp``), the last one given as argparse takes it."""
    root = None
    items = iter(argv[1:])
    for item in items:
        name, eq, value = item.partition("=")
        given = value if eq else next(items, None)
        if name == "--root":
            root = given
    return root


def main(argv: list[str] | None = None) -> int:
    argv = sys.argv[1:] if argv is None else list(argv)
    if is_plain_mcp(argv):
        from loopstate.mcpserver import early

        answering = early.start(mcp_root(argv))
        if answering is not None:
            answering.settle()  # the host's opening first, then the imports (mcpserver/early.SETTLE_SECONDS)
    if is_plain_hook(argv):
        from loopstate.cli.hook import answer_hook

        return answer_hook(*argv[1:])
    if peek_verb(argv) not in SERVERS:  # a server's stdout is its protocol, not a terminal's text
        from loopstate.cli.terminal import control_in_arguments, neutralize_terminals

        neutralize_terminals()
        refusal = control_in_arguments(argv)
        if refusal is not None:
            sys.stderr.write(f"loopstate: {refusal}\n")
            return 1
    try:
        args = parse_argv(argv)
        if not getattr(args, "func", None):
            build_parser().print_help()
            return 2
        from loopstate.cli.output import run_guarded

        return run_guarded(args)
    except BrokenPipeError:  # help or usage text into a closed pipe (a command's own output is handled in run_guarded)
        from loopstate.cli.output import closed_pipe_exit

        return closed_pipe_exit()


# Long-running servers: their streams and threads belong to the libraries serving them, and they
# end once per session, so they always exit as usual.
SERVERS = ("serve", "mcp")


def run() -> None:
    """The `loopstate` console script: ``main`` with the cyclic garbage collector off, then ``finish``.

    A command is one short-lived process. The collector's passes over its
    growing live state (the folded projection, the query's rows) were ~40 ms
    of a ~200 ms `intent show` of a 10k-event store and 3-17 ms of the other
    reads, while peak RSS was the same with it off (within 1 MiB for
    `intent show`, `goals board`, `compact` and `verify` there): what the
    folds leave in cycles stays reachable to the end anyway. A server
    (``serve``, ``mcp``) lives for a session: it keeps the collector and the
    usual exit.
    """
    if peek_verb(sys.argv[1:]) in SERVERS:
        sys.exit(main())
    import gc

    gc.disable()
    arm_fast_exit()
    finish(main())


# The exit code ``finish`` ends the process with, once every exit handler has run (``_fast_exit``).
_finished: list[int] = []


def arm_fast_exit() -> None:
    """Register ``_fast_exit`` as this process's first ``atexit`` handler, when it can be the first.

    Exit handlers run last-registered first, so the first one runs after every
    other: after those of whatever the command imported or set up (a library's
    logging shutdown, the weakref finalizers that close kept descriptors, a
    coverage tool started with the command), and after the interpreter has
    joined every non-daemon thread. If the ``atexit`` module was imported before
    the CLI started (a site hook, a coverage tool's startup, an embedding
    caller), a handler registered then would run after this one, so none is
    registered and the process exits as usual. The atexit module offers no
    public way to count or list handlers; whether it was imported at all is
    what can be known without its private API.
    """
    if "atexit" in sys.modules:
        return
    import atexit

    atexit.register(_fast_exit)


def _fast_exit() -> None:
    """End the process once the other exit handlers have run, without the interpreter's teardown.

    Tearing down frees every object one by one: after a read of a 10k-event
    store that was 10-20 ms of a ~100 ms command (its state, the modules), all
    of it memory the kernel takes back at once anyway. Only after ``finish``
    (a command that returned its code) and once stdout and stderr are flushed;
    otherwise (an uncaught exception, a closed pipe) the usual exit goes on.
    """
    if not _finished:
        return
    try:
        sys.stdout.flush()
        sys.stderr.flush()
    except (OSError, ValueError):  # a closed pipe or stream: the usual exit deals with it as it always has
        return
    import os

    os._exit(_finished[-1])


def finish(code: int) -> None:
    """End the process with ``code``: through the usual exit, which ``_fast_exit`` (if armed) cuts short
    after the exit handlers, skipping only the teardown."""
    _finished.append(code)
    sys.exit(code)


if __name__ == "__main__":
    run()
