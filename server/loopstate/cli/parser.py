"""The argparse parser every loopstate verb is built from: typos are caught where they are made.

Plain argparse lets each subcommand pass what it does not know up to the
top-level parser, which then refuses it with the top-level usage: a typo in
``loopstate goals board g --pubic`` would print ``usage: loopstate [-h] ...``,
which says nothing about ``goals board``. Here the parser of the verb that got
the unknown argument refuses it, with its own usage and the nearest flag it
does take. Subparsers inherit the class, so every verb gets this.
"""

from __future__ import annotations

import argparse

ROOT_HELP = ("project root (default: from the current directory upward, the nearest loopstate project, "
             "else the top of the git work tree, else the current directory)")


class VerbParser(argparse.ArgumentParser):
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
