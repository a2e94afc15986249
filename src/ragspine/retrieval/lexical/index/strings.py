"""Compact string columns and term vocabularies for the lexical index.

Invariants: a `StringColumn` returns exactly the strings it was built from, in order, whether
it lives in a Python list or in a UTF-8 blob with byte offsets (which can be memory-mapped);
a vocabulary maps a term to its id in the column, or to -1 for an unknown term, and never maps
a term to another term's id (hash lookups are verified against the stored string).
"""

from __future__ import annotations

import hashlib
from collections.abc import Sequence

import numpy as np

# Vocabularies up to this size are loaded into a dict (fastest lookups); larger ones are
# searched through their sorted 64-bit hashes, memory-mapped, without loading every term.
DICT_VOCAB_MAX = 250_000
_LOOKUP_CACHE_MAX = 100_000


class StringColumn:
    """An immutable sequence of strings: a list, or a UTF-8 blob plus int64 byte offsets."""

    def __init__(
        self,
        items: Sequence[str] | None = None,
        *,
        blob: np.ndarray | None = None,
        offsets: np.ndarray | None = None,
    ) -> None:
        if items is None and (blob is None or offsets is None):
            raise ValueError("StringColumn needs items, or blob and offsets")
        self._items = list(items) if items is not None else None
        self._blob = blob
        self._offsets = offsets

    def __len__(self) -> int:
        if self._items is not None:
            return len(self._items)
        assert self._offsets is not None
        return len(self._offsets) - 1

    def __getitem__(self, i: int) -> str:
        if self._items is not None:
            return self._items[i]
        assert self._blob is not None and self._offsets is not None
        start, end = self._offsets[i], self._offsets[i + 1]
        return self._blob[start:end].tobytes().decode("utf-8")

    def to_list(self) -> list[str]:
        """Every string, in order (decodes the whole blob when there is one)."""
        if self._items is not None:
            return list(self._items)
        return [self[i] for i in range(len(self))]

    def encoded(self) -> tuple[np.ndarray, np.ndarray]:
        """(blob uint8, offsets int64) for storage."""
        if self._blob is not None and self._offsets is not None:
            return np.asarray(self._blob), np.asarray(self._offsets)
        return encode_strings(self._items or [])


def encode_strings(items: Sequence[str]) -> tuple[np.ndarray, np.ndarray]:
    """UTF-8 blob and byte offsets (len(items) + 1 of them) of `items`.

    >>> blob, off = encode_strings(["ab", "营"])
    >>> off.tolist(), StringColumn(blob=blob, offsets=off)[1]
    ([0, 2, 5], '营')
    """
    encoded = [s.encode("utf-8") for s in items]
    offsets = np.zeros(len(encoded) + 1, dtype=np.int64)
    if encoded:
        np.cumsum(np.fromiter(map(len, encoded), dtype=np.int64, count=len(encoded)), out=offsets[1:])
    blob = np.frombuffer(b"".join(encoded), dtype=np.uint8)
    return blob, offsets


def term_hash(term: str) -> int:
    """A 64-bit hash of `term` that is stable across processes and platforms."""
    return int.from_bytes(hashlib.blake2b(term.encode("utf-8"), digest_size=8).digest(), "little")


def hash_table(terms: StringColumn) -> tuple[np.ndarray, np.ndarray]:
    """(sorted uint64 hashes, the term id of each) for `HashedVocab`."""
    hashes = np.fromiter((term_hash(t) for t in terms.to_list()), dtype=np.uint64, count=len(terms))
    order = np.argsort(hashes, kind="stable")
    return hashes[order], order.astype(np.int64)


class DictVocab:
    """term → id through a dict built from the terms."""

    def __init__(self, terms: StringColumn) -> None:
        self.terms = terms
        self._ids = {term: i for i, term in enumerate(terms.to_list())}

    def __len__(self) -> int:
        return len(self.terms)

    def get(self, term: str) -> int:
        return self._ids.get(term, -1)


class HashedVocab:
    """term → id by binary search over sorted 64-bit hashes; every hit is checked against the
    stored term, and equal hashes (collisions) are scanned, so lookups are exact."""

    def __init__(self, terms: StringColumn, hashes: np.ndarray, ids: np.ndarray) -> None:
        if len(hashes) != len(terms) or len(ids) != len(terms):
            raise ValueError("hash table and terms differ in length")
        self.terms = terms
        self._hashes = hashes
        self._ids = ids
        self._cache: dict[str, int] = {}

    def __len__(self) -> int:
        return len(self.terms)

    def get(self, term: str) -> int:
        cached = self._cache.get(term)
        if cached is not None:
            return cached
        found = self._search(term)
        if len(self._cache) >= _LOOKUP_CACHE_MAX:
            self._cache.clear()
        self._cache[term] = found
        return found

    def _search(self, term: str) -> int:
        h = np.uint64(term_hash(term))
        i = int(np.searchsorted(self._hashes, h, side="left"))
        while i < len(self._hashes) and self._hashes[i] == h:
            candidate = int(self._ids[i])
            if self.terms[candidate] == term:
                return candidate
            i += 1
        return -1


def make_vocab(
    terms: StringColumn, hashes: np.ndarray | None = None, ids: np.ndarray | None = None
) -> DictVocab | HashedVocab:
    """A dict vocabulary for small term sets or when no hash table is given, else a hashed one."""
    if hashes is None or ids is None or len(terms) <= DICT_VOCAB_MAX:
        return DictVocab(terms)
    return HashedVocab(terms, hashes, ids)
