"""`DenseView`: one snapshot's positions ranked from a local vector matrix (exact cosine, or
HNSW candidates re-scored exactly).

Invariants:
- `rank` returns positions by (-cosine rounded to SCORE_DECIMALS, chunk_id): exact cosine over
  every allowed position that has a vector. With an ANN index (`AnnCandidates`), the index
  proposes candidates that are re-scored exactly and ranked the same way, so scores are exact and
  only recall can differ; a selective filter, a depth near the allowed count, or too few allowed
  candidates fall back to the exact scan.
- With language centres (`languages.language_centring`), every vector and the query are compared
  after subtracting their language's mean and re-normalising; without, plain cosine.
- No score outside [-COSINE_BOUND, COSINE_BOUND] (scaled by the query's norm) is ever returned:
  the rows are unit vectors, so such a score means damaged rows; they are left out, logged
  (WARNING) and reported to the owner (`on_damage`), which reads the vectors file again.
- A view never changes once made: later attaches make new views.
"""

from __future__ import annotations

import logging
import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field

import numpy as np

from ragspine.retrieval.lexical.index.snapshot import IndexSnapshot
from ragspine.retrieval.types import EmbeddingBackend
from ragspine.retrieval.vector.dense.ann import AnnConfig, AnnIndex
from ragspine.retrieval.vector.dense.languages import crossed, language_code
from ragspine.retrieval.vector.dense.ranking import ChunkIds, unit_query_vectors
from ragspine.retrieval.vector.stores.inprocess import SCORE_DECIMALS, top_k_rows

log = logging.getLogger(__name__)

COSINE_BOUND = 1.0001  # the largest |cosine| a unit row and a unit query can give, with rounding slack


@dataclass(frozen=True)
class AnnCandidates:
    """What a `DenseView` asks for ANN candidates: the index and the matrix row of each of its
    labels as they were when the view was made (later labels are ignored)."""

    index: AnnIndex
    label_rows: np.ndarray
    config: AnnConfig

