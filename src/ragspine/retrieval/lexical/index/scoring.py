"""BM25 over postings arrays: small pure numpy functions, exact top-k with MaxScore pruning.

Invariants: a contribution is float64 `w1 × tf / (tf + norm)` (times the query multiplicity
when above 1) with w1 = idf × (k1 + 1) and norm = k1 × (1 - b + b × length / avgdl), i.e.
exactly the terms `bm25_scores` adds; every document's score is summed in one term order
(`ordered`: descending weight w1 × multiplicity, then the term), on every path and whatever is
cached, so results are bit-for-bit reproducible. The order depends only on N and df, never on
how postings are split into segments or on postings a snapshot hides (RESTRICTED documents), so
the same visible corpus gives the same scores to the last bit. A term in at least 1/DENSE_SHARE
of the positions may be added as a dense vector of its contributions (0.0 where it is absent):
adding 0.0 changes no sum, so the order and the bits are the same. `top_candidates` returns every
document that can be among the best k, with its full score: a term is skipped for a document
only when the skipped terms' upper bounds cannot lift it to a proven lower bound of the k-th
best score (MaxScore), with a safety margin far above float rounding.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from operator import attrgetter, itemgetter
from typing import Protocol

import numpy as np

# Prune only when bounds fall short of the threshold by more than this relative margin.
_SAFETY = 1.0 - 1e-9
# Essential terms are first taken while their postings stay within this share of the query's.
_ESSENTIAL_SHARE = 1 / 16
_ESSENTIAL_MIN = 2048
# The probe completes this many times k of the best partial scores.
_PROBE = 4
# A remaining term's contributions are computed whole (and cached) when its postings are at
# most this many times the surviving candidates.
_FILL = 16
# A term whose postings cover at least 1/DENSE_SHARE of the positions is summed by
# `top_exhaustive` as one dense vector (a streaming add beats a scatter over that many postings).
DENSE_SHARE = 8

_ORDER = attrgetter("order")
Part = tuple[np.ndarray, np.ndarray]  # (positions ascending, tfs) of one term in one segment
Allow = Callable[[np.ndarray], np.ndarray]  # positions → bool mask of those that may be scored
Arrays = tuple[np.ndarray, np.ndarray]  # (positions ascending as intp, contributions)


class QueryTerm:
    """One distinct query term.

    `w1` = idf × (k1 + 1); `count` its multiplicity in the query; `bound` ≥ every contribution;
    `tight` ≥ every contribution too, possibly smaller (used for
    pruning only); `arrays` its positions and contributions when already computed; `dense` its
    contribution at every position (0.0 where absent) when already computed.
    """

    __slots__ = ("term", "w1", "count", "bound", "parts", "n_postings", "arrays", "tight", "dense", "order")

    def __init__(
        self,
        term: str,
        w1: float,
        count: int,
        bound: float,
        parts: tuple[Part, ...],
        n_postings: int,
        arrays: Arrays | None = None,
        tight: float | None = None,
        dense: np.ndarray | None = None,
    ) -> None:
        self.term, self.w1, self.count, self.bound = term, w1, count, bound
        self.parts, self.n_postings, self.arrays = parts, n_postings, arrays
        self.tight = bound if tight is None else tight
        self.dense = dense
        self.order = (-w1 * count, term)  # `ordered`'s key


class TermMemory(Protocol):
    """Where a search leaves the contributions it computed, for later searches (`TermCache`)."""

    def remember(self, term: QueryTerm, arrays: Arrays) -> None: ...

    def remember_dense(self, term: QueryTerm, dense: np.ndarray) -> None: ...


def bm25_idf(n_docs: int, df: int) -> float:
    """idf = ln(1 + (N - df + 0.5) / (df + 0.5)); always positive."""
    return math.log(1.0 + (n_docs - df + 0.5) / (df + 0.5))


def length_norms(lengths: np.ndarray, avgdl: float, k1: float, b: float) -> np.ndarray:
    """k1 × (1 - b + b × length / avgdl) for every position (float64)."""
    return k1 * (1.0 - b + b * (lengths.astype(np.float64) / avgdl))


def tf_bound(max_tf: int, min_ratio: float, k1: float, b: float, avgdl: float) -> float:
    """An upper bound of tf / (tf + norm) over postings whose tf ≤ max_tf and length/tf ≥
    min_ratio: tf / (tf + norm) = 1 / (1 + k1(1-b)/tf + (k1 b / avgdl) × length/tf)."""
    return 1.0 / (1.0 + k1 * (1.0 - b) / max_tf + (k1 * b / avgdl) * min_ratio)


def contributions(tfs: np.ndarray, norms: np.ndarray, w1: float, count: int = 1) -> np.ndarray:
    """w1 × tf / (tf + norm) (× count when count > 1), elementwise, float64."""
    tf = tfs.astype(np.float64)
    out = w1 * tf / (tf + norms)
    if count != 1:
        out *= count
    return out


def term_arrays(term: QueryTerm, norms: np.ndarray) -> Arrays:
    """(positions as intp, contributions) of every posting of `term`, in position order."""
    arrays = term.arrays  # read once: a cache may drop it meanwhile
    if arrays is not None:
        return arrays
    if len(term.parts) == 1:
        docs, tfs = term.parts[0]
        pos = docs.astype(np.intp)
        return pos, contributions(tfs, norms[pos], term.w1, term.count)
    pos = np.concatenate([p[0] for p in term.parts]).astype(np.intp)
    tfs = np.concatenate([p[1] for p in term.parts])
    return pos, contributions(tfs, norms[pos], term.w1, term.count)


def is_dense(term: QueryTerm, n_positions: int) -> bool:
    """Whether `top_exhaustive` adds `term` as a dense vector (see DENSE_SHARE)."""
    return term.n_postings * DENSE_SHARE >= n_positions


def dense_contributions(term: QueryTerm, norms: np.ndarray, n_positions: int) -> np.ndarray:
    """The contribution of `term` at every position, 0.0 where it is absent (float64)."""
    dense, arrays = term.dense, term.arrays  # read once: a cache may drop them meanwhile
    if dense is not None:
        return dense
    out = np.zeros(n_positions)
    if arrays is not None:
        out[arrays[0]] = arrays[1]
        return out
    for docs, tfs in term.parts:
        out[docs] = contributions(tfs, norms[docs], term.w1, term.count)
    return out


def ordered(terms: Sequence[QueryTerm]) -> list[QueryTerm]:
    """Terms by descending weight (w1 × multiplicity: rarest first, as descending bounds
    nearly are), then by term: the one summation order of every path."""
    return sorted(terms, key=_ORDER)


def score_at(terms: Sequence[QueryTerm], positions: np.ndarray, norms: np.ndarray) -> np.ndarray:
    """Full scores at `positions` (intp, ascending); terms already `ordered`."""
    scores = np.zeros(len(positions))
    for term in terms:
        scores += lookup(term, positions, norms)
    return scores


def score_all(
    terms: Sequence[QueryTerm], norms: np.ndarray, allowed: Allow | None, n_positions: int
) -> tuple[np.ndarray, np.ndarray]:
    """(positions ascending, scores) of every allowed position sharing a term with the query."""
    acc = np.zeros(n_positions)
    scanned = [_scan(term, norms, allowed, acc, None) for term in terms]
    positions = union(scanned, n_positions)
    return positions, acc[positions]


def top_exhaustive(
    terms: Sequence[QueryTerm],
    k: int,
    norms: np.ndarray,
    allowed: Allow | None,
    n_positions: int,
    memory: TermMemory | None = None,
    mask: np.ndarray | None = None,
) -> tuple[np.ndarray, np.ndarray]:
    """(positions, full scores) of every allowed position scoring at least the k-th best:
    every term summed, in order, into a dense accumulator (cheapest when the index is small):
    the first sparse terms in one `bincount`, a term in many positions as a dense vector
    (`is_dense`), any other scattered. The cut is the k-th best score among the sparse terms'
    first documents (a lower bound of the k-th best), or, with fewer than k of those, the k-th
    best in the accumulator. `mask`: `allowed` over every position,
    when the caller has it."""
    if not terms:
        return np.zeros(0, dtype=np.intp), np.zeros(0)
    remember = memory.remember if memory is not None else None
    acc: np.ndarray | None = None
    lead: list[Arrays] = []  # the sparse terms before the first dense one
    sampled: list[np.ndarray] = []  # each sparse term's allowed positions, in term order
    share = DENSE_SHARE
    for term in terms:
        if term.n_postings * share >= n_positions:  # is_dense
            if acc is None:
                acc = _summed(lead, n_positions)
            dense = term.dense  # read once: the cache may drop it meanwhile
            acc += dense if dense is not None else _dense(term, norms, n_positions, memory)
            continue
        arrays = term.arrays
        if allowed is None and arrays is not None:
            pos, contrib = arrays
        else:
            pos, contrib = _allowed_arrays(term, norms, allowed, remember)
        sampled.append(pos)
        if acc is None:
            lead.append((pos, contrib))
        else:
            np.add.at(acc, pos, contrib)
    if acc is None:
        acc = _summed(lead, n_positions)
    elif allowed is not None:  # a dense vector covers every position: drop those not allowed
        acc[~(mask if mask is not None else allowed(np.arange(n_positions, dtype=np.int64)))] = 0.0
    sample: list[np.ndarray] = []
    size = 0
    for pos in sampled:
        sample.append(pos)
        size += len(pos)
        if size >= _PROBE * k:
            break
    seen = union(sample, n_positions)
    if len(seen) >= k:
        cut = kth_largest(acc[seen], k)
        positions = np.flatnonzero(acc >= cut)
    else:  # too few sparse postings to sample: cut on the accumulator itself
        positions = np.flatnonzero(acc)
        if len(positions) > k:  # (common terms dominate) ties at the cut kept
            scores = acc[positions]
            positions = positions[scores >= kth_largest(scores, k)]
    return positions, acc[positions]


def _summed(arrays: list[Arrays], n_positions: int) -> np.ndarray:
    """A new float64 accumulator holding the sum of `arrays`, per position in list order."""
    positions = np.concatenate([a[0] for a in arrays]) if arrays else np.zeros(0, dtype=np.intp)
    if not len(positions):  # (bincount of nothing would be integers, whatever the weights)
        return np.zeros(n_positions)
    # sums in array order: per document, in term order
    return np.bincount(positions, np.concatenate([a[1] for a in arrays]), minlength=n_positions)


def _dense(term: QueryTerm, norms: np.ndarray, n_positions: int, memory: TermMemory | None) -> np.ndarray:
    dense = dense_contributions(term, norms, n_positions)
    if memory is not None and term.dense is None:
        memory.remember_dense(term, dense)
    return dense


def top_candidates(
    terms: Sequence[QueryTerm],
    k: int,
    norms: np.ndarray,
    allowed: Allow | None,
    n_positions: int,
    remember: Callable[[QueryTerm, Arrays], None] | None = None,
) -> tuple[np.ndarray, np.ndarray]:
    """(positions, full scores) of a superset of the best `k` allowed positions; terms already
    `ordered`; `remember` is told the arrays computed for each scanned term.

    Essential terms (a prefix of the order, at first those with the shortest share of the
    postings) are scanned over all their postings. The k best partial scores completed with the
    other terms are real scores, so their minimum θ is a lower bound of the final k-th best.
    While the other terms' bounds still sum to θ or more the next term becomes essential; then
    no document outside the scanned postings can enter, candidates that cannot reach θ are
    dropped, and the other terms are added only at the survivors (binary search), dropping
    again after each term.
    """
    n = len(terms)
    suffix = [0.0] * (n + 1)
    for i in range(n - 1, -1, -1):
        suffix[i] = suffix[i + 1] + terms[i].tight
    budget = max(_ESSENTIAL_MIN, int(sum(t.n_postings for t in terms) * _ESSENTIAL_SHARE))
    i = 1
    used = terms[0].n_postings if n else 0
    while i < n and used + terms[i].n_postings <= budget:
        used += terms[i].n_postings
        i += 1
    acc = np.zeros(n_positions)
    pool = _scan_many(terms[:i], norms, allowed, acc, remember, n_positions)
    theta = 0.0
    probed = False
    while i < n:
        if len(pool) >= k:
            if not probed:
                probed = True
                theta = _probe(terms[i:], pool, acc, k, norms)
            theta = max(theta, kth_largest(acc[pool], k))
            if suffix[i] < theta * _SAFETY:
                break
        pool = union([pool, _scan(terms[i], norms, allowed, acc, remember)], n_positions)
        i += 1
    scores = acc[pool]
    if i >= n:
        return pool, scores
    keep = scores + suffix[i] >= theta * _SAFETY
    pool, scores = pool[keep], scores[keep]
    for j in range(i, n):
        term = terms[j]
        if remember is not None and term.arrays is None and term.n_postings <= _FILL * len(pool):
            remember(term, term_arrays(term, norms))  # about as cheap as the lookup; reused later
        scores += lookup(term, pool, norms)
        if len(pool) > k:
            keep = scores + suffix[j + 1] >= theta * _SAFETY
            pool, scores = pool[keep], scores[keep]
    return pool, scores


def lookup(term: QueryTerm, positions: np.ndarray, norms: np.ndarray) -> np.ndarray:
    """The contribution of `term` at each of `positions` (ascending), 0.0 where it is absent."""
    dense, arrays = term.dense, term.arrays  # read once: a cache may drop them meanwhile
    if dense is not None:
        return dense[positions]
    if arrays is not None:
        docs, contrib = arrays
        if not len(docs):
            return np.zeros(len(positions))
        idx = np.searchsorted(docs, positions)
        hit = docs.take(idx, mode="clip") == positions
        return np.where(hit, contrib.take(idx, mode="clip"), 0.0)
    out = np.zeros(len(positions))
    for docs, tfs in term.parts:
        if not len(docs):
            continue
        idx = np.searchsorted(docs, positions.astype(docs.dtype))  # same dtype: no copy of docs
        hit = docs.take(idx, mode="clip") == positions
        values = contributions(tfs.take(idx, mode="clip"), norms[positions], term.w1, term.count)
        out += np.where(hit, values, 0.0)
    return out


def union(parts: list[np.ndarray], n_positions: int) -> np.ndarray:
    """Sorted distinct positions of `parts` (each sorted and distinct)."""
    parts = [p for p in parts if len(p)]
    if not parts:
        return np.zeros(0, dtype=np.intp)
    if len(parts) == 1:
        return parts[0]
    joined = np.concatenate(parts)
    if len(joined) * 16 < n_positions:
        joined.sort()
        keep = np.empty(len(joined), dtype=bool)
        keep[:1] = True
        np.not_equal(joined[1:], joined[:-1], out=keep[1:])
        return joined[keep]
    seen = np.zeros(n_positions, dtype=bool)
    seen[joined] = True
    return np.flatnonzero(seen)


def kth_largest(values: np.ndarray, k: int) -> float:
    """The k-th largest value (k ≤ len(values))."""
    return float(np.partition(values, len(values) - k)[len(values) - k])


def best_k(
    positions: np.ndarray, scores: np.ndarray, k: int, key: Callable[[int], str]
) -> list[tuple[int, float]]:
    """The best `k` (position, score) by (-score, key(position)): ties at the cut included
    before ordering, so the order is total and deterministic; `key` is called only for
    positions whose score ties another's (the one exact rank BM25, the vector stores, the dense
    channel and the fusion share).

    >>> best_k(np.array([4, 7, 9, 2]), np.array([0.5, 0.9, 0.5, 0.1]), 3, {4: "b", 7: "x", 9: "a"}.__getitem__)
    [(7, 0.9), (9, 0.5), (4, 0.5)]
    """
    if len(positions) > k:
        keep = scores >= kth_largest(scores, k)
        positions, scores = positions[keep], scores[keep]
    pairs = sorted(zip(positions.tolist(), scores.tolist(), strict=True), key=itemgetter(1), reverse=True)  # stable
    start = 0  # each run of equal scores is put in key order
    for end in range(1, len(pairs) + 1):
        if end == len(pairs) or pairs[end][1] != pairs[start][1]:
            if end - start > 1:
                pairs[start:end] = sorted(pairs[start:end], key=lambda p: key(p[0]))
            start = end
    return pairs[:k]


def _scan(
    term: QueryTerm,
    norms: np.ndarray,
    allowed: Allow | None,
    acc: np.ndarray,
    remember: Callable[[QueryTerm, Arrays], None] | None,
) -> np.ndarray:
    """Add `term` over all its (allowed) postings to acc; return the positions touched."""
    pos, contrib = _allowed_arrays(term, norms, allowed, remember)
    np.add.at(acc, pos, contrib)
    return pos


def _scan_many(
    terms: Sequence[QueryTerm],
    norms: np.ndarray,
    allowed: Allow | None,
    acc: np.ndarray,
    remember: Callable[[QueryTerm, Arrays], None] | None,
    n_positions: int,
) -> np.ndarray:
    """`_scan` of several terms in one pass (same per-document order); distinct positions."""
    if len(terms) == 1:
        return _scan(terms[0], norms, allowed, acc, remember)
    arrays = [_allowed_arrays(t, norms, allowed, remember) for t in terms]
    np.add.at(acc, np.concatenate([a[0] for a in arrays]), np.concatenate([a[1] for a in arrays]))
    return union([a[0] for a in arrays], n_positions)


def _allowed_arrays(
    term: QueryTerm,
    norms: np.ndarray,
    allowed: Allow | None,
    remember: Callable[[QueryTerm, Arrays], None] | None,
) -> Arrays:
    arrays = term_arrays(term, norms)
    if remember is not None and term.arrays is None:
        remember(term, arrays)
    if allowed is None:
        return arrays
    pos, contrib = arrays
    mask = allowed(pos)
    return pos[mask], contrib[mask]


def _probe(
    rest: Sequence[QueryTerm], pool: np.ndarray, acc: np.ndarray, k: int, norms: np.ndarray
) -> float:
    """The k-th best full score among the best partial scores of `pool` (len(pool) ≥ k): the
    k-th best of some real documents, so at most the final k-th best."""
    m = min(len(pool), _PROBE * k)
    best = np.sort(pool[np.argpartition(acc[pool], len(pool) - m)[len(pool) - m :]])
    full = acc[best]
    for term in rest:
        full += lookup(term, best, norms)
    return kth_largest(full, k)
