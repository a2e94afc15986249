"""The errors every vector store and the dense channel share.

Invariant: vectors of another model or dimension are refused with one exception type,
`VectorModelMismatch`, whose message says what was found, what was asked for and how to re-embed.
"""

from __future__ import annotations


class VectorStoreError(ValueError):
    """Stored vectors that cannot be used as they are (unreadable, damaged or mismatched)."""


class VectorModelMismatch(VectorStoreError):
    """The stored vectors were made by another model or have another dimension."""


class VectorFilesDamaged(VectorStoreError):
    """Stored vectors cannot be read (a damaged file); the message says how to rebuild them."""
