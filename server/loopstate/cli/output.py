"""How every CLI command reports: human text by default, JSON with --json, clear errors.

A LoopstateError becomes one line on stderr (or a JSON error object on stdout
with --json) and exit code 1; an unexpected fault becomes exit code 70 with the
exception named, never a bare traceback. A reader that closes the pipe early
(``loopstate log | head -2``) ends the command quietly with exit code 141, the
status a shell reports for a Unix tool that SIGPIPE ended (128 + 13).
"""

from __future__ import annotations

import argparse
import sys
from typing import Any

import msgspec

from loopstate.cli.parser import ROOT_HELP, VERBOSE_HELP
from loopstate.core.errors import LoopstateError

EXIT_ERROR = 1
EXIT_INTERNAL = 70
EXIT_CLOSED_PIPE = 141


def add_common(parser: argparse.ArgumentParser, *, root: bool = True) -> None:
    """--root and --json, the options every store command takes."""
    if root:
        # SUPPRESS: absent here, the top-level --root (before the verb) is kept instead of overwritten.
        parser.add_argument("--root", default=argparse.SUPPRESS, help=ROOT_HELP)
        parser.add_argument("-v", "--verbose", action="store_true", default=argparse.SUPPRESS, help=VERBOSE_HELP)
    parser.add_argument("--json", action="store_true", help="print machine-readable JSON")


def project_root(args: argparse.Namespace) -> str:
    """The project root of this command, resolved once (loopstate.service.resolve_root).

    When it is not the current directory (found above it), one line on stderr
    says which root was used and why, unless the output is --json: once per
    shell session and root (``root_told``), or on every command with -v.
    """
    resolved = getattr(args, "_resolved_root", None)
    if resolved is None:
        import os

        from loopstate.service.front import resolve_root

        choice = resolve_root(getattr(args, "root", None))
        resolved = args._resolved_root = choice.root
        if choice.how != "explicit" and choice.root != os.path.realpath(os.getcwd()) and not getattr(args, "json", False):
            if getattr(args, "verbose", False) or not root_told(choice.root):
                sys.stderr.write(f"loopstate: project root {choice.root} ({choice.reason})\n")
        if not getattr(args, "no_adoption_notice", False):
            adoption_notice(resolved)
    return resolved


def _session() -> str:
    """This shell session: the parent process (the shell that ran the command) and when it started.

    The start time (Linux: /proc/PID/stat's 22nd field) keeps a later shell that got the same pid from
    passing for this one; elsewhere the pid alone.
    """
    import os

    parent = os.getppid()
    try:
        with open(f"/proc/{parent}/stat", "rb") as handle:
            started = handle.read().rsplit(b")", 1)[1].split()[19].decode()
    except (OSError, IndexError):
        started = ""
    return f"{parent}:{started}"


def root_told(root: str) -> bool:
    """Whether this shell session was told this project root already; marks it told when not.

    The mark is an empty file named by a digest of the session and the root, in a 0700 folder of the
    temp dir (the same place the hooks keep theirs). A mark that cannot be kept means telling again,
    never staying silent.
    """
    import hashlib
    import os
    import tempfile

    folder = os.path.join(tempfile.gettempdir(), f"loopstate-{os.getuid() if hasattr(os, 'getuid') else 'user'}",
                          "roots-told")
    mark = os.path.join(folder, hashlib.sha256(f"{_session()}\0{root}".encode()).hexdigest()[:32])
    if os.path.lexists(mark):
        return True
    try:
        os.makedirs(folder, mode=0o700, exist_ok=True)
        os.close(os.open(mark, os.O_WRONLY | os.O_CREAT | os.O_EXCL | getattr(os, "O_NOFOLLOW", 0), 0o600))
    except OSError:
        pass
    return False