@dataclass(frozen=True)
class DenseView:
    """One snapshot's positions mapped to rows of the vector matrix (rows < 0: no vector)."""

    backend: EmbeddingBackend
    snapshot: IndexSnapshot
    rows: np.ndarray
    matrix: np.ndarray
    count: int
    groups: np.ndarray  # language code per position
    centres: np.ndarray | None = None  # per-language mean vectors; None: plain cosine
    inverse_norms: np.ndarray | None = None  # 1 / |v - centre| per position
    ann: AnnCandidates | None = None  # the HNSW index at and above the size threshold
    # reads chosen rows of `matrix` when it is a memory-mapped cache file (`matrix_cache`):
    # scoring a few candidates then maps none of the file's pages; None: index `matrix`
    read_rows: Callable[[np.ndarray], np.ndarray] | None = None
    # told each time a score falls outside what a cosine can be: damaged rows
    on_damage: Callable[[str], None] | None = None
    _position_of_row: list[np.ndarray] = field(default_factory=list, compare=False, repr=False)
    _has_vector: list[np.ndarray] = field(default_factory=list, compare=False, repr=False)
    _counted: list[tuple[np.ndarray, int]] = field(default_factory=list, compare=False, repr=False)

    def embed_query(self, text: str) -> np.ndarray:
        """The unit query vector (the backend's query side when it has one), centred on its
        language's mean when the view centres."""
        return self.embed_queries([text])[0]

    def embed_queries(self, texts: Sequence[str]) -> list[np.ndarray]:
        """`embed_query` of each text, from one backend call (one forward pass for a local
        model); a text given twice is embedded once."""
        return unit_query_vectors(self.backend, texts, self.centre_query)

    def centre_query(self, vector: np.ndarray, text: str) -> np.ndarray:
        """`vector` (unit) minus the mean of `text`'s language, re-normalised; unchanged when
        the view does not centre."""
        if self.centres is None:
            return vector
        centred = vector - self.centres[language_code(text)]
        norm = float(np.linalg.norm(centred))
        return centred / norm if norm > 0 else vector

    def languages_crossed(self, text: str, positions: Sequence[int]) -> list[bool]:
        """Per position: whether `text` and that chunk are in different languages (both known);
        `text`'s language is detected once."""
        return crossed(language_code(text), [int(self.groups[p]) for p in positions])

    def _scores(self, query: np.ndarray, positions: np.ndarray, rows: np.ndarray) -> np.ndarray:
        """Cosines (centred or plain) of positions whose matrix rows are `rows`."""
        if len(rows) * 2 >= self.count:
            raw = (self.matrix[: self.count] @ query)[rows]
        else:
            raw = (self.matrix[rows] if self.read_rows is None else self.read_rows(rows)) @ query
        if self.centres is not None and self.inverse_norms is not None:
            offsets = self.centres @ query
            raw = (raw - offsets[self.groups[positions]]) * self.inverse_norms[positions]
        return np.round(raw.astype(np.float64), SCORE_DECIMALS)

    def _in_range(self, query: np.ndarray, positions: np.ndarray, scores: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """`positions` and `scores` without any score a cosine cannot be (|score| above
        `COSINE_BOUND` × |query|: the rows are unit): such rows are damaged, never returned; the
        owner is told (WARNING, it re-reads the vectors file)."""
        bound = COSINE_BOUND * max(float(np.linalg.norm(query)), 1.0)
        ok = np.abs(scores) <= bound
        if ok.all():
            return positions, scores
        reason = f"{int(np.count_nonzero(~ok))} vector rows score outside [-{bound:g}, {bound:g}]: damaged"
        log.warning("dense search: %s; they are left out and the vectors are read again", reason)
        if self.on_damage is not None:
            self.on_damage(reason)
        return positions[ok], scores[ok]

    def rank(self, query: np.ndarray, allowed: np.ndarray, depth: int) -> tuple[list[int], dict[int, float]]:
        """The best `depth` allowed positions with a vector, and their cosines."""
        found = None
        if self.ann is not None:  # the allowed positions with a vector are only counted here
            with_vector = self._with_vector(allowed)
            if not with_vector or depth <= 0:
                return [], {}
            self._check_dimension(query)
            found = self._ann_candidates(query, allowed, with_vector, depth)
        if found is not None:
            positions, rows = found
        else:
            rows = self.rows[allowed]
            has = rows >= 0
            positions, rows = allowed[has], rows[has]
            if not len(rows) or depth <= 0:
                return [], {}
            self._check_dimension(query)
        positions, scores = self._in_range(query, positions, self._scores(query, positions, rows))
        best = top_k_rows(positions, scores, depth, ChunkIds(self.snapshot))
        return [p for p, _ in best], dict(best)

    def _with_vector(self, allowed: np.ndarray) -> int:
        """How many `allowed` positions have a vector. Remembered only when `allowed` is the
        snapshot's unfiltered candidate set (`IndexSnapshot.is_unfiltered`: the very array
        `allowed_positions` returns without a filter, the same every query): at a million
        positions counting them again costs ~1.5 ms a query. Any other array is counted."""
        counted = next(iter(self._counted), None)  # the slot read once
        if counted is not None and counted[0] is allowed:
            return counted[1]
        if not self._has_vector:
            self._has_vector.append(self.rows >= 0)
        count = int(np.count_nonzero(self._has_vector[0][allowed]))
        if self.snapshot.is_unfiltered(allowed):
            self._counted[:] = [(allowed, count)]
        return count

    def _check_dimension(self, query: np.ndarray) -> None:
        if self.matrix.shape[1] != len(query):
            raise ValueError(f"query vector has dimension {len(query)}, stored vectors {self.matrix.shape[1]}")

    def _ann_candidates(
        self, query: np.ndarray, allowed: np.ndarray, with_vector: int, depth: int
    ) -> tuple[np.ndarray, np.ndarray] | None:
        """(positions, rows) of the ANN candidates among the `allowed` positions (sorted
        ascending, as every mask gives them; `with_vector` of them have a vector), or None when
        the exact scan should answer: a selective filter, a depth near the allowed count, or
        fewer than `depth` candidates left after dropping the ones not allowed. Every candidate
        has a vector (it comes from a matrix row), so the allowed positions are never gathered
        whole: at a million positions that gather cost more than the graph search."""
        ann = self.ann
        assert ann is not None
        labelled = len(ann.label_rows)
        config = ann.config
        if not labelled or with_vector < config.min_fraction * labelled:
            return None
        # the search beam finds ef_search candidates whatever k is: ask for all of them
        want = max(depth * config.oversample, config.ef_search) * (2 if self.centres is not None else 1)
        if want * 2 >= with_vector:
            return None
        k = min(labelled, math.ceil(want * labelled / with_vector))
        labels = ann.index.search(query, k)
        rows = np.unique(ann.label_rows[labels[labels < labelled]])
        rows = rows[rows >= 0]
        candidates = self._positions_of(rows)
        at = np.minimum(np.searchsorted(allowed, candidates), len(allowed) - 1)
        keep = (candidates >= 0) & (allowed[at] == candidates)
        if np.count_nonzero(keep) < depth:
            return None
        return candidates[keep], rows[keep]

    def _positions_of(self, rows: np.ndarray) -> np.ndarray:
        """The snapshot position of each matrix row (-1: none); an active position wins over an
        inactive one holding the same chunk."""
        if not self._position_of_row:
            table = np.full(self.count, -1, dtype=np.int64)
            has = np.flatnonzero(self.rows >= 0)
            table[self.rows[has]] = has
            active = self.snapshot.active_positions()
            active = active[self.rows[active] >= 0]
            table[self.rows[active]] = active
            self._position_of_row.append(table)
        found: np.ndarray = self._position_of_row[0][rows]
        return found

    def vectors_at(self, positions: Sequence[int]) -> np.ndarray:
        """The stored unit vectors of the given positions that have one, in order (feedback)."""
        pos = np.asarray(positions, dtype=np.int64)
        rows = self.rows[pos] if len(pos) else pos
        rows = rows[rows >= 0]
        if not len(rows):
            return np.zeros((0, self.matrix.shape[1]))
        return np.asarray(self.matrix[rows] if self.read_rows is None else self.read_rows(rows), dtype=np.float64)

    def scores_at(self, query: np.ndarray, positions: Sequence[int]) -> dict[int, float]:
        """Cosine of each given position that has a vector (rounded like `rank`)."""
        pos = np.asarray(positions, dtype=np.int64)
        rows = self.rows[pos] if len(pos) else pos
        has = rows >= 0
        if not has.any():
            return {}
        kept, scores = self._in_range(query, pos[has], self._scores(query, pos[has], rows[has]))
        return dict(zip(kept.tolist(), scores.tolist(), strict=True))

