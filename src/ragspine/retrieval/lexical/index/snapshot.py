"""IndexSnapshot: an immutable BM25 index over segments, with tombstones and live statistics.

Invariants: N, average length and every df are over the *active* positions only (a tombstoned
position still sits in its segment's postings but counts nowhere and is never returned);
`df(t)` = postings of t in all segments − tombstoned documents containing t; a metadata filter
only narrows which positions may be returned, never the statistics. Updates return a new
snapshot (`with_changes`, `compacted`, `with_merged_tail`), so a search never sees a
half-applied change.

`visible()` is the snapshot a caller may see: its RESTRICTED positions count as absent, like
tombstones, before any scoring: never scored, never returned, and N, average length, every df
and the metadata keys are over the rest (the RESTRICTED documents' df is kept apart, per
segment and term), so no score, rank or error text depends on what a RESTRICTED chunk holds.
"""

from __future__ import annotations

import bisect
from collections import Counter
from collections.abc import Mapping, Sequence

import numpy as np

from ragspine.retrieval.model import INDEXED_FIELDS
from ragspine.retrieval.lexical.index.scoring import (
    Allow,
    QueryTerm,
    best_k,
    bm25_idf,
    dense_contributions,
    is_dense,
    length_norms,
    ordered,
    score_all,
    score_at,
    term_arrays,
    tf_bound,
    top_candidates,
    top_exhaustive,
)
from ragspine.retrieval.filters import Filter, Predicate
from ragspine.retrieval.lexical.index.merge import merge_segments
from ragspine.retrieval.lexical.index.predicates import compile_filter, metadata_keys
from ragspine.retrieval.lexical.index.segment import Segment
from ragspine.retrieval.lexical.index.termcache import MISSING, TermCache

_NOTHING = object()
# Below this many positions + query postings a search scans every query term (no pruning).
EXHAUSTIVE_MAX = 200_000
WHERE_MASKS_KEPT = 32  # typed-filter masks cached per snapshot (n_positions bytes each)


