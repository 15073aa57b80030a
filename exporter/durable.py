"""Files under --state-dir replaced atomically: the restore state and the experiment phases.

Write: a temporary file in the same directory, fsync, rename over the old file, fsync the
directory, so a SIGKILL at any instant leaves either the old or the new content, never a torn one.
"""

from __future__ import annotations

import os
import time
from pathlib import Path


def atomic_write(path: Path, data: bytes) -> None:
    """Replace `path` with `data`; raises OSError (disk full, read-only) to the caller."""
    directory = path.parent
    directory.mkdir(parents=True, exist_ok=True)
    tmp = temporary_name(path)
    fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
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
    dir_fd = os.open(directory, os.O_RDONLY)
    try:
        os.fsync(dir_fd)
    finally:
        os.close(dir_fd)


def temporary_name(path: Path) -> Path:
    """Where `atomic_write` stages `path` (per process, so two writers never share one)."""
    return path.with_name(f".{path.name}.{os.getpid()}.tmp")


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
