"""File operations that refuse links, special files and escapes from the store.

Every store path (stream, lock, quarantine, checkpoint, projection) goes through
here. Files are opened with O_NOFOLLOW and checked on the opened descriptor:
a regular file with exactly one link whose parent chain stays inside the
project folder. A FIFO is opened non-blocking so it is refused instead of
hanging. New files are 0600, new folders 0700.
"""

from __future__ import annotations

import errno
import os
import stat
import weakref
from pathlib import Path
from typing import Callable

from loopstate_protocol.errors import ErrorCode

from loopstate.core.errors import LoopstateError

FILE_MODE = 0o600
DIR_MODE = 0o700
TEMP_MARK = ".loopstate-tmp-"


def _unsafe(path: Path | str, why: str) -> LoopstateError:
    return LoopstateError(
        ErrorCode.UNSAFE_PATH,
        f"refusing store path {os.fspath(path)!r}: {why}; remove it or point loopstate at a clean data dir",
        path=os.fspath(path),
        reason=why,
    )


def _parts_below(path: Path | str, base: Path | str) -> tuple[str, list[str]]:
    """``base`` as a string and the components of ``path`` below it (plain string work:
    this runs several times per append, and pathlib costs more than the syscalls)."""
    p, b = os.fspath(path), os.fspath(base)
    prefix = b if b.endswith(os.sep) else b + os.sep
    if not p.startswith(prefix):
        raise _unsafe(path, f"it is outside {b!r}")
    parts = p[len(prefix):].split(os.sep)
    if any(part in ("", ".", "..") for part in parts):
        raise _unsafe(path, "it has an empty, '.' or '..' segment")
    return b, parts


# What the kernel says when this process may not write a store that is there to read:
# another user's files, a backup restored read-only, a read-only mount.
WRITE_REFUSED = (errno.EACCES, errno.EPERM, errno.EROFS)


def write_refused(exc: OSError, path: Path | str) -> LoopstateError:
    """The error of a write this process may not make (``exc.errno`` in WRITE_REFUSED):
    which path, and what to do. Reads of the same store still work (``core/lock.py``)."""
    where = exc.filename if isinstance(exc.filename, str) else os.fspath(path)
    return LoopstateError(
        ErrorCode.STORE_IO_ERROR,
        f"cannot write {where}: {exc.strerror}; this store is read-only to this process (a read-only copy, "
        "a read-only mount or another user's store): reads still work, and to write run loopstate as the "
        "store's owner or set LOOPSTATE_DATA_DIR to a writable copy of it",
        path=where,
    )


NO_SPACE = (errno.ENOSPC, errno.EDQUOT)


def os_refusal(exc: OSError) -> LoopstateError:
    """An OS error a front door met, as the refusal a person can act on (never a bare exception name).

    These are conditions of the machine, not bugs: a full disk, a data dir that
    names a file, a store another user owns. What a crash in the middle of a
    write leaves is handled by the store as any torn tail is (docs/storage.md):
    nothing unacknowledged is kept, so the message only says what to fix.
    """
    where = exc.filename if isinstance(exc.filename, str) else "the store"
    if exc.errno in WRITE_REFUSED:
        return write_refused(exc, where)
    if exc.errno in NO_SPACE:
        return LoopstateError(
            ErrorCode.STORE_IO_ERROR,
            f"cannot write {where}: {exc.strerror} (the disk or your quota is full); nothing of this command was "
            "acknowledged: free some space and run it again", path=where, errno=exc.errno)
    if exc.errno == errno.ENOTDIR:
        from loopstate.core.paths import resolve_data_dir

        try:
            data_dir = str(resolve_data_dir())
        except LoopstateError:
            data_dir = None
        hint = (f"the data dir {data_dir} is a file, not a folder: set LOOPSTATE_DATA_DIR to a folder (or remove "
                "the file)" if data_dir and os.path.lexists(data_dir) and not os.path.isdir(data_dir)
                else "a part of that path is a file where a folder should be: move the file away")
        return LoopstateError(ErrorCode.STORE_IO_ERROR, f"cannot use {where}: {exc.strerror}; {hint}", path=where,
                              errno=exc.errno)
    name = errno.errorcode.get(exc.errno or 0, "an OS error")
    return LoopstateError(
        ErrorCode.STORE_IO_ERROR,
        f"cannot use {where}: {exc.strerror or exc} ({name}); check that path and LOOPSTATE_DATA_DIR, then run the "
        "command again", path=where, errno=exc.errno)


