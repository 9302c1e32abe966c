"""Kill-switch files: where they are by default and how one is probed, with nothing else loaded.

A switch is a file the user can touch in the project (``.loopstate/STOP``, and
the compatible runs format's own ``.the-loop/STOP``, or the paths the runs config lists), or the
``.loopstate/STOP`` of any folder above the project: a project nested in
another (``src/sub`` made a project of its own) stays under the enclosing
project's switch, so a stop errs on the side of stopping.
Present in any form, or unreadable, it means stop; it never authorizes
anything. This module is all a probe needs, so a hook on every tool call can
look for a switch without loading the runs domain (which validates the config
and owns every other rule about switches).
"""

from __future__ import annotations

import os
from pathlib import Path

import msgspec

CONFIG_PATH = ".loopstate/config.json"  # the runs config, where more switches may be listed
DEFAULT_KILL_SWITCH = ".loopstate/STOP"  # the one `loopstate run stop` creates
COMPAT_KILL_SWITCH = ".the-loop/STOP"  # where the compatible runs tooling (the-loop) looks for its switch
DEFAULT_KILL_SWITCHES = (DEFAULT_KILL_SWITCH, COMPAT_KILL_SWITCH)


def switch_path(root: str, configured: str) -> Path:
    path = Path(configured)
    return path if path.is_absolute() else Path(root) / path


def probe_kill_switches(root: str, switches: list[str] | tuple[str, ...]) -> dict[str, str] | None:
    """The first switch that is present or unreadable; None when every one is provably absent."""
    for configured in switches:
        try:
            os.lstat(switch_path(root, configured))
        except FileNotFoundError:
            continue
        except OSError as exc:
            return {"path": configured, "state": "unreadable", "error": exc.strerror or str(exc)}
        return {"path": configured, "state": "present"}
    return None


def enclosing_switches(root: str) -> tuple[str, ...]:
    """The ``.loopstate/STOP`` of every folder above ``root``, nearest first, as absolute paths.

    ``loopstate run stop`` in a project sets this file; a project nested below
    it must halt too, so every probe of a project's switches also looks up the
    tree (one ``lstat`` per ancestor, no data dir needed).
    """
    found, here = [], os.path.abspath(root)
    while (parent := os.path.dirname(here)) != here:
        found.append(os.path.join(parent, DEFAULT_KILL_SWITCH))
        here = parent
    return tuple(found)


def every_switch(root: str) -> tuple[str, ...]:
    """The default switches and every path the runs config lists, read as plain JSON without validating it.

    For a probe that must not miss a STOP even when the config is invalid or
    cannot be loaded: a switch only halts, so probing one path too many never
    authorizes anything. (Run commands use the validated config's list.)
    """
    switches = list(DEFAULT_KILL_SWITCHES)
    try:
        config = msgspec.json.decode((Path(root) / CONFIG_PATH).read_bytes())
    except (OSError, msgspec.DecodeError):
        config = None
    listed = config.get("kill_switches") if isinstance(config, dict) else None
    if isinstance(listed, list):
        switches += [path for path in listed if isinstance(path, str) and path and "\0" not in path]
    return tuple(dict.fromkeys([*switches, *enclosing_switches(root)]))
