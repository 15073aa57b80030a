"""Files under --state-dir replaced atomically: the restore state and the experiment phases.

Write: a temporary file in the same directory with a name of its own (the pid and a count: no two
writes ever share one), created exclusively and never through a symbolic link (O_EXCL|O_NOFOLLOW),
fsync, rename over the old file, fsync the directory, so a SIGKILL at any instant leaves either the
old or the new content, never a torn one. Writes of one path are one at a time (a shutdown's last
write waits for the one a worker thread has in flight).
Read (`read_regular`): only a regular file, opened without following a symbolic link and
without blocking (a FIFO at the path would hang the open), at most `max_bytes`.
One sidecar per directory (`DirectoryLock`): an exclusive flock on `.lock`, holding the pid.
"""

from __future__ import annotations

import errno
import fcntl
import itertools
import os
import stat
import threading
import time
from pathlib import Path

MAX_STATE_BYTES = 8 * 1024 * 1024  # a restore state with 1,000 event ids is about 70 KB
LOCK_FILE = ".lock"
_WRITING = threading.Lock()  # one write at a time in this process (the writers are few and rare)
_SERIAL = itertools.count(1)


class NotRegularFile(OSError):
    """The path holds something other than a regular file (a FIFO, a symbolic link, a
    directory, a device) or one over the size limit: it is neither read nor written over."""


def _kind(mode: int) -> str:
    for test, name in ((stat.S_ISFIFO, "a FIFO"), (stat.S_ISLNK, "a symbolic link"),
                       (stat.S_ISDIR, "a directory"), (stat.S_ISSOCK, "a socket"),
                       (stat.S_ISCHR, "a character device"), (stat.S_ISBLK, "a block device")):
        if test(mode):
            return name
    return "not a regular file"


def read_regular(path: Path, max_bytes: int = MAX_STATE_BYTES) -> bytes | None:
    """The content of the regular file at `path`, None when there is none; NotRegularFile when
    the path is something else; OSError when it cannot be read."""
    try:
        fd = os.open(path, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC)
    except (FileNotFoundError, NotADirectoryError):
        return None
    except OSError as exc:
        if exc.errno == errno.ELOOP:
            raise NotRegularFile(errno.ELOOP, f"{path} is a symbolic link: not followed") from None
        raise
    try:
        st = os.fstat(fd)
        if not stat.S_ISREG(st.st_mode):
            raise NotRegularFile(errno.EINVAL, f"{path} is {_kind(st.st_mode)}, not a regular file")
        if st.st_size > max_bytes:
            raise NotRegularFile(errno.EFBIG, f"{path} is {st.st_size} bytes, over {max_bytes}")
        chunks, left = [], max_bytes + 1
        while left > 0:
            chunk = os.read(fd, min(left, 1 << 20))
            if not chunk:
                break
            chunks.append(chunk)
            left -= len(chunk)
        if left <= 0:
            raise NotRegularFile(errno.EFBIG, f"{path} grew over {max_bytes} bytes")
        return b"".join(chunks)
    finally:
        os.close(fd)


def atomic_write(path: Path, data: bytes) -> None:
    """Replace `path` with `data`; raises OSError (disk full, read-only) to the caller. Waits for
    a write in flight in another thread: one at a time."""
    with _WRITING:
        _write(path, data)


def _write(path: Path, data: bytes) -> None:
    directory = path.parent
    directory.mkdir(parents=True, exist_ok=True)
    tmp = temporary_name(path)
    flags = os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW | os.O_CLOEXEC
    try:
        fd = os.open(tmp, flags, 0o600)
    except FileExistsError:
        # Ours from a write that failed half-way, or planted (a link): unlink removes the entry
        # itself, never what a link points to; then create it afresh, exclusively.
        tmp.unlink(missing_ok=True)
        fd = os.open(tmp, flags, 0o600)
    try:
        view = memoryview(data)
        while view:
            written = os.write(fd, view)
            view = view[written:]
        os.fsync(fd)
    except BaseException:
        os.close(fd)
        tmp.unlink(missing_ok=True)
        raise
    os.close(fd)
    tmp.replace(path)
    dir_fd = os.open(directory, os.O_RDONLY | os.O_DIRECTORY | os.O_CLOEXEC)
    try:
        os.fsync(dir_fd)
    finally:
        os.close(dir_fd)


