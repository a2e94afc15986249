"""Crash-safe file replacement, the one helper every persisted file uses.

Invariant: after `write_atomic(path, data)` returns, `path` holds `data` durably (file and
directory fsynced); a crash at any point leaves either the old file or the new one, never a mix.
"""

from __future__ import annotations

import os
import uuid
from collections.abc import Iterable
from pathlib import Path

Bytes = bytes | bytearray | memoryview


def write_atomic(path: Path, data: Bytes | Iterable[Bytes]) -> None:
    """Write `data` (bytes, or pieces of bytes written one after another: a large file need not
    be joined in memory first) to a temporary sibling, fsync it, rename it over `path`, fsync
    the folder."""
    tmp = path.with_name(f".{path.name}.{os.getpid()}.{uuid.uuid4().hex[:8]}.tmp")
    try:
        with open(tmp, "wb") as handle:
            if isinstance(data, (bytes, bytearray, memoryview)):
                handle.write(data)
            else:
                handle.writelines(data)
            handle.flush()
            os.fsync(handle.fileno())
        os.replace(tmp, path)
    except BaseException:
        tmp.unlink(missing_ok=True)
        raise
    fsync_dir(path.parent)


def fsync_dir(folder: Path) -> None:
    """Make a rename inside `folder` durable (a no-op where folders cannot be opened)."""
    try:
        fd = os.open(folder, os.O_RDONLY)
    except OSError:  # pragma: no cover - platforms without directory fds
        return
    try:
        os.fsync(fd)
    except OSError:  # pragma: no cover
        pass
    finally:
        os.close(fd)
