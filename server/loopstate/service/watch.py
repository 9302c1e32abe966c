"""Wake up when another process appends to a watched stream: inotify on the event loop.

Linux inotify through ctypes (no dependency): one descriptor, registered with
``loop.add_reader``, so an idle server sleeps in epoll and uses no CPU. A
watched folder that does not exist yet (a project nobody has written to) is
armed on its nearest existing ancestor and moved down as folders appear. On
another platform ``Watcher.available`` is False and the server says so in its
log: changes by other processes are then seen at the next request.
"""

from __future__ import annotations

import asyncio
import ctypes
import ctypes.util
import errno
import logging
import os
import struct
import sys
from pathlib import Path
from typing import Callable

log = logging.getLogger("loopstate.service")

IN_MODIFY = 0x00000002
IN_MOVED_FROM = 0x00000040
IN_MOVED_TO = 0x00000080
IN_CREATE = 0x00000100
IN_DELETE = 0x00000200
IN_DELETE_SELF = 0x00000400
IN_MOVE_SELF = 0x00000800
IN_Q_OVERFLOW = 0x00004000
IN_IGNORED = 0x00008000
IN_ONLYDIR = 0x01000000
IN_NONBLOCK = 0o4000
IN_CLOEXEC = 0o2000000

# A writer keeps its stream descriptor open between appends, so an append shows as
# IN_MODIFY at its write, before its fsync: the refresh it triggers takes the stream's
# shared lock, which waits for the writer to release its exclusive lock after the
# fsync, so only durable bytes are read. A write cut short by a crash (a torn tail)
# and the cut of one are IN_MODIFY too. IN_MOVED_TO is a re-chained stream put in place.
# IN_DELETE and IN_MOVED_FROM: a file going away (a kill switch removed by hand).
MASK = IN_MODIFY | IN_MOVED_FROM | IN_MOVED_TO | IN_CREATE | IN_DELETE | IN_DELETE_SELF | IN_MOVE_SELF | IN_ONLYDIR
_HEADER = struct.Struct("iIII")

ChangeFn = Callable[[Path, str | None], None]
"""Called with a watched folder and the name that changed in it (None: anything may have)."""


def _libc():
    if not sys.platform.startswith("linux"):
        return None
    try:
        libc = ctypes.CDLL(ctypes.util.find_library("c") or "libc.so.6", use_errno=True)
        libc.inotify_init1.argtypes = [ctypes.c_int]
        libc.inotify_add_watch.argtypes = [ctypes.c_int, ctypes.c_char_p, ctypes.c_uint32]
        libc.inotify_rm_watch.argtypes = [ctypes.c_int, ctypes.c_int]
        return libc
    except (OSError, AttributeError):
        return None


class Watcher:
    """Reference-counted folder watches feeding ``on_change`` on the loop's thread."""

    def __init__(self, loop: asyncio.AbstractEventLoop, on_change: ChangeFn) -> None:
        self.loop = loop
        self.on_change = on_change
        self._libc = _libc()
        self._fd = -1
        if self._libc is not None:
            fd = self._libc.inotify_init1(IN_NONBLOCK | IN_CLOEXEC)
            if fd >= 0:
                self._fd = fd
                loop.add_reader(fd, self._readable)
            else:
                log.warning("inotify unavailable (%s): other processes' changes show at the next request",
                            os.strerror(ctypes.get_errno()))
        self.targets: dict[Path, int] = {}  # folder -> number of interested subscriptions
        self._wd_path: dict[int, Path] = {}
        self._path_wd: dict[Path, int] = {}

    @property
    def available(self) -> bool:
        return self._fd >= 0

    def watch(self, folder: Path) -> None:
        self.targets[folder] = self.targets.get(folder, 0) + 1
        if self.targets[folder] == 1:
            self._arm(folder)

    def unwatch(self, folder: Path) -> None:
        count = self.targets.get(folder, 0) - 1
        if count > 0:
            self.targets[folder] = count
            return
        self.targets.pop(folder, None)
        self._prune()

    def close(self) -> None:
        if self._fd >= 0:
            self.loop.remove_reader(self._fd)
            os.close(self._fd)
            self._fd = -1

    # inotify plumbing ----------------------------------------------------------

    def _add(self, path: Path) -> bool:
        if path in self._path_wd:
            return True
        wd = self._libc.inotify_add_watch(self._fd, os.fsencode(path), MASK)
        if wd < 0:
            err = ctypes.get_errno()
            if err not in (errno.ENOENT, errno.ENOTDIR):
                log.warning("cannot watch %s: %s", path, os.strerror(err))
            return False
        self._wd_path[wd] = path
        self._path_wd[path] = wd
        return True

    def _arm(self, folder: Path) -> None:
        """Watch ``folder``, or its nearest existing ancestor until it appears."""
        if not self.available:
            return
        while True:
            path = folder
            while not self._add(path):
                if path.parent == path:
                    return
                path = path.parent
            if path == folder:
                self.on_change(folder, None)  # it may have changed before the watch existed
                return
            # Watching an ancestor: the next folder down may have been created between
            # the failed attempt and this watch, with no event to tell. Look again.
            child = folder
            while child.parent != path:
                child = child.parent
            if not os.path.isdir(child):
                return  # its creation will be reported

    def _prune(self) -> None:
        """Drop watches no target needs (neither the folder nor an ancestor of a missing one)."""
        needed: set[Path] = set()
        for target in self.targets:
            path = target
            while path not in self._path_wd and path.parent != path:
                path = path.parent
            needed.add(path)
        for path, wd in list(self._path_wd.items()):
            if path not in needed:
                self._libc.inotify_rm_watch(self._fd, wd)
                self._forget(wd)

    def _forget(self, wd: int) -> None:
        path = self._wd_path.pop(wd, None)
        if path is not None:
            self._path_wd.pop(path, None)

    def _readable(self) -> None:
        try:
            data = os.read(self._fd, 1 << 16)
        except BlockingIOError:
            return
        offset = 0
        rearm = False
        changes: list[tuple[Path, str | None]] = []
        while offset + _HEADER.size <= len(data):
            wd, mask, _cookie, length = _HEADER.unpack_from(data, offset)
            name = data[offset + _HEADER.size: offset + _HEADER.size + length].rstrip(b"\0")
            offset += _HEADER.size + length
            if mask & IN_Q_OVERFLOW:
                changes.extend((target, None) for target in self.targets)
                continue
            path = self._wd_path.get(wd)
            if path is None:
                continue
            if mask & (IN_IGNORED | IN_DELETE_SELF | IN_MOVE_SELF):
                if mask & IN_IGNORED:
                    self._forget(wd)
                rearm = True
                continue
            if path in self.targets:
                changes.append((path, os.fsdecode(name) if name else None))
            if mask & (IN_CREATE | IN_MOVED_TO):
                rearm = True  # a folder we wait for may have appeared
        if rearm:
            for target in list(self.targets):
                if target not in self._path_wd:
                    self._arm(target)
            self._prune()
        for folder, name in changes:
            self.on_change(folder, name)
