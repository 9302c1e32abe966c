"""Run the real `loopstate` CLI in a subprocess, from a chosen directory, with a private data dir."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path


def cli(*args: str, cwd: Path, data_dir: Path | None, env: dict[str, str] | None = None,
        stdin: str | None = None) -> subprocess.CompletedProcess[str]:
    base = {k: v for k, v in os.environ.items() if k not in ("LOOPSTATE_DATA_DIR", "CODEX_HOME", "PLUGIN_DATA")}
    if data_dir is not None:
        base["LOOPSTATE_DATA_DIR"] = str(data_dir)
    return subprocess.run([sys.executable, "-m", "loopstate.cli.main", *args], cwd=cwd, env={**base, **(env or {})},
                          capture_output=True, text=True, timeout=120, input=stdin)


def on_a_terminal(argv: list[str], cwd: Path, env: dict[str, str], *, stdout: bool = True, stderr: bool = True,
                  rows: int = 200, columns: int = 160) -> bytes:
    """Everything the real CLI writes to a real terminal: a pty of ``rows`` x ``columns`` on stdout
    and stderr (either may be sent to /dev/null instead), read until the command closes it."""
    import fcntl
    import pty
    import struct
    import termios

    primary, replica = pty.openpty()
    fcntl.ioctl(replica, termios.TIOCSWINSZ, struct.pack("HHHH", rows, columns, 0, 0))
    with subprocess.Popen([sys.executable, "-m", "loopstate.cli.main", *argv], cwd=cwd, env=env,
                          stdout=replica if stdout else subprocess.DEVNULL,
                          stderr=replica if stderr else subprocess.DEVNULL, stdin=subprocess.DEVNULL) as proc:
        os.close(replica)
        seen = b""
        while True:
            try:
                chunk = os.read(primary, 65536)
            except OSError:  # the command closed the pty
                break
            if not chunk:
                break
            seen += chunk
        proc.wait(timeout=120)
    os.close(primary)
    return seen