def temporary_name(path: Path) -> Path:
    """Where one `atomic_write` stages `path`: a name of its own (the pid and a count), so two
    writes never share one."""
    return path.with_name(f".{path.name}.{os.getpid()}-{next(_SERIAL)}.tmp")


def remove_stale_temporaries(path: Path) -> None:
    """Temporary files of processes killed mid-write: never the content, always safe to drop."""
    try:
        stale = list(path.parent.glob(f".{path.name}.*.tmp"))
    except OSError:
        return
    for tmp in stale:
        try:
            tmp.unlink()
        except OSError:
            continue


def move_aside(path: Path) -> Path | None:
    """Rename an unusable file to `<name>.corrupt-<ms>[-n]` (never over an earlier copy: on-call
    may need it); where it went, None when it could not be moved."""
    stamp = int(time.time() * 1000)
    for n in range(100):
        aside = path.with_name(f"{path.name}.corrupt-{stamp}" + (f"-{n}" if n else ""))
        if aside.exists():
            continue
        try:
            path.rename(aside)
        except OSError:
            return None
        return aside
    return None


class DirectoryHeld(Exception):
    """Another process holds the directory's lock."""

    def __init__(self, directory: Path, holder: str) -> None:
        super().__init__(f"{directory} is in use by another sidecar (pid {holder}): one sidecar "
                         "per --state-dir")
        self.holder = holder


class LockUnusable(Exception):
    """The directory's `.lock` exists but cannot be opened or locked (a directory, a link, no
    permission): the one-sidecar rule cannot be kept, so the sidecar does not start."""

    def __init__(self, path: Path, why: str) -> None:
        super().__init__(f"{path} exists but cannot be locked ({why}): remove or repair it; one "
                         "sidecar per --state-dir needs it")


class DirectoryLock:
    """An exclusive lock on a state directory for this process's lifetime (flock on `.lock`,
    released by the kernel when the process ends, even by SIGKILL)."""

    def __init__(self, directory: Path) -> None:
        self.path = directory / LOCK_FILE
        self._fd: int | None = None

    def acquire(self) -> None:
        """Take the lock; DirectoryHeld when another process has it, LockUnusable when a
        `.lock` exists that cannot be locked, OSError when the directory cannot hold a lock file
        at all (read-only, no directory: the state writes will fail and say so)."""
        self.path.parent.mkdir(parents=True, exist_ok=True)
        try:
            fd = os.open(self.path, os.O_RDWR | os.O_CREAT | os.O_NOFOLLOW | os.O_CLOEXEC, 0o600)
        except OSError as exc:
            if os.path.lexists(self.path):
                raise LockUnusable(self.path, exc.strerror or str(exc)) from None
            raise
        try:
            mode = os.fstat(fd).st_mode
            if not stat.S_ISREG(mode):
                raise LockUnusable(self.path, f"{_kind(mode)}, not a regular file")
            try:
                fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
            except BlockingIOError:
                holder = os.read(fd, 32).decode("ascii", "replace").strip() or "unknown"
                raise DirectoryHeld(self.path.parent, holder) from None
            except OSError as exc:
                raise LockUnusable(self.path, exc.strerror or str(exc)) from None
            os.ftruncate(fd, 0)
            os.pwrite(fd, f"{os.getpid()}\n".encode(), 0)
        except BaseException:
            os.close(fd)
            raise
        self._fd = fd

    def release(self) -> None:
        if self._fd is not None:
            os.close(self._fd)
            self._fd = None