def adoption_notice(root: str) -> None:
    """A folder with no state that looks like a known project elsewhere (moved, re-cloned) says so, on stderr,
    with the `loopstate project adopt` that carries the state over: never silently a fresh state. A folder
    with state records its git history once, so a later clone of it is recognised (service/adopt.py)."""
    try:
        from loopstate.core.adopted import is_known
        from loopstate.core.paths import project_id_for, resolve_data_dir

        data_dir = resolve_data_dir()
        known = is_known(data_dir / "projects", project_id_for(root))
    except Exception:  # a hint: whatever is wrong with the data dir, the command itself says it
        return
    from loopstate.service import adopt

    if known and adopt.has_state(root, data_dir):
        from loopstate.core.project import Project

        adopt.remember_identity(data_dir, Project(root, data_dir=data_dir).project_id, root)
        return
    said = adopt.notice(root, data_dir)  # no state yet (a hook's session binding is none)
    if said is not None:
        sys.stderr.write(f"loopstate: {said}\n")


def emit_json(value: Any) -> None:
    sys.stdout.write(msgspec.json.encode(value).decode() + "\n")


def progress_printer(label: str):
    """A progress callback that draws on a terminal's stderr, silent otherwise."""
    if not sys.stderr.isatty():
        return None
    state = {"last": -1}

    def show(done: int, total: int) -> None:
        percent = int(done * 100 / total) if total else 100
        if percent != state["last"]:
            state["last"] = percent
            sys.stderr.write(f"\r{label}: {percent:3d}% ({done}/{total} bytes)")
            if done >= total:
                sys.stderr.write("\n")
            sys.stderr.flush()

    return show


def closed_pipe_exit() -> int:
    """End quietly after stdout's reader went away: nothing more can reach it.

    stdout is pointed at /dev/null first, so the interpreter's final flush of
    what is still buffered cannot fail again on the way out.
    """
    import os

    try:
        target = sys.stdout.fileno()
    except (AttributeError, ValueError, OSError):  # not a file (a caller's in-memory stdout): nothing to flush later
        return EXIT_CLOSED_PIPE
    devnull = os.open(os.devnull, os.O_WRONLY)
    os.dup2(devnull, target)
    os.close(devnull)
    return EXIT_CLOSED_PIPE


# The verbs whose human output can run long: on a terminal it goes through a pager (cli/terminal.Paged).
PAGED = {("log",), ("intent", "show"), ("intent", "audit"), ("intent", "export"), ("goals", "board"),
         ("run", "list"), ("run", "status")}


def _verb_path(args: argparse.Namespace) -> tuple[str, ...]:
    path = [getattr(args, "command", None)]
    for key in ("intent_command", "goals_command", "run_verb"):
        if getattr(args, key, None):
            path.append(getattr(args, key))
    return tuple(p for p in path if p)


def run_guarded(args: argparse.Namespace) -> int:
    paged = None
    if not getattr(args, "json", False) and _verb_path(args) in PAGED:
        from loopstate.cli.terminal import paged_stdout

        paged = paged_stdout(True)
    try:
        code = int(args.func(args) or 0)
        sys.stdout.flush()  # here, so a closed pipe is seen while it can still be handled
        if paged is not None:
            sys.stdout = paged.terminal
            paged.finish()
        return code
    except BrokenPipeError:
        return closed_pipe_exit()
    except LoopstateError as exc:
        if paged is not None:  # what was printed before the refusal is shown, then the refusal
            sys.stdout = paged.terminal
            paged.finish()
        return refused(args, exc)
    except KeyboardInterrupt:
        return 130
    except OSError as exc:
        from loopstate.core.safefs import os_refusal

        # A condition of the machine the store's own checks did not already name (a full
        # disk, a data dir that is a file, a read-only projection target): refused as clearly.
        return refused(args, os_refusal(exc))
    except Exception as exc:
        return internal_error(exc)


def refused(args: argparse.Namespace, exc: LoopstateError) -> int:
    """One line on stderr, or the JSON error object with --json; exit code 1."""
    if getattr(args, "json", False):
        emit_json({"error": exc.to_dict()})
    else:
        from loopstate.cli.terminal import paint

        sys.stderr.write(f"loopstate: {paint(exc.code.value, 'red', sys.stderr)}: {exc.message}\n")
    return EXIT_ERROR


def internal_error(exc: Exception) -> int:
    """A bug: said plainly, with an exit code of its own."""
    sys.stderr.write(f"loopstate: internal error: {type(exc).__name__}: {exc}\n")
    return EXIT_INTERNAL
