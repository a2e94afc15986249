"""The package's error hierarchy: one base error, one "built with another model" condition,
one "damaged file" condition, one "storage is full" condition, one "doc_id taken" condition.

Invariants: every error class RAGSpine defines derives from `RagspineError` (tests/test_errors.py
walks the package), so `except RagspineError` catches whatever the library raises on purpose and
nothing else; each also keeps the built-in base it always had (`ValueError`, `RuntimeError`,
`ImportError`...), so existing `except` clauses keep working. A store, index or vector file made
with another model or other settings than the ones asked for is a `ModelMismatch`, whichever
part found it; a file that is missing, truncated or fails its checks is a `DamagedFile`; a write refused
because the disk (or the database's space) is full is a `StorageFull`. This
module imports nothing from ragspine (the lowest import layer).

>>> try:
...     raise ModelMismatch("the vectors were made by model 'a'; this index asks for 'b'")
... except RagspineError as exc:
...     print(type(exc).__name__, isinstance(exc, ValueError))
ModelMismatch True
"""

from __future__ import annotations

__all__ = ["DamagedFile", "DocumentExists", "ModelMismatch", "RagspineError", "StorageFull"]


class RagspineError(Exception):
    """The base of every error RAGSpine raises on purpose."""


class ModelMismatch(RagspineError, ValueError):
    """Stored data was built with another model or other settings (embedding model, dimension,
    analyzer, chunker...) than the ones asked for; the message names both and how to rebuild.
    Vectors, page vectors and lexical indexes of different builds are never mixed."""


class DamagedFile(RagspineError):
    """A file RAGSpine wrote is missing, truncated, or fails its checks (size, CRC, format);
    the message names the file and how to rebuild it."""


class StorageFull(RagspineError, OSError):
    """A write was refused because the storage is full: the disk (ENOSPC, a quota), SQLite's
    "database or disk is full", PostgreSQL's `disk_full` (SQLSTATE 53100). The message is one
    line; `ragspine.retrieval.store.full.storage_full` is the one place that recognises it."""


class DocumentExists(RagspineError, ValueError):
    """A write that may only create (an HTTP POST without `replace`, or a replace of a document
    the caller may not replace) named a doc_id that already has an active version. The message is
    the same whatever that version's label, so it tells nothing of it (docs/security.md)."""
