"""The argparse parser every loopstate verb is built from: typos are caught where they are made.

Plain argparse lets each subcommand pass what it does not know up to the
top-level parser, which then refuses it with the top-level usage: a typo in
``loopstate goals board g --pubic`` would print ``usage: loopstate [-h] ...``,
which says nothing about ``goals board``. Here the parser of the verb that got
the unknown argument refuses it, with its own usage and the nearest flag it
does take. Subparsers inherit the class, so every verb gets this.

A parser built inside ``only_subverbs_in(argv)`` builds only the sub-verbs
argv names: the others keep their name and help line (so ``--help`` and a
mistyped sub-verb read as with the whole tree) but no parser of their own.
``loopstate run status RUN`` then builds one of the 29 parsers of ``run``.
"""

from __future__ import annotations

import argparse
import functools
import os
import sys
from contextlib import contextmanager
from typing import Any, Iterator

VERBOSE_HELP = "say which project root a command found on every command (not only once per shell session)"
ROOT_HELP = ("project root (default: from the current directory upward, the nearest loopstate project, "
             "else the top of the git work tree, else the current directory)")


# Old spellings of a flag, still accepted where scripts may use them, but left out of --help: one name per
# idea across verbs (`--reason`, `--output`, `--host`), as git, gh and uv keep theirs.
HIDDEN_ALIASES = frozenset({"--rationale", "--out", "--harness"})


class HideAliases(argparse.HelpFormatter):
    """Help that shows each option by its current name only (HIDDEN_ALIASES still parse)."""

    def _format_action_invocation(self, action: argparse.Action) -> str:
        shown = [name for name in action.option_strings if name not in HIDDEN_ALIASES]
        if shown and len(shown) != len(action.option_strings):
            import copy

            action = copy.copy(action)
            action.option_strings = shown
        return super()._format_action_invocation(action)


# Words people reach for that name a verb loopstate calls otherwise (git, gh and the upstream tools' words):
# a refusal suggests the verb, in the group that has it. Typos are caught by closeness; these are not typos.
NEAR_MISSES: dict[str, tuple[str, ...]] = {
    "supersede": ("replace",), "supersedes": ("replace",), "update": ("replace",), "amend": ("replace",),
    "edit": ("replace", "update"), "retract": ("invalidate",), "remove": ("invalidate", "purge"),
    "rm": ("invalidate", "purge"), "delete": ("purge",), "forget": ("invalidate",), "new": ("start", "create", "add"),
    "create": ("start", "add"), "begin": ("start",), "ls": ("list", "tasks"), "list": ("tasks", "list"),
    "status": ("show", "status", "board"), "view": ("show", "board"), "get": ("show", "status"),
    "done": ("complete",), "finish": ("complete",), "close": ("complete",), "kill": ("stop",), "halt": ("stop",),
    "cancel": ("stop",), "abort": ("stop",), "lease": ("acquire",), "renew": ("heartbeat",), "ping": ("heartbeat",),
    "check": ("verify", "validate"), "fsck": ("verify",), "repair": ("recover",), "history": ("log", "audit"),
    "approve": ("resolve",), "install": ("apply",), "remove-hooks": ("uninstall",), "move": ("adopt",),
}


_wanted: frozenset[str] | None = None  # inside only_subverbs_in: the words of argv


@contextmanager
def only_subverbs_in(argv: list[str]) -> Iterator[None]:
    """Parsers built in this block build a sub-verb only when argv holds its name or an alias.

    argparse picks a sub-verb by one whole argv item equal to its name or an
    alias, so the parser that argv can choose is built; the others are never
    parsed with (were one chosen, it raises NotBuilt and ``cli.main.parse_argv``
    parses with the whole tree).
    """
    global _wanted
    previous, _wanted = _wanted, frozenset(argv)
    try:
        yield
    finally:
        _wanted = previous


class NotBuilt(Exception):
    """The narrow parser was asked to parse with a sub-verb it did not build (the caller parses with the whole one)."""


class Unbuilt:
    """A sub-verb left unbuilt: takes (and drops) whatever its verb module sets up on it."""

    def __init__(self, **_: object) -> None:
        pass

    def __getattr__(self, name: str) -> "Unbuilt":
        return self

    def __call__(self, *args: object, **kwargs: object) -> "Unbuilt":
        return self

    def parse_known_args(self, args=None, namespace=None):
        # Not reached by argv the parser was narrowed to (see only_subverbs_in), unless an argparse
        # matched a sub-verb by something other than its whole name: then the whole tree answers.
        raise NotBuilt


class SubVerbs(argparse._SubParsersAction):
    def add_parser(self, name, **kwargs):
        if _wanted is None or name in _wanted or any(alias in _wanted for alias in kwargs.get("aliases", ())):
            return super().add_parser(name, **kwargs)
        built, self._parser_class = self._parser_class, Unbuilt
        try:
            return super().add_parser(name, **kwargs)  # its name, aliases and help line, as a built one has
        finally:
            self._parser_class = built


def group_verbs(parser: argparse.ArgumentParser, everyday: str, advanced: str, advanced_title: str) -> None:
    """List ``parser``'s verbs in --help as two sections: the everyday ones first, then the rest (named by
    ``advanced_title``: what they are for), each in the order given (space-separated names)."""
    # An attribute of the parser that VerbParser.format_help reads; argparse's types do not declare it.
    parser.verb_groups = [("everyday verbs", everyday.split()), (advanced_title, advanced.split())]  # type: ignore[attr-defined]