def check_inside(path: Path, base: Path) -> None:
    """Every component from ``base`` down to ``path``'s parent must be a real folder."""
    current, parts = _parts_below(path, base)
    for part in parts[:-1]:
        current = os.path.join(current, part)
        try:
            info = os.lstat(current)
        except FileNotFoundError:
            return
        if not stat.S_ISDIR(info.st_mode):
            raise _unsafe(current, "a folder in the store path is a symlink or not a folder")


def check_descriptor(fd: int, path: Path) -> os.stat_result:
    """The opened file must be a regular file with one link, still at ``path``."""
    info = os.fstat(fd)
    if not stat.S_ISREG(info.st_mode):
        raise _unsafe(path, "it is not a regular file")
    if info.st_nlink != 1:
        raise _unsafe(path, f"it has {info.st_nlink} hard links")
    try:
        named = os.lstat(path)
    except FileNotFoundError:
        raise _unsafe(path, "it disappeared while being opened") from None
    if (named.st_dev, named.st_ino) != (info.st_dev, info.st_ino):
        raise _unsafe(path, "it was replaced while being opened")
    return info


def ensure_dir(path: Path, base: Path) -> None:
    """Create ``path`` (and parents below ``base``) as 0700 folders, refusing links.

    Each new folder's parent is fsynced so the folder survives a crash.
    """
    if os.fspath(path) == os.fspath(base):
        return
    current, parts = _parts_below(path, base)
    for part in parts:
        parent, current = current, os.path.join(current, part)
        try:
            info = os.lstat(current)
        except FileNotFoundError:
            try:
                os.mkdir(current, DIR_MODE)
            except FileExistsError:
                pass
            fsync_dir(parent)
            info = os.lstat(current)
        if not stat.S_ISDIR(info.st_mode):
            raise _unsafe(current, "a folder in the store path is a symlink or not a folder")


def make_dirs_durably(path: Path | str, mode: int = DIR_MODE) -> None:
    """``mkdir -p`` that survives a power cut: each folder it creates has its parent
    fsynced, from the top-most new one down, so no acknowledged write below them
    can be left under a name the file system forgot."""
    path = os.path.abspath(os.fspath(path))
    missing = []
    while not os.path.lexists(path):
        missing.append(path)
        parent = os.path.dirname(path)
        if parent == path:
            break
        path = parent
    for folder in reversed(missing):
        try:
            os.mkdir(folder, mode)
        except FileExistsError:
            pass  # made meanwhile by another process: its name must last all the same
        fsync_dir(os.path.dirname(folder))


def ensure_base(base: Path) -> None:
    """Create the data/project base folder itself (0700) durably, refusing a symlink there."""
    if not os.path.lexists(base):
        make_dirs_durably(base)
    info = os.lstat(base)
    if not stat.S_ISDIR(info.st_mode):
        raise _unsafe(base, "the store folder is a symlink or not a folder")


def fsync_dir(path: Path | str) -> None:
    fd = os.open(path, os.O_RDONLY | os.O_DIRECTORY | os.O_CLOEXEC)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


def _open(path: Path, base: Path, flags: int) -> int:
    check_inside(path, base)
    try:
        return os.open(path, flags | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC, FILE_MODE)
    except OSError as exc:
        if exc.errno == errno.ELOOP:
            raise _unsafe(path, "it is a symlink") from None
        if exc.errno == errno.ENXIO:
            raise _unsafe(path, "it is a FIFO or socket") from None
        if exc.errno == errno.EISDIR:
            raise _unsafe(path, "it is a directory") from None
        raise


def _checked(fd: int, path: Path) -> int:
    # O_NONBLOCK stays set: it only ever mattered for refusing a FIFO at open,
    # and it has no effect on a regular file's reads, writes or flock.
    try:
        check_descriptor(fd, path)
    except BaseException:
        os.close(fd)
        raise
    return fd


def open_append(path: Path, base: Path) -> tuple[int, bool]:
    """Open for O_APPEND writing, creating 0600 if absent. Returns (fd, created).

    When the file is new its folder is fsynced so the name survives a crash.
    """
    created = False
    try:
        fd = _open(path, base, os.O_WRONLY | os.O_APPEND)
    except FileNotFoundError:
        try:
            fd = _open(path, base, os.O_WRONLY | os.O_APPEND | os.O_CREAT | os.O_EXCL)
            created = True
        except FileExistsError:
            fd = _open(path, base, os.O_WRONLY | os.O_APPEND)
    fd = _checked(fd, path)
    if created:
        fsync_dir(Path(path).parent)
    return fd, created


