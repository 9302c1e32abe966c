"""What the CLI prints to a terminal cannot drive the terminal.

The store holds text people and agents wrote: a claim's statement, a run's
objective, an issue title. Printed raw, an escape sequence in one of them
(``\\x1b[31m``, a title-setting OSC, a BEL, a carriage return that overwrites
the line before it) would act on the reader's terminal instead of being read.
So when stdout or stderr is a terminal, every control character but newline
and tab is shown as a visible escape (``\\x1b``), whatever is in the store and
however old it is. stderr keeps the carriage return too: the progress line of
``verify`` and ``recover`` redraws itself with it. Output to a pipe or a file
is left byte for byte as it is (``--json`` escapes controls anyway), so
scripts see exactly what was stored.

On the way in, an argument a person typed may not hold a control character
other than newline and tab: text meant to be read has no use for them, and
refusing them keeps them out of the store in the first place.
"""

from __future__ import annotations

import os
import re
import sys
from typing import Any, TextIO

_CONTROLS = [*range(0x00, 0x20), 0x7F, *range(0x80, 0xA0)]
_STDOUT_TABLE = {code: f"\\x{code:02x}" for code in _CONTROLS if code not in (0x09, 0x0A)}
_STDERR_TABLE = {code: text for code, text in _STDOUT_TABLE.items() if code != 0x0D}


_TYPED_CONTROL = re.compile("[\x00-\x08\x0b-\x1f\x7f\x80-\x9f]")


def control_in_arguments(argv: list[str]) -> str | None:
    """The refusal for the first argument that holds a control character other than newline and tab, else None."""
    for index, item in enumerate(argv, start=1):
        found = _TYPED_CONTROL.search(item)
        if found is not None:
            shown = item.translate(_STDOUT_TABLE)
            if len(shown) > 80:
                shown = shown[:77] + "..."
            return (f"INVALID_PARAMS: argument {index} ({shown}) holds the control character "
                    f"\\x{ord(found.group()):02x}; loopstate stores text to be read: type it without terminal "
                    "escape sequences or control characters (newlines and tabs are fine)")
    return None


class Neutralized:
    """A text stream whose writes show control characters as visible escapes; everything else passes through."""

    def __init__(self, stream: TextIO, table: dict[int, str]) -> None:
        self._stream = stream
        self._table = table

    def write(self, text: str) -> int:
        self._stream.write(text.translate(self._table))
        return len(text)

    def writelines(self, lines: Any) -> None:
        for line in lines:
            self.write(line)

    def __getattr__(self, name: str) -> Any:  # flush, fileno, isatty, encoding, buffer...
        return getattr(self._stream, name)


def neutralize_terminals() -> None:
    """Wrap stdout and stderr where they are terminals (a command's human output only, never a server's)."""
    for name, table in (("stdout", _STDOUT_TABLE), ("stderr", _STDERR_TABLE)):
        stream = getattr(sys, name)
        try:
            tty = stream.isatty()
        except (AttributeError, ValueError, OSError):
            continue
        if tty and not isinstance(stream, Neutralized):
            setattr(sys, name, Neutralized(stream, table))


# --- colour and paging: for a person at a terminal only ----------------------------------

_STYLES = {"red": "31", "green": "32", "yellow": "33", "bold": "1", "dim": "2", "attention": "1;33"}
# In a Neutralized stream: a style to emit as such, written by ``paint`` only. The marker holds a token drawn
# for this process, so text from the store that happens to hold NULs and "sgr:" can never pass for one.
_SGR = f"\x00sgr{os.urandom(6).hex()}:"

