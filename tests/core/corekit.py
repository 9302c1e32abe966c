"""Helpers shared by the core tests: events, raw stream files, tree snapshots, child processes.

Kept as plain functions (not fixtures) so the child-process scripts and the
hypothesis tests, which build their own temporary folders, can use them too.
"""

from __future__ import annotations

import hashlib
import os
import stat
import subprocess
import sys
from pathlib import Path
from typing import Any

from loopstate.core import canonical
from loopstate.core.chain import ChainLayout, Position, seal
from loopstate.core.project import Project
from loopstate.core.stream import Stream

CHILD = Path(__file__).resolve().parent / "core_child.py"
STREAM = "core"


def _classify(value: Any) -> str:
    if value == 1 and type(value) is int:
        return "ok"
    return "future" if type(value) is int and value > 1 else "invalid"


# The layout every core test and child process uses: the core does not care which
# domain wrote a stream. Kept here, not in a conftest, so it imports the same way
# in tests and in child processes that should not pay for importing pytest.
TEST_LAYOUT = ChainLayout(
    sequence_field="sequence", prev_field="prev_hash", hash_field="event_hash",
    schema_field="schema_version", classify_schema=_classify,
)


def event(n: int, **extra: Any) -> dict[str, Any]:
    """A small v1 event body (the chain fields are added by ``seal``)."""
    return {"schema_version": 1, "event_type": "noted", "n": n, **extra}


def sealed_lines(bodies: list[dict[str, Any]], layout: ChainLayout) -> tuple[list[dict[str, Any]], list[bytes]]:
    """Seal ``bodies`` into a chain in memory: (events, lines with newlines)."""
    events, lines, at = [], [], Position()
    for body in bodies:
        ev, line = seal(body, layout, at)
        at = Position(at.offset + len(line), ev[layout.sequence_field], ev[layout.hash_field])
        events.append(ev)
        lines.append(line)
    return events, lines


def write_stream(project: Project, name: str, data: bytes) -> Path:
    """Put raw bytes in place as a stream file (0600, in 0700 folders)."""
    project.ensure()
    folder = project.dir / "streams"
    folder.mkdir(mode=0o700, exist_ok=True)
    path = folder / f"{name}.jsonl"
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    try:
        os.write(fd, data)
    finally:
        os.close(fd)
    return path


def read_all(project: Project, name: str, layout: ChainLayout) -> tuple[list[dict[str, Any]], Stream]:
    """Full verification from byte 0 by a fresh Stream; returns (events, stream)."""
    stream = Stream(project.dir, name, layout)
    return [r.event for r in stream.read_new()], stream


def line_starts(lines: list[bytes]) -> list[int]:
    starts, at = [], 0
    for line in lines:
        starts.append(at)
        at += len(line)
    return starts


def snapshot(folder: Path) -> dict[str, tuple]:
    """Every entry below ``folder``: kind, mode, size and content hash of files.

    A lock file's content is left out: its owner record names whoever took the
    lock last, which a mutation that then refuses to write has still done.
    """
    out: dict[str, tuple] = {}
    if not os.path.lexists(folder):
        return out
    for dirpath, dirnames, filenames in os.walk(folder):
        for name in dirnames + filenames:
            path = Path(dirpath) / name
            info = os.lstat(path)
            rel = os.fspath(path.relative_to(folder))
            if stat.S_ISREG(info.st_mode) and path.parent.name == "locks" and name.endswith(".lock"):
                out[rel] = ("lock", stat.S_IMODE(info.st_mode), info.st_size)
            elif stat.S_ISREG(info.st_mode):
                out[rel] = ("file", stat.S_IMODE(info.st_mode), info.st_size, hashlib.sha256(path.read_bytes()).hexdigest())
            else:
                out[rel] = (stat.S_IFMT(info.st_mode), stat.S_IMODE(info.st_mode))
    return out


def child_env(data_dir: Path) -> dict[str, str]:
    env = dict(os.environ)
    env["LOOPSTATE_DATA_DIR"] = str(data_dir)
    return env


def spawn(data_dir: Path, *args: str, **kwargs: Any) -> subprocess.Popen:
    """Start ``core_child.py`` with line-buffered stdout we can read as it goes."""
    return subprocess.Popen(
        [sys.executable, str(CHILD), *args],
        env=child_env(data_dir), stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, bufsize=1, **kwargs,
    )


def sha256(data: bytes) -> str:
    return canonical.sha256_hex(data)


def cli(root: Path, *args: str) -> subprocess.CompletedProcess[str]:
    """The real CLI in a fresh process, on ``root`` (the data dir from the environment)."""
    return subprocess.run([sys.executable, "-m", "loopstate.cli.main", *args, "--root", str(root)],
                          capture_output=True, text=True, env=os.environ.copy(), timeout=120)


def cli_ok(root: Path, *args: str) -> str:
    done = cli(root, *args)
    assert done.returncode == 0, (args, done.stdout, done.stderr)
    return done.stdout