def open_read(path: Path, base: Path) -> int | None:
    """Open for reading; None when absent. Never creates anything."""
    try:
        fd = _open(path, base, os.O_RDONLY)
    except FileNotFoundError:
        return None
    return _checked(fd, path)


def open_cache(path: Path, base: Path) -> int | None:
    """Open a cache file (a checkpoint's mark, a stored index) for reading; None when it is
    absent, unreadable or not a safe regular file: a cache that cannot be read safely is
    simply not used."""
    try:
        return open_read(path, base)
    except (OSError, LoopstateError):
        return None


def open_rw(path: Path, base: Path, *, create: bool) -> int | None:
    """Open read-write (for lock files); None when absent and ``create`` is false.

    A file it creates has its folder fsynced, so the name survives a power cut
    (a lock file's presence says a mutation happened).
    """
    try:
        fd = _open(path, base, os.O_RDWR)
    except FileNotFoundError:
        if not create:
            return None
        try:
            fd = _open(path, base, os.O_RDWR | os.O_CREAT | os.O_EXCL)
        except FileExistsError:
            fd = _open(path, base, os.O_RDWR)
        except FileNotFoundError:  # its folder does not exist yet
            return None
        else:
            fd = _checked(fd, path)
            fsync_dir(Path(path).parent)
            return fd
    return _checked(fd, path)


def create_published(path: Path, base: Path, prepare: Callable[[int], None]) -> int:
    """Make ``path`` a new 0600 file that no process can open by its name before
    ``prepare(fd)`` has run on it: made under a temporary name beside it, prepared, renamed
    into place, its folder fsynced. Returns the open read-write descriptor.

    The rename replaces whatever has that name, so the caller must be the only one
    that makes it (a lock file is made only under its project's founding lock)."""
    check_inside(path, base)
    temp = temp_name(path)
    fd = _open(temp, base, os.O_RDWR | os.O_CREAT | os.O_EXCL)
    try:
        prepare(fd)
        os.rename(temp, path)
    except BaseException:
        os.close(fd)
        try:
            os.unlink(temp)
        except FileNotFoundError:
            pass
        raise
    fsync_dir(Path(path).parent)
    return _checked(fd, path)


class HeldDescriptor:
    """A descriptor kept open between operations; closed by ``close`` or when collected.

    A long-lived process appends to the same stream and takes the same lock
    again and again: keeping the descriptor saves an open, a close and their
    checks per mutation. ``still_at`` re-checks it with one lstat.

    A forked child never uses a descriptor it inherited: it shares the parent's
    open file description, so a flock taken through it would not exclude the
    parent. Every held descriptor is dropped in the child right after the fork
    (``os.register_at_fork``), and the child opens its own.
    """

    __slots__ = ("fd", "identity", "_finalizer", "__weakref__")

    def __init__(self) -> None:
        self.fd: int | None = None
        # (device, inode) of the held file, fixed for as long as it is held.
        self.identity: tuple[int, int] = (0, 0)
        self._finalizer: weakref.finalize[[int], HeldDescriptor] | None = None

    def hold(self, fd: int, info: os.stat_result) -> int:
        """Keep ``fd``, opened safely and checked (``info`` is its fstat)."""
        self.close()
        self.fd, self.identity = fd, (info.st_dev, info.st_ino)
        self._finalizer = weakref.finalize(self, os.close, fd)
        _held.add(self)
        return fd

    def _drop_inherited(self) -> None:
        """In a forked child: close this process's copy without touching the parent's lock."""
        if self._finalizer is not None:
            self._finalizer.detach()
        if self.fd is not None:
            try:
                os.close(self.fd)
            except OSError:
                pass
        self.fd = self._finalizer = None

    def still_at(self, path: str) -> os.stat_result | None:
        """The lstat of ``path`` when it still names the held file, a regular file
        with one link; otherwise the descriptor is closed and None returned, and
        the caller opens the path again the safe way (which names what is wrong).

        One lstat, no fstat: the held descriptor's (device, inode) cannot change,
        and the link count and size are the inode's, the same through either
        call. The folders need no second look: whatever was swapped in along the
        path, the bytes go to the file that was opened and verified, and only
        while that file is what the path names.
        """
        if self.fd is None:
            return None
        try:
            info = os.lstat(path)
        except OSError:
            info = None
        # The held inode is a regular file (it was checked when opened), so the
        # same (device, inode) at the path is that regular file.
        if info is None or info.st_ino != self.identity[1] or info.st_dev != self.identity[0] or info.st_nlink != 1:
            self.close()
            return None
        return info

    def close(self) -> None:
        """Close the descriptor (once) and forget it."""
        if self.fd is not None and self._finalizer is not None:
            self._finalizer()
        self.fd = self._finalizer = None
        _held.discard(self)