# What each value a person scans for is painted as, one vocabulary per kind of value: green for what
# is well (active, the user's own words, verified), yellow for what waits or is uncertain, red for
# what went wrong or is contested, dim for what was put aside. A value not listed stays plain.
PALETTE: dict[str, dict[str, str]] = {
    "run": {"active": "green", "complete": "green", "ready": "yellow", "waiting_approval": "yellow",
            "waiting_external": "yellow", "blocked": "yellow", "draft": "dim", "failed": "red",
            "halted_kill_switch": "red", "cancelled": "red"},
    "claim": {"explicit": "green", "evidence": "green", "inferred": "yellow", "unknown": "yellow", "disputed": "red"},
    "todo": {"claimed": "green", "blocked": "red", "deferred": "dim"},
    "gate": {"open": "yellow", "approved": "green", "rejected": "red", "deferred": "dim"},
    "user_gate": {"open": "attention", "approved": "green", "rejected": "red", "deferred": "dim"},
    "verdict": {"ok": "green", "verified": "green", "unverified": "yellow", "failed": "red", "denied": "red",
                "problem": "red", "note": "yellow", "CORRUPT": "red"},
}


def colour_on(stream: TextIO) -> bool:
    """Colour is for a terminal: never into a pipe or a file, never when NO_COLOR is set (to anything, as
    no-color.org says), nor for TERM=dumb."""
    import os

    if "NO_COLOR" in os.environ or os.environ.get("TERM") == "dumb":
        return False
    return isinstance(stream, Neutralized)


def paint(text: str, style: str, stream: TextIO | None = None) -> str:
    """``text`` in ``style`` when ``stream`` (default stdout) takes colour, else ``text`` unchanged.

    The style travels as a marker that only a Neutralized stream turns into an escape sequence, so the
    text itself (a claim's statement, a run's objective) still cannot drive the terminal.
    """
    stream = sys.stdout if stream is None else stream
    if not colour_on(stream):
        return text
    return f"{_SGR}{_STYLES[style]}\x00{text}{_SGR}0\x00"


def painted(value: str, kind: str, width: int = 0, stream: TextIO | None = None) -> str:
    """``value`` padded to ``width`` and painted as its kind's palette says (a trailing ``*``, the mark of
    the user's own words, is not part of the value). Padded first, so columns line up with or without colour."""
    style = PALETTE[kind].get(value.rstrip("*"))
    padded = value.ljust(width)
    return paint(padded, style, stream) if style else padded


_MARK = re.compile(re.escape(_SGR) + "([0-9;]+)\x00")


def _write_neutralized(self: Neutralized, text: str) -> int:
    pieces = _MARK.split(text)
    out = []
    for index, piece in enumerate(pieces):
        out.append(f"\x1b[{piece}m" if index % 2 else piece.translate(self._table))
    self._stream.write("".join(out))
    return len(text)


Neutralized.write = _write_neutralized  # type: ignore[method-assign]


PAGED_LINES_SLACK = 1  # the pager's own prompt line


class Paged:
    """Collects a command's stdout on a terminal, then shows it through a pager when it is taller than the
    terminal (``$PAGER``, else ``less``; ``LESS`` as the user set it, else FRX: quit when it fits, keep
    colours, leave the text on screen). Never in a pipe, never under --json (``paged_stdout`` decides)."""

    def __init__(self, terminal: Neutralized) -> None:
        import io

        self.terminal = terminal
        self.buffer = io.StringIO()
        self.stream = Neutralized(self.buffer, terminal._table)

    def finish(self) -> None:
        import os
        import shlex
        import shutil
        import subprocess

        text = self.buffer.getvalue()
        rows = shutil.get_terminal_size((80, 24)).lines
        pager = os.environ.get("PAGER", "less")
        command = shlex.split(pager) if pager.strip() else []
        if text.count("\n") + PAGED_LINES_SLACK <= rows or not command or shutil.which(command[0]) is None:
            self.terminal._stream.write(text)
            self.terminal._stream.flush()
            return
        env = {**os.environ, "LESS": os.environ.get("LESS", "FRX")}
        try:
            subprocess.run(command, input=text, text=True, env=env, check=False)
        except (OSError, KeyboardInterrupt):
            self.terminal._stream.write(text)


def paged_stdout(wanted: bool) -> Paged | None:
    """When ``wanted`` (a long human listing) and stdout is a terminal: stdout collected for the pager."""
    import os

    stdout = sys.stdout
    if not wanted or not isinstance(stdout, Neutralized) or os.environ.get("LOOPSTATE_NO_PAGER"):
        return None
    paged = Paged(stdout)
    sys.stdout = paged.stream
    return paged
