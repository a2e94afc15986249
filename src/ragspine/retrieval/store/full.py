"""Is this error a full disk? The one check, for the stores and for every edge (HTTP, CLI, ingest).

Invariants: `storage_full` is the only place that recognises a full storage, whatever reported it:
SQLite's SQLITE_FULL ("database or disk is full", also what `PRAGMA max_page_count` gives),
PostgreSQL's `disk_full` (SQLSTATE 53100, psycopg's `DiskFull`), an OSError with ENOSPC or EDQUOT
(a lexical index or vectors file), or a `StorageFull` already made, found on the error itself or
along its causes; the `StorageFull` it returns has a one-line message that names no file path.
The stores' write transactions raise a full disk as `StorageFull` (`raising_storage_full`),
after their rollback: nothing of the write is kept.

>>> import errno
>>> print(storage_full(OSError(errno.ENOSPC, "No space left on device", "/data/chunks.db.bm25")))
storage full: No space left on device; free disk space and retry
>>> storage_full(ValueError("not a full disk")) is None
True
"""

from __future__ import annotations

import errno
import sqlite3
from collections.abc import Iterator
from contextlib import AbstractContextManager, contextmanager
from typing import Any

from ragspine.errors import StorageFull

__all__ = ["StorageFull", "raising_storage_full", "storage_full"]

_FULL_ERRNOS = frozenset({errno.ENOSPC, getattr(errno, "EDQUOT", errno.ENOSPC)})
_POSTGRES_DISK_FULL = "53100"  # SQLSTATE disk_full
_MAX_CAUSES = 8  # how far along __cause__ / __context__ to look


def storage_full(exc: BaseException) -> StorageFull | None:
    """The `StorageFull` that `exc` (or one of its causes) means, or None when it is not a full
    storage. `exc` itself when it already is one."""
    seen: BaseException | None = exc
    for _ in range(_MAX_CAUSES):
        if seen is None:
            return None
        if isinstance(seen, StorageFull):
            return seen
        detail = _full_detail(seen)
        if detail is not None:
            return StorageFull(f"storage full: {detail}; free disk space and retry")
        seen = seen.__cause__ or seen.__context__
    return None


def _full_detail(exc: BaseException) -> str | None:
    """What the storage said, when `exc` is its "full" condition (no file path)."""
    if isinstance(exc, sqlite3.Error):
        code = getattr(exc, "sqlite_errorcode", None)
        return str(exc) if code is not None and code & 0xFF == sqlite3.SQLITE_FULL else None
    if isinstance(exc, OSError) and exc.errno in _FULL_ERRNOS:
        return exc.strerror or "no space left on device"
    if getattr(exc, "sqlstate", None) == _POSTGRES_DISK_FULL:  # psycopg.errors.DiskFull
        return "PostgreSQL disk_full (SQLSTATE 53100)"  # its message names a server file
    return None


@contextmanager
def raising_storage_full(transaction: AbstractContextManager[Any]) -> Iterator[None]:
    """`transaction` (a store's write), with a full storage raised as `StorageFull` once the
    transaction has rolled back; any other error passes through unchanged."""
    try:
        with transaction:
            yield
    except Exception as exc:
        full = storage_full(exc)
        if full is None or full is exc:
            raise
        raise full from exc