_held: "weakref.WeakSet[HeldDescriptor]" = weakref.WeakSet()


def _drop_inherited_descriptors() -> None:
    for held in list(_held):
        held._drop_inherited()
    _held.clear()


os.register_at_fork(after_in_child=_drop_inherited_descriptors)


def write_all(fd: int, data: bytes) -> None:
    written = os.write(fd, data)  # a regular file takes it whole, short of a full disk or a signal
    if written < len(data):
        view = memoryview(data)[written:]
        while view:
            view = view[os.write(fd, view):]


def read_file(path: Path, base: Path) -> bytes | None:
    fd = open_read(path, base)
    if fd is None:
        return None
    try:
        # One read of the size fstat gives (one copy, where chunks and a join made two: ~1 ms of a
        # cold read of a 4 MB snapshot), then on to EOF in case the file grew meanwhile.
        chunks = [os.read(fd, os.fstat(fd).st_size + 1)]
        while chunks[-1] and (chunk := os.read(fd, 1 << 20)):
            chunks.append(chunk)
        return chunks[0] if len(chunks) == 1 else b"".join(chunks)
    finally:
        os.close(fd)


def temp_name(path: Path) -> Path:
    # os.urandom is what secrets.token_hex reads; the secrets module (random, base64, hmac) is not imported for it.
    return path.with_name(f"{path.name}{TEMP_MARK}{os.urandom(8).hex()}")


def atomic_write(path: Path, base: Path, data: bytes, *, durable: bool = True) -> None:
    """Write ``data`` to a 0600 sibling temp file, then rename it over ``path``.

    The target, if present, must itself be a safe regular file: a symlink or
    hard link at the target is refused, never followed or replaced silently.
    """
    check_inside(path, base)
    try:
        existing = os.lstat(path)
    except FileNotFoundError:
        existing = None
    if existing is not None:
        if not stat.S_ISREG(existing.st_mode):
            raise _unsafe(path, "it is not a regular file")
        if existing.st_nlink != 1:
            raise _unsafe(path, f"it has {existing.st_nlink} hard links")
    replace_with(path, data, durable=durable)


def replace_with(path: Path, data: bytes, *, create_mode: int = FILE_MODE, chmod: int | None = None,
                 durable: bool = True) -> None:
    """The rename half of ``atomic_write``, for callers that checked the target themselves:
    ``data`` goes to a sibling temp file created with ``create_mode`` (then set to ``chmod``
    when given, e.g. to keep a replaced file's own bits), fsynced, renamed over ``path``,
    and the folder fsynced. A failure removes the temp file and leaves ``path`` as it was."""
    tmp = temp_name(path)
    fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW | os.O_CLOEXEC, create_mode)
    try:
        write_all(fd, data)
        if chmod is not None:
            os.fchmod(fd, chmod)
        if durable:
            os.fsync(fd)
    except BaseException:
        os.close(fd)
        os.unlink(tmp)
        raise
    os.close(fd)
    os.replace(tmp, path)
    if durable:
        fsync_dir(path.parent)


def unlink_durably(path: Path, base: Path) -> bool:
    """Remove a store file and fsync its folder, so the removal survives a power cut;
    False when it was not there."""
    check_inside(path, base)
    try:
        os.unlink(path)
    except FileNotFoundError:
        return False
    fsync_dir(path.parent)
    return True


def remove_orphan_temps(folder: str | Path, for_name: str | None = None) -> list[str]:
    """Remove strictly named temp files of ours left by a crash; returns their names.

    With ``for_name`` only the temps of that one target (``<for_name>`` plus our
    temp mark) are removed: the caller holds the lock that every writer of that
    target holds, so none of them can be a temp file still being written.
    """
    removed: list[str] = []
    try:
        names = os.listdir(folder)
    except FileNotFoundError:
        return removed
    mark = TEMP_MARK if for_name is None else for_name + TEMP_MARK
    for name in names:
        if mark not in name or (for_name is not None and not name.startswith(mark)):
            continue
        candidate = os.path.join(folder, name)
        info = os.lstat(candidate)
        if stat.S_ISREG(info.st_mode):
            os.unlink(candidate)
            removed.append(name)
    return removed
