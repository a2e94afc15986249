"""TermCache: per snapshot and (k1, b), prepared query terms and their contributions.

Invariant: a cached term is exactly what `IndexSnapshot` would prepare again (weights and
contributions depend only on the snapshot's N, df, avgdl and on k1, b), so a cache belongs to
one snapshot; contributions are kept at multiplicity 1, for a bounded number of postings (a
dense vector of n positions counts as n / 2: 8 bytes each against 16 per posting). Searches
on one snapshot may run in several threads: every change to the cache's dicts (and the
eviction that walks them) holds the cache's lock; `get` reads without it.
"""

from __future__ import annotations

import threading

import numpy as np

from ragspine.retrieval.lexical.index.scoring import QueryTerm

MISSING = object()

# Per snapshot and (k1, b): prepared terms, and their contributions for at most this many
# postings in all (16 bytes each).
CACHE_MAX_POSTINGS = 4_000_000
_CACHE_MAX_TERMS = 200_000


class TermCache:
    """term → its prepared QueryTerm (multiplicity 1), with positions and contributions once a
    search scanned them (bounded; oldest first out). Weights and contributions depend on N, df
    and avgdl, so a cache belongs to one snapshot and one (k1, b)."""

    def __init__(self, max_postings: int = CACHE_MAX_POSTINGS) -> None:
        self.max_postings = max_postings
        self._terms: dict[str, QueryTerm | None] = {}
        self._with_arrays: dict[str, int] = {}
        self._size = 0
        self._lock = threading.Lock()

    def get(self, term: str) -> QueryTerm | None | object:
        return self._terms.get(term, MISSING)

    def put(self, term: str, prepared: QueryTerm | None) -> None:
        with self._lock:
            if len(self._terms) >= _CACHE_MAX_TERMS:
                self._terms.clear()
                self._with_arrays.clear()
                self._size = 0
            self._terms[term] = prepared

    def remember(self, term: QueryTerm, arrays: tuple[np.ndarray, np.ndarray]) -> None:
        pos, contrib = arrays
        with self._lock:
            template = self._terms.get(term.term)
            if template is None or term.count != 1 or template.arrays is not None:
                return
            if not self._room(term.term, len(pos)):
                return
            template.tight = float(contrib.max()) if len(contrib) else template.bound
            template.arrays = arrays

    def remember_dense(self, term: QueryTerm, dense: np.ndarray) -> None:
        """Keep `term`'s contribution at every position (`scoring.dense_contributions`)."""
        with self._lock:
            template = self._terms.get(term.term)
            if template is None or term.count != 1 or template.dense is not None:
                return
            if not self._room(term.term, max(1, len(dense) // 2)):
                return
            template.tight = float(dense.max()) if len(dense) else template.bound
            template.dense = dense

    def _room(self, term: str, size: int) -> bool:
        """Make room for `size` more postings of `term` (oldest terms out first); False when
        it is too large to keep. The caller holds the lock."""
        if size * 4 > self.max_postings:
            return False
        while self._with_arrays and self._size + size > self.max_postings:
            old = next(iter(self._with_arrays))
            self._size -= self._with_arrays.pop(old)
            evicted = self._terms.get(old)
            if evicted is not None:
                evicted.arrays, evicted.dense, evicted.tight = None, None, evicted.bound
        self._with_arrays[term] = self._with_arrays.get(term, 0) + size
        self._size += size
        return True
