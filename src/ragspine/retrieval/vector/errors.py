"""The errors every vector store and the dense channel share.

Invariant: vectors of another model or dimension are refused with one exception type,
`VectorModelMismatch` (a `ragspine.errors.ModelMismatch`), whose message says what was found,
what was asked for and how to re-embed; a vector file or folder that cannot be read is a
`VectorFilesDamaged` (a `ragspine.errors.DamagedFile`). Both are `VectorStoreError`s, so code
that falls back to BM25 on unusable vectors catches the one type.
"""

from __future__ import annotations

from ragspine.errors import DamagedFile, ModelMismatch, RagspineError


class VectorStoreError(RagspineError, ValueError):
    """Stored vectors that cannot be used as they are (unreadable, damaged or mismatched)."""


class VectorModelMismatch(ModelMismatch, VectorStoreError):
    """The stored vectors were made by another model or have another dimension."""


class VectorFilesDamaged(DamagedFile, VectorStoreError):
    """Stored vectors cannot be read (a damaged, missing or unknown file); the message says how
    to rebuild them."""