class IndexSnapshot:
    """Segments in position order, an active mask (None: all active) and tombstone df.

    >>> from ragspine.retrieval.lexical.index.segment import SegmentBuilder
    >>> b = SegmentBuilder(); b.add([["a", "b"], ["b"]], chunk_ids=["x", "y"])
    >>> snap = IndexSnapshot([b.finish()])
    >>> [(snap.chunk_id(p), round(s, 3)) for p, s in snap.search(["b", "a"], 10, k1=1.5, b=0.75)]
    [('x', 0.761), ('y', 0.214)]
    >>> from ragspine.retrieval.lexical.bm25 import bm25_scores
    >>> [round(s, 3) for s in bm25_scores(["b", "a"], [["a", "b"], ["b"]])]
    [0.761, 0.214]
    """

    def __init__(
        self,
        segments: Sequence[Segment],
        *,
        active: np.ndarray | None = None,
        dead_df: Mapping[str, int] | None = None,
        version: int = -1,
        hidden: np.ndarray | None = None,
    ) -> None:
        self.segments = tuple(segments)
        # hidden: RESTRICTED positions left out of `active` by `visible()` (their df is taken
        # from the segments' RESTRICTED postings); None on a snapshot of everything.
        self.hidden = hidden
        self.version = version
        self._firsts = [s.first for s in self.segments]
        self.lengths = (
            np.concatenate([s.lengths for s in self.segments]).astype(np.int64)
            if self.segments
            else np.zeros(0, dtype=np.int64)
        )
        self.n_positions = len(self.lengths)
        if active is not None and len(active) != self.n_positions:
            raise ValueError("active mask does not cover every position")
        self.active = None if active is None or bool(active.all()) else active
        self.dead_df: dict[str, int] = dict(dead_df or {})
        if self.active is None:
            self.n_active, self.total_length = self.n_positions, int(self.lengths.sum())
        else:
            self.n_active = int(np.count_nonzero(self.active))
            self.total_length = int(self.lengths[self.active].sum())
        self._norms: dict[tuple[float, float], np.ndarray] = {}
        self._caches: dict[tuple[float, float], TermCache] = {}
        self._fields: dict[str, tuple[dict[str, int], np.ndarray]] = {}
        self._predicates: dict[Predicate, np.ndarray] = {}
        self._where_masks: dict[Filter, np.ndarray] = {}  # typed filter → mask over positions
        self._metadata_keys: set[str] | None = None
        self._active_counts: tuple[int, int] | None = None
        self._languages: frozenset[str] | None = None
        self._row_ids: np.ndarray | None = None
        self._visible: IndexSnapshot | None = None
        self._unfiltered: np.ndarray | None = None  # `allowed_positions` without a filter

    # -- statistics -------------------------------------------------------------------------
    @property
    def avgdl(self) -> float:
        return self.total_length / self.n_active if self.n_active else 0.0

    @property
    def n_tombstones(self) -> int:
        return self.n_positions - self.n_active

    def df(self, term: str) -> int:
        """Active documents containing `term`."""
        total = sum(len(p[0]) for p in self._postings(term))
        return total - self.dead_df.get(term, 0) - self._hidden_df(term)

    def _hidden_df(self, term: str) -> int:
        """Active RESTRICTED documents containing `term` that `visible()` left out (0 otherwise)."""
        hidden = self.hidden
        if hidden is None:
            return 0
        return sum(int(np.count_nonzero(hidden[seg.restricted_postings(term)])) for seg in self.segments)

    def visible(self) -> IndexSnapshot:
        """This snapshot without its RESTRICTED positions (see the module docstring); itself
        when no active position is RESTRICTED. Kept per snapshot, so computed once."""
        view = self._visible
        if view is None:
            view = self._visible = self._without_restricted()
        return view

    def _without_restricted(self) -> IndexSnapshot:
        masks = [seg.restricted() for seg in self.segments]
        if self.hidden is not None or all(m is None for m in masks):
            return self
        hidden = np.concatenate(
            [m if m is not None else np.zeros(seg.n_docs, dtype=bool) for m, seg in zip(masks, self.segments, strict=True)]
        )
        if self.active is not None:
            hidden &= self.active
        if not hidden.any():
            return self
        active = ~hidden if self.active is None else self.active & ~hidden
        view = IndexSnapshot(self.segments, active=active, dead_df=self.dead_df, version=self.version, hidden=hidden)
        view._fields, view._predicates, view._row_ids = self._fields, self._predicates, self._row_ids
        return view

    # -- search -----------------------------------------------------------------------------
    def query_terms(self, tokens: Sequence[str], *, k1: float, b: float) -> list[QueryTerm]:
        """The distinct query terms with active documents, in scoring order."""
        if not self.n_active or not self.total_length:
            return []
        cache = self._cache(k1, b)
        terms = []
        distinct = dict.fromkeys(tokens, 1)
        counts = distinct if len(distinct) == len(tokens) else Counter(tokens)  # Counter only for repeats
        for term, count in counts.items():
            prepared = cache.get(term)
            if prepared is MISSING:
                prepared = self._prepare(term, k1, b)
                cache.put(term, prepared)
            if prepared is None:
                continue
            assert isinstance(prepared, QueryTerm)
            if count != 1:
                prepared = self._multiplied(prepared, count, cache, k1, b)
            terms.append(prepared)
        return ordered(terms)

    def _multiplied(self, prepared: QueryTerm, count: int, cache: TermCache, k1: float, b: float) -> QueryTerm:
        """`prepared` (cached at multiplicity 1) at multiplicity `count`, its contributions
        computed (and cached) first: as a dense vector only where the exhaustive scan may use
        it (`top_candidates` reads the arrays)."""
        norms = self.norms(k1, b)
        if is_dense(prepared, self.n_positions) and self.n_positions <= EXHAUSTIVE_MAX:
            if prepared.dense is None:
                cache.remember_dense(prepared, dense_contributions(prepared, norms, self.n_positions))
        elif prepared.arrays is None:
            cache.remember(prepared, term_arrays(prepared, norms))
        arrays, dense = prepared.arrays, prepared.dense
        return QueryTerm(
            prepared.term, prepared.w1, count, prepared.bound * count, prepared.parts, prepared.n_postings,
            None if arrays is None else (arrays[0], arrays[1] * count), prepared.tight * count,
            None if dense is None else dense * count,
        )  # fmt: skip

    def _prepare(self, term: str, k1: float, b: float) -> QueryTerm | None:
        parts = self._postings(term)
        n_postings = sum(len(p[0]) for p in parts)
        df = n_postings - self.dead_df.get(term, 0) - self._hidden_df(term)
        if df <= 0:
            return None
        w1 = bm25_idf(self.n_active, df) * (k1 + 1.0)
        bound = w1 * max(tf_bound(p[2], p[3], k1, b, self.avgdl) for p in parts)
        return QueryTerm(term, w1, 1, bound, tuple((p[0], p[1]) for p in parts), n_postings)

    def search(
        self,
        tokens: Sequence[str],
        k: int,
        *,
        k1: float,
        b: float,
        filters: Mapping[str, str] | None = None,
        where: Filter | None = None,
    ) -> list[tuple[int, float]]:
        """The best `k` (position, score) among allowed positions, by (-score, chunk_id)."""
        allow = self.allow(filters, where)
        terms = self.query_terms(tokens, k1=k1, b=b)
        if allow is _NOTHING or not terms:
            return []
        norms = self.norms(k1, b)
        cache = self._cache(k1, b)
        postings = sum([t.n_postings for t in terms])
        # Small index: scanning everything densely beats pruning's bookkeeping.
        if self.n_positions + postings <= EXHAUSTIVE_MAX:
            # with no filter, what is allowed is the active mask itself
            mask = self.active if not filters and where is None else None
            positions, scores = top_exhaustive(terms, k, norms, allow, self.n_positions, cache, mask)  # type: ignore[arg-type]
        else:
            positions, scores = top_candidates(terms, k, norms, allow, self.n_positions, cache.remember)  # type: ignore[arg-type]
        return best_k(positions, scores, k, self.chunk_id)

    def scores(
        self,
        tokens: Sequence[str],
        *,
        k1: float,
        b: float,
        filters: Mapping[str, str] | None = None,
        where: Filter | None = None,
    ) -> tuple[np.ndarray, np.ndarray]:
        """(positions ascending, scores) of every allowed position sharing a query term."""
        allow = self.allow(filters, where)
        terms = self.query_terms(tokens, k1=k1, b=b)
        if allow is _NOTHING or not terms:
            return np.zeros(0, dtype=np.int64), np.zeros(0)
        return score_all(terms, self.norms(k1, b), allow, self.n_positions)  # type: ignore[arg-type]

    def score_positions(
        self, tokens: Sequence[str], positions: Sequence[int], *, k1: float, b: float
    ) -> dict[int, float]:
        """Exact scores of the given positions (0.0 where no query term occurs)."""
        terms = self.query_terms(tokens, k1=k1, b=b)
        pos = np.unique(np.asarray(positions, dtype=np.intp))
        if not terms or not len(pos):
            return {int(p): 0.0 for p in pos}
        values = score_at(terms, pos, self.norms(k1, b))
        return dict(zip(pos.tolist(), values.tolist(), strict=True))

    def _cache(self, k1: float, b: float) -> TermCache:
        cache = self._caches.get((k1, b))
        if cache is None:
            cache = self._caches[(k1, b)] = TermCache()
        return cache

    def norms(self, k1: float, b: float) -> np.ndarray:
        """Per-position length norms for (k1, b) under this snapshot's average length."""
        key = (k1, b)
        cached = self._norms.get(key)
        if cached is None:
            cached = length_norms(self.lengths, self.avgdl or 1.0, k1, b)
            self._norms[key] = cached
        return cached

    # -- filters ----------------------------------------------------------------------------
    def allow(
        self, filters: Mapping[str, str] | None, where: Filter | None = None
    ) -> Allow | None | object:
        """A function positions → bool mask (active, matching every exact `filters` value and
        the typed `where` filter), None when everything is allowed, or _NOTHING when an exact
        filter value occurs nowhere."""
        conditions = []
        for name, value in (filters or {}).items():
            table, codes = self._field(name)
            code = table.get(value)
            if code is None:
                return _NOTHING
            conditions.append((codes, code))
        typed = None if where is None else self._where_mask(where)
        active = self.active
        if active is None and not conditions and typed is None:
            return None

        def allowed(docs: np.ndarray) -> np.ndarray:
            mask = active[docs] if active is not None else np.ones(len(docs), dtype=bool)
            for codes, code in conditions:
                mask &= codes[docs] == code
            if typed is not None:
                mask &= typed[docs]
            return mask

        return allowed

    def allowed_positions(
        self, filters: Mapping[str, str] | None, where: Filter | None = None
    ) -> np.ndarray:
        """Every allowed position, ascending (the candidate set of a brute-force channel).
        Without a filter: the active positions, one read-only array kept per snapshot (the same
        object every query, so a channel may remember what it worked out from it)."""
        if not filters and where is None:
            everything = self._unfiltered
            if everything is None:
                everything = self.active_positions()
                everything.flags.writeable = False
                self._unfiltered = everything
            return everything
        allow = self.allow(filters, where)
        if allow is _NOTHING:
            return np.zeros(0, dtype=np.int64)
        everything = np.arange(self.n_positions, dtype=np.int64)
        return everything if allow is None else everything[allow(everything)]  # type: ignore[operator]

    def is_unfiltered(self, positions: np.ndarray) -> bool:
        """Whether `positions` is the very array `allowed_positions` returns without a filter
        (identity, not equal contents: that array never changes, so what was worked out from
        it may be kept)."""
        return positions is self._unfiltered

    def active_counts(self) -> tuple[int, int]:
        """(documents, chunks) among the active positions (of `visible()`: those a caller may
        see), from the doc_id codes held for filters; worked out once per snapshot."""
        if self._active_counts is None:
            _, codes = self._field("doc_id")
            positions = self.active_positions()
            self._active_counts = (int(np.unique(codes[positions]).size), int(positions.size))
        return self._active_counts

    def languages(self) -> frozenset[str]:
        """The `language` values of the active positions (of `visible()`: those a caller may
        see; '' for a chunk of unknown language), worked out once per snapshot."""
        if self._languages is None:
            table, codes = self._field("language")
            names = {code: value for value, code in table.items()}
            self._languages = frozenset(names[int(c)] for c in np.unique(codes[self.active_positions()]) if int(c) in names)
        return self._languages

    def metadata_keys(self) -> set[str]:
        """User metadata keys carried by some active chunk (for validating filter fields)."""
        if self._metadata_keys is None:
            self._metadata_keys = metadata_keys(self._field, self.active)
        return self._metadata_keys

    def _where_mask(self, where: Filter) -> np.ndarray:
        """The typed filter judged over every position once per snapshot (a few recent kept)."""
        mask = self._where_masks.get(where)
        if mask is None:
            judge = compile_filter(where, self._field, self._predicates)
            mask = judge(np.arange(self.n_positions, dtype=np.int64))
            if len(self._where_masks) >= WHERE_MASKS_KEPT:
                self._where_masks.pop(next(iter(self._where_masks)))
            self._where_masks[where] = mask
        return mask

    def _field(self, name: str) -> tuple[dict[str, int], np.ndarray]:
        if name not in INDEXED_FIELDS:
            raise ValueError(f"unknown filter field {name!r}; valid: {', '.join(INDEXED_FIELDS)}")
        cached = self._fields.get(name)
        if cached is None:
            j = INDEXED_FIELDS.index(name)
            table: dict[str, int] = {}
            parts = []
            for seg in self.segments:
                lut = np.array(
                    [table.setdefault(v, len(table)) for v in seg.field_values[name]] or [0],
                    dtype=np.int32,
                )
                parts.append(lut[seg.field_codes[j]] if seg.n_docs else seg.field_codes[j])
            codes = np.concatenate(parts) if parts else np.zeros(0, dtype=np.int32)
            cached = self._fields[name] = (table, codes)
        return cached

    # -- positions --------------------------------------------------------------------------
    def segment_of(self, position: int) -> Segment:
        return self.segments[bisect.bisect_right(self._firsts, position) - 1]

    def chunk_id(self, position: int) -> str:
        seg = self.segment_of(position)
        return seg.chunk_ids[position - seg.first]

    def row_ids(self) -> np.ndarray:
        """Store row id of every position."""
        if self._row_ids is None:
            self._row_ids = (
                np.concatenate([s.row_ids for s in self.segments])
                if self.segments
                else np.zeros(0, dtype=np.int64)
            )
        return self._row_ids

    def active_positions(self) -> np.ndarray:
        everything = np.arange(self.n_positions, dtype=np.int64)
        return everything if self.active is None else everything[self.active]

    def active_positions_of_docs(self, doc_ids: Sequence[str]) -> np.ndarray:
        """Active positions of these documents (cost: the segments' sizes, not the history)."""
        found = [seg.positions_of_docs(doc_ids) for seg in self.segments]
        positions = np.concatenate(found) if found else np.zeros(0, dtype=np.int64)
        return positions if self.active is None else positions[self.active[positions]]

    # -- updates ----------------------------------------------------------------------------
    def with_changes(
        self,
        added: Segment | None,
        removed: np.ndarray,
        removed_terms: Mapping[str, int],
        *,
        version: int,
    ) -> IndexSnapshot:
        """A new snapshot: `added` appended (first = n_positions), `removed` tombstoned, whose
        distinct terms (counted once per removed document) are `removed_terms`."""
        segments = self.segments
        active = self.active
        if added is not None:
            if added.first != self.n_positions:
                raise ValueError("an added segment must start at the next free position")
            segments = segments + (added,)
        if len(removed):
            if active is None:
                active = np.ones(self.n_positions, dtype=bool)
            if not active[removed].all():
                raise ValueError("a removed position was not active")
            active = active.copy()
            active[removed] = False
        if active is not None and added is not None:
            active = np.concatenate([active, np.ones(added.n_docs, dtype=bool)])
        dead = Counter(self.dead_df)
        dead.update(removed_terms)
        return IndexSnapshot(segments, active=active, dead_df=dead, version=version)

    def compacted(self) -> IndexSnapshot:
        """One segment with only the active positions (renumbered in order), no tombstones."""
        if not self.segments:
            return self
        keep = self.active if self.active is not None else None
        merged = merge_segments(self.segments, keep, first=0)
        return IndexSnapshot([merged], version=self.version)

    def with_merged_tail(self) -> IndexSnapshot:
        """The segments after the first merged into one (positions and tombstones unchanged)."""
        if len(self.segments) <= 2:
            return self
        tail = merge_segments(self.segments[1:])
        return IndexSnapshot(
            [self.segments[0], tail], active=self.active, dead_df=self.dead_df, version=self.version
        )

    def rename_segments(self, named: Sequence[Segment]) -> None:
        """Swap in the same segments carrying their storage names (nothing else may differ)."""
        if [s.n_docs for s in named] != [s.n_docs for s in self.segments]:
            raise ValueError("rename_segments must keep the segments")
        self.segments = tuple(named)

    def changed_files(self) -> list[str]:
        """Names of the memory-mapped files under this snapshot that changed since mapped."""
        return [name for seg in self.segments for name in seg.changed_files()]

    def _postings(self, term: str) -> list[tuple[np.ndarray, np.ndarray, int, float]]:
        out = []
        for seg in self.segments:
            hit = seg.postings(term)
            if hit is not None:
                out.append(hit)
        return out
