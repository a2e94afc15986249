"""`VectorMatrix`: the local dense channel's vectors in memory, one row per chunk id.

Invariants:
- Rows [0, count) are in use; a chunk id has one row for the life of the matrix (a rewritten
  vector replaces its row in place, new ids are appended), so row numbers never shift and an
  alignment made for the matrix stays valid once the positions of added ids are looked up again.
- `languages[row]` is the language code stored with the vector (`languages.LANGUAGES`), -1 when
  unknown.
- A matrix mapped from a cache file (`adopt`, read-only) is copied once, with room to grow, by
  the first write; `read_rows` reads chosen rows of that file while it is in use.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

import numpy as np

from ragspine.retrieval.vector.dense.languages import language_codes


class VectorMatrix:
    """Float32 rows keyed by chunk id, with a language code per row (see the module)."""

    def __init__(self) -> None:
        self.matrix = np.zeros((0, 0), dtype=np.float32)
        self.languages = np.zeros(0, dtype=np.int8)  # language code per row; -1 unknown
        self.ids: list[str] = []  # chunk id of each row
        self.count = 0
        # reads chosen rows while the matrix is a cache file's mmap (None: index `matrix`)
        self.read_rows: Callable[[np.ndarray], np.ndarray] | None = None
        self._row_of_map: dict[str, int] | None = {}  # chunk id → row; None: build from `ids`

    @property
    def row_of(self) -> dict[str, int]:
        """Chunk id → row (built from `ids` when first asked after `adopt`)."""
        if self._row_of_map is None:
            self._row_of_map = dict(zip(self.ids, range(len(self.ids)), strict=True))
        return self._row_of_map

    def ids_of(self, rows: np.ndarray) -> list[str]:
        """The chunk id of each row."""
        return [self.ids[r] for r in rows.tolist()]

    def adopt(
        self, matrix: np.ndarray, ids: list[str], languages: Any, read_rows: Callable[[np.ndarray], np.ndarray]
    ) -> None:
        """Take a cache file's (memory-mapped) matrix as the whole state."""
        self.matrix, self.ids, self.count = matrix, ids, len(ids)
        self._row_of_map = None  # 100k ids: built on first need (a fresh alignment needs none)
        self.languages = np.array(languages)
        self.read_rows = read_rows

    def add(self, ids: Sequence[str], matrix: np.ndarray, languages: Sequence[Any] | None = None) -> list[int]:
        """Store each id's vector (and its stored language, when known); returns the rows written
        one by one into an existing matrix (an index over older rows may hold stale vectors there)."""
        if not self.matrix.flags.writeable:  # memory-mapped from the cache: copied once, with room to grow
            self._grow(max(2 * self.count, self.count + len(ids)))
        matrix = np.asarray(matrix, dtype=np.float32)
        codes = language_codes(languages) if languages is not None else np.full(len(ids), -1, dtype=np.int8)
        row_of = self.row_of
        if self.matrix.shape[1] == 0:
            if len(ids) >= 1024 and matrix.flags.c_contiguous and matrix.flags.writeable:
                # first load of a large file: keep the loaded matrix (its rows are ids' order)
                # instead of copying it into a new one of the same size
                self.matrix, self.languages = matrix, codes.copy()
                row_of.update(zip(ids, range(len(ids)), strict=True))
                self.ids, self.count = list(ids), len(ids)
                return []
            self.matrix = np.zeros((max(1024, len(ids)), matrix.shape[1]), dtype=np.float32)
            self.languages = np.full(len(self.matrix), -1, dtype=np.int8)
        if not row_of and len(ids) <= len(self.matrix):  # first load: every id is new, set in bulk
            self.matrix[: len(ids)] = matrix
            self.languages[: len(ids)] = codes
            row_of.update(zip(ids, range(len(ids)), strict=True))
            self.ids = list(ids)
            self.count = len(ids)
            return []
        written: list[int] = []
        for chunk_id, vector, code in zip(ids, matrix, codes.tolist(), strict=True):
            row = row_of.get(chunk_id)
            if row is None:
                if self.count == len(self.matrix):
                    self._grow(2 * len(self.matrix))
                row = row_of[chunk_id] = self.count
                self.ids.append(chunk_id)
                self.count += 1
            self.matrix[row] = vector
            written.append(row)
            if code >= 0:
                self.languages[row] = code
        return written

    def _grow(self, capacity: int) -> None:
        """A new writable matrix (and language codes) of `capacity` rows holding the current ones."""
        grown = np.zeros((capacity, self.matrix.shape[1]), dtype=np.float32)
        grown[: self.count] = self.matrix[: self.count]
        grown_codes = np.full(capacity, -1, dtype=np.int8)
        grown_codes[: self.count] = self.languages[: self.count]
        self.matrix, self.languages, self.read_rows = grown, grown_codes, None
