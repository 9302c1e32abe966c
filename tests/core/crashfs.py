"""What a power cut can leave: replay a command's traced file system calls on a model
that knows which bytes and names were made durable, and build the crash states.

``trace`` runs a real command under strace (``-f -y -xx``: every process and
thread, file descriptors with their paths, every string in hex). ``Model``
replays the calls below one folder on a tree of nodes. A file node keeps its
current bytes and the bytes its last fsync made durable; a folder node keeps
its current entries and those its last fsync made durable. Only those are
guaranteed after a power cut; anything else may or may not have reached the
disk. ``crash_states`` takes every prefix of the calls and, for each, the
states that bracket what the disk may hold:

- ``synced``: only fsynced names and fsynced bytes;
- ``cached``: everything the calls did (what SIGKILL leaves);
- ``names``: every name as the calls left it, but only fsynced bytes (a rename
  or a create reached the disk, the data written before it did not);
- ``bytes``: only fsynced names, with every byte written;
- ``torn``: every name, and each file's bytes past its last fsync cut in half
  (a write cut short).

The states are deduplicated: most calls change no state at all.
"""

from __future__ import annotations

import os
import re
import shutil
import subprocess
from dataclasses import dataclass, field
from pathlib import Path
from typing import Iterator

SYSCALLS = (
    "openat,open,creat,write,pwrite64,writev,ftruncate,truncate,fsync,fdatasync,rename,renameat,renameat2,"
    "unlink,unlinkat,mkdir,mkdirat,rmdir,close,lseek,dup,dup2,dup3,fcntl,clone,clone3,fork,vfork,link,linkat,"
    "symlink,symlinkat,sync,syncfs,sync_file_range"
)
VARIANTS = ("synced", "cached", "names", "bytes", "torn")
TEMP_MARK = ".loopstate-tmp-"
_LINE = re.compile(r"^(\d+) +(\w+)\((.*)\) += (-?\d+|\?)(?:<[^>]*>)?(?: .*)?$")
_HEX = re.compile(r'"((?:\\x[0-9a-f]{2})*)"')


def strace_path() -> str | None:
    return shutil.which("strace")


def trace(args: list[str], env: dict[str, str], log: Path, cwd: Path | None = None) -> subprocess.CompletedProcess[str]:
    """Run ``args`` under strace, writing the calls to ``log``."""
    return subprocess.run(
        ["strace", "-f", "-qq", "-xx", "-y", "-s", str(1 << 24), "-e", f"trace={SYSCALLS}", "-o", str(log), *args],
        env=env, cwd=cwd, capture_output=True, text=True, timeout=120,
    )


@dataclass
class Call:
    pid: int
    name: str
    args: list[str]
    result: int


def _split_args(text: str) -> list[str]:
    out, depth, start, quoted = [], 0, 0, False
    for i, ch in enumerate(text):
        if ch == '"':
            quoted = not quoted
        elif quoted:
            continue
        elif ch in "{[<":
            depth += 1
        elif ch in "}]>":
            depth -= 1
        elif ch == "," and depth == 0:
            out.append(text[start:i].strip())
            start = i + 1
    if text.strip():
        out.append(text[start:].strip())
    return out


def parse(log: Path) -> list[Call]:
    """The completed calls in the order they returned (resumed halves joined to their start)."""
    calls, pending = [], {}
    for raw in log.read_text().splitlines():
        pid, _, rest = raw.partition(" ")
        rest = rest.lstrip()
        if rest.endswith("<unfinished ...>"):
            pending[pid] = rest[: -len("<unfinished ...>")].rstrip()
            continue
        if rest.startswith("<..."):
            head = pending.pop(pid, None)
            if head is None:
                continue
            rest = head + rest.split("resumed>", 1)[1]
        match = _LINE.match(f"{pid} {rest}")
        if match is None:
            continue  # signals, exits
        result = match.group(4)
        calls.append(Call(int(match.group(1)), match.group(2), _split_args(match.group(3)), int(result) if result != "?" else -1))
    return calls


def arg_text(arg: str) -> bytes:
    """A hex-escaped string argument (``"\\x41..."``), or a descriptor's ``<path>``, as bytes."""
    match = _HEX.search(arg)
    if match is not None and arg.lstrip().startswith('"'):
        return bytes.fromhex(match.group(1).replace("\\x", ""))
    inner = arg[arg.index("<") + 1: arg.rindex(">")] if "<" in arg else ""
    return bytes.fromhex(inner.replace("\\x", "")) if inner.startswith("\\x") else inner.encode()


def _fd(arg: str) -> int:
    return int(arg.split("<", 1)[0])