def help_width() -> int:
    """The width argparse's formatters wrap help to by default (the terminal's columns, less 2), found as
    ``shutil.get_terminal_size`` finds the columns: $COLUMNS, else the terminal on stdout, else 80.

    argparse makes a formatter for every argument it adds (to check its metavar), and a formatter given
    no width imports shutil for it (with bz2, lzma and zlib: ~1.5 ms of every command's start); given
    this width, none is imported, and help wraps as before.
    """
    try:
        columns = int(os.environ["COLUMNS"])
    except (KeyError, ValueError):
        columns = 0
    if columns <= 0:
        stdout = sys.__stdout__  # None when the process has no stdout
        try:
            columns = os.get_terminal_size(stdout.fileno()).columns if stdout is not None else 0
        except (AttributeError, ValueError, OSError):
            columns = 0
    return (columns or 80) - 2


def _group_help(parser: argparse.ArgumentParser):
    """A group named without its verb prints its own help, verbs listed, on stderr: exit 2, as for any usage
    error (a verb's own ``set_defaults(func=...)`` takes over once one is named)."""
    def show(args: argparse.Namespace) -> int:
        parser.print_help(sys.stderr)
        return 2
    return show


class VerbParser(argparse.ArgumentParser):
    def __init__(self, *, formatter_class: type[argparse.HelpFormatter] = argparse.HelpFormatter, **kwargs: Any) -> None:
        """Keywords only, as argparse's add_parser passes them."""
        shown = type(formatter_class.__name__, (HideAliases, formatter_class), {})
        super().__init__(formatter_class=functools.partial(shown, width=help_width()), **kwargs)
        self.register("action", "parsers", SubVerbs)

    def add_subparsers(self, **kwargs):
        """A group's sub-verbs; the group itself takes ``--root`` too, so ``loopstate run --root X list``
        reads as ``loopstate --root X run list`` and ``loopstate run list --root X`` do (SUPPRESS: a
        ``--root`` given elsewhere is kept, never overwritten by this one's absence)."""
        if "--root" not in self._option_string_actions:
            self.add_argument("--root", default=argparse.SUPPRESS, help=ROOT_HELP)
        if " " in self.prog:  # a group (`loopstate goals`) named without its verb prints its verbs, exit 2
            self.set_defaults(func=_group_help(self))
        return super().add_subparsers(**kwargs)

    def format_help(self) -> str:
        """argparse's help, but a group's verbs listed in the sections ``group_verbs`` gave it (everyday first)."""
        groups = getattr(self, "verb_groups", None)
        verbs = next((a for a in self._actions if isinstance(a, argparse._SubParsersAction)), None)
        if not groups or verbs is None:
            return super().format_help()
        formatter = self._get_formatter()
        formatter.add_usage(self.usage, self._actions, self._mutually_exclusive_groups)
        formatter.add_text(self.description)
        by_name = {choice.dest: choice for choice in verbs._choices_actions}
        listed = [name for _, names in groups for name in names]
        for title, names in [*groups, ("other verbs", [n for n in by_name if n not in listed])]:
            shown = [by_name[name] for name in names if name in by_name]
            if shown:
                formatter.start_section(title)
                formatter.add_arguments(shown)
                formatter.end_section()
        for group in self._action_groups:
            actions = [action for action in group._group_actions if action is not verbs]
            if actions:
                formatter.start_section(group.title)
                formatter.add_text(group.description)
                formatter.add_arguments(actions)
                formatter.end_section()
        formatter.add_text(self.epilog)
        return formatter.format_help()

    def error(self, message: str):
        """argparse's usage error, plus the nearest sub-verb for a mistyped one (``intnet`` -> ``intent``)."""
        import re

        for alias in HIDDEN_ALIASES:  # argparse names an option by all its strings: `--reason/--rationale`
            message = message.replace(f"/{alias}", "")
        found = re.match(r"argument (\S+): invalid choice: '(.*)' \(choose from (.*)\)$", message)
        if found is not None:
            import difflib

            choices = re.findall(r"'([^']*)'", found.group(3)) or found.group(3).split(", ")
            near = difflib.get_close_matches(found.group(2), choices, n=1, cutoff=0.6)
            if not near:  # not a typo but another tool's word for a verb loopstate names otherwise
                near = [verb for verb in NEAR_MISSES.get(found.group(2).lower(), ()) if verb in choices][:1]
            if near:
                message = f"{message}; did you mean {near[0]!r}?"
        super().error(message)

    def parse_known_args(self, args=None, namespace=None):
        """As argparse's, but anything unknown is refused here (so it never returns extras)."""
        namespace, extras = super().parse_known_args(args, namespace)
        if extras:
            self.error(self._unrecognized(extras))
        return namespace, extras

    def _unrecognized(self, extras: list[str]) -> str:
        import difflib

        flags = [flag for flag in self._option_string_actions if flag.startswith("--")]
        parts = []
        for item in extras:
            name = item.split("=", 1)[0]
            near = difflib.get_close_matches(name, flags, n=1, cutoff=0.6) if name.startswith("-") else []
            parts.append(f"{item} (did you mean {near[0]}?)" if near else item)
        return "unrecognized arguments: " + " ".join(parts) + f"; see `{self.prog} --help`"