class Node:
    __slots__ = ("is_dir", "data", "synced", "entries", "synced_entries")

    def __init__(self, is_dir: bool, data: bytes = b"") -> None:
        self.is_dir = is_dir
        self.data = bytearray(data)
        self.synced = bytes(data)
        self.entries: dict[str, Node] = {}
        self.synced_entries: dict[str, Node] = {}


@dataclass
class Handle:
    node: Node
    append: bool
    pos: int = 0


@dataclass
class Model:
    """The tree below ``base`` as the traced calls change it."""

    base: Path
    root: Node = field(init=False)
    tables: dict[int, dict[int, Handle]] = field(default_factory=dict)
    acknowledged_at: int | None = None  # the index of the first write to stdout

    def __post_init__(self) -> None:
        self.root = self._load(self.base)

    def _load(self, path: Path) -> Node:
        """The tree as it is now, all of it durable (the caller synced it)."""
        if path.is_dir() and not path.is_symlink():
            node = Node(True)
            for child in sorted(path.iterdir()):
                node.entries[child.name] = self._load(child)
            node.synced_entries = dict(node.entries)
            return node
        return Node(False, path.read_bytes())

    def _split(self, raw: bytes) -> tuple[Node, str] | None:
        """The folder node and the name of a path below ``base``; None outside it or when the folder is not there."""
        path = os.fsdecode(raw)
        base = os.fspath(self.base)
        if not path.startswith(base + os.sep):
            return None
        parts = path[len(base) + 1:].split(os.sep)
        node = self.root
        for part in parts[:-1]:
            node = node.entries.get(part)
            if node is None or not node.is_dir:
                return None
        return node, parts[-1]

    def _table(self, pid: int) -> dict[int, Handle]:
        return self.tables.setdefault(pid, {})

    def _path_arg(self, call: Call, dirfd_at: int | None, path_at: int) -> bytes:
        path = arg_text(call.args[path_at])
        if not path.startswith(b"/") and dirfd_at is not None:
            path = arg_text(call.args[dirfd_at]) + b"/" + path
        return path

    def apply(self, index: int, call: Call) -> None:
        name, args, table = call.name, call.args, self._table(call.pid)
        if call.result < 0 and name not in ("clone", "clone3", "fork", "vfork"):
            return
        if name in ("open", "openat", "creat"):
            at = 1 if name == "openat" else 0
            flags = "O_CREAT|O_TRUNC" if name == "creat" else args[at + 1]
            path = self._path_arg(call, 0 if name == "openat" else None, at)
            if os.fsdecode(path).rstrip("/") == os.fspath(self.base):  # the folder itself, to fsync it
                table[call.result] = Handle(self.root, False)
                return
            where = self._split(path)
            if where is None:
                table.pop(call.result, None)
                return
            folder, leaf = where
            node = folder.entries.get(leaf)
            if node is None:
                node = folder.entries[leaf] = Node("O_DIRECTORY" in flags)
            if "O_TRUNC" in flags:
                node.data = bytearray()
            table[call.result] = Handle(node, "O_APPEND" in flags)
        elif name in ("write", "pwrite64"):
            handle = table.get(_fd(args[0]))
            if handle is None:
                if _fd(args[0]) == 1 and self.acknowledged_at is None:
                    self.acknowledged_at = index
                return
            data = arg_text(args[1])[: call.result]
            node = handle.node
            at = int(args[3]) if name == "pwrite64" else (len(node.data) if handle.append else handle.pos)
            if at > len(node.data):
                node.data.extend(b"\0" * (at - len(node.data)))
            node.data[at:at + len(data)] = data
            if name == "write":
                handle.pos = at + len(data)
        elif name == "writev":
            raise AssertionError("writev on a store file is not modelled")
        elif name == "lseek":
            handle = table.get(_fd(args[0]))
            if handle is not None:
                handle.pos = call.result
        elif name == "ftruncate":
            handle = table.get(_fd(args[0]))
            if handle is not None:
                del handle.node.data[int(args[1]):]
        elif name in ("fsync", "fdatasync"):
            handle = table.get(_fd(args[0]))
            if handle is not None:
                node = handle.node
                if node.is_dir:
                    node.synced_entries = dict(node.entries)
                else:
                    node.synced = bytes(node.data)
        elif name in ("rename", "renameat", "renameat2"):
            old_at, new_at = (0, 1) if name == "rename" else (1, 3)
            old = self._split(self._path_arg(call, None if name == "rename" else 0, old_at))
            new = self._split(self._path_arg(call, None if name == "rename" else 2, new_at))
            if old is not None and new is not None and name == "renameat2" and "RENAME_EXCHANGE" in args[4]:
                old[0].entries[old[1]], new[0].entries[new[1]] = new[0].entries[new[1]], old[0].entries[old[1]]
            elif old is not None and new is not None:
                new[0].entries[new[1]] = old[0].entries.pop(old[1])
        elif name in ("link", "linkat"):  # a second name for the same file (how the checkpoint key is published)
            old_at, new_at = (0, 1) if name == "link" else (1, 3)
            old = self._split(self._path_arg(call, None if name == "link" else 0, old_at))
            new = self._split(self._path_arg(call, None if name == "link" else 2, new_at))
            if old is not None and new is not None and call.result == 0:
                new[0].entries[new[1]] = old[0].entries[old[1]]
        elif name in ("unlink", "unlinkat", "rmdir"):
            where = self._split(self._path_arg(call, 0 if name == "unlinkat" else None, 1 if name == "unlinkat" else 0))
            if where is not None:
                where[0].entries.pop(where[1], None)
        elif name in ("mkdir", "mkdirat"):
            where = self._split(self._path_arg(call, 0 if name == "mkdirat" else None, 1 if name == "mkdirat" else 0))
            if where is not None:
                where[0].entries[where[1]] = Node(True)
        elif name == "close":
            table.pop(_fd(args[0]), None)
        elif name in ("dup", "dup2", "dup3") or (name == "fcntl" and "F_DUPFD" in args[1]):
            handle = table.get(_fd(args[0]))
            if handle is not None:
                table[call.result] = handle
        elif name in ("clone", "clone3", "fork", "vfork") and call.result > 0:
            shared = any("CLONE_FILES" in arg for arg in args)
            self.tables[call.result] = table if shared else dict(table)
        elif name in ("symlink", "symlinkat", "truncate", "sync", "syncfs", "sync_file_range"):
            touched = [arg for arg in args if '"' in arg or "<" in arg]
            if name in ("sync", "syncfs") or any(self._split(arg_text(arg)) is not None for arg in touched):
                raise AssertionError(f"{name} on the store is not modelled; extend crashfs")

    def state(self, variant: str) -> dict[str, bytes | None]:
        """Every path (relative to ``base``) in the state ``variant`` names: bytes, or None for a folder."""
        out: dict[str, bytes | None] = {}

        def walk(node: Node, prefix: str) -> None:
            entries = node.synced_entries if variant in ("synced", "bytes") else node.entries
            for leaf, child in sorted(entries.items()):
                path = f"{prefix}{leaf}"
                if child.is_dir:
                    out[path] = None
                    walk(child, path + "/")
                elif variant in ("synced", "names"):
                    out[path] = child.synced
                elif variant == "torn" and bytes(child.data).startswith(child.synced) and len(child.data) > len(child.synced):
                    out[path] = bytes(child.data[: len(child.synced) + (len(child.data) - len(child.synced)) // 2])
                else:
                    out[path] = bytes(child.data)

        walk(self.root, "")
        return out


@dataclass(frozen=True)
class CrashState:
    after: int  # how many calls had returned
    variant: str
    acknowledged: bool  # the command had written its result to stdout
    files: tuple[tuple[str, bytes | None], ...]


def crash_states(model: Model, calls: list[Call], variants: tuple[str, ...] = VARIANTS) -> Iterator[CrashState]:
    """Each distinct state a power cut during the calls may leave below the model's base
    (in the given variants, for every prefix), first seen first; ``model`` was loaded before the calls."""
    seen: set[tuple] = set()

    def emit(after: int) -> Iterator[CrashState]:
        acknowledged = model.acknowledged_at is not None
        for variant in variants:
            files = tuple(model.state(variant).items())
            # Temp files are never read (only swept by name): states that differ in them alone are one.
            key = (tuple(item for item in files if TEMP_MARK not in item[0]), acknowledged)
            if key not in seen:
                seen.add(key)
                yield CrashState(after, variant, acknowledged, files)

    yield from emit(0)
    for index, call in enumerate(calls):
        model.apply(index, call)
        yield from emit(index + 1)


def materialize(base: Path, state: CrashState) -> None:
    """Make ``base`` hold exactly ``state`` (folders 0700, files 0600, as the store makes them)."""
    if base.exists():
        shutil.rmtree(base)
    base.mkdir(mode=0o700)
    for path, data in state.files:
        target = base / path
        if data is None:
            target.mkdir(mode=0o700)
        else:
            fd = os.open(target, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
            try:
                os.write(fd, data)
            finally:
                os.close(fd)
