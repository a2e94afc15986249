"""Immutable postings segments: term → (positions, tf), built in batches or merged.

A segment covers a contiguous range of global positions [first, first + n_docs). Invariants:
within each term the positions are strictly increasing (so a segment can be searched with
`np.searchsorted`); every term of the vocabulary has at least one posting; `max_tf[t]` and
`min_ratio[t]` (the smallest length / tf over the term's postings) bound every contribution of
term t for any k1, b and average length, which is what top-k pruning relies on. Per-position
columns (token count, store row id, chunk id, filter-field codes) travel with the postings.
A position's sensitivity never changes (a store row's content is immutable), so which positions
are RESTRICTED, and each term's RESTRICTED postings, are worked out once per segment and kept.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from itertools import chain
from typing import cast

import numpy as np

from ragspine.retrieval.model import INDEXED_FIELDS
from ragspine.retrieval.sensitivity import is_restricted
from ragspine.retrieval.lexical.index.mapped import MappedFile
from ragspine.retrieval.lexical.index.strings import DictVocab, HashedVocab, StringColumn

_RATIO_BLOCK = 1 << 22  # postings per block when computing min_ratio (bounds temporary memory)
_INFO_CACHE_MAX = 200_000  # looked-up terms remembered per segment
_MISSING = object()
_Info = tuple[int, int, int, float]  # (postings start, end, max tf, min length/tf)
_SENSITIVITY = INDEXED_FIELDS.index("sensitivity")
_DOC_ID = INDEXED_FIELDS.index("doc_id")
_NO_POSITIONS = np.zeros(0, dtype=np.int32)


@dataclass(frozen=True)
class Segment:
    """Postings plus the per-position columns of positions first … first + n_docs - 1."""

    first: int
    terms: StringColumn
    vocab: DictVocab | HashedVocab
    indptr: np.ndarray  # int64 [V + 1]
    docs: np.ndarray  # int32 [P], global positions
    tfs: np.ndarray  # uint16 or uint32 [P]
    max_tf: np.ndarray  # [V], dtype of tfs
    min_ratio: np.ndarray  # float64 [V]
    lengths: np.ndarray  # int32 [n_docs], tokens per position
    row_ids: np.ndarray  # int64 [n_docs], store row id (the position itself when not from a store)
    chunk_ids: StringColumn
    field_values: dict[str, list[str]]  # per filter field, the value of each code
    field_codes: np.ndarray  # int32 [len(INDEXED_FIELDS), n_docs]
    name: str = ""  # storage name once written
    files: tuple[MappedFile, ...] = field(default=(), compare=False, repr=False)  # maps it reads

    def changed_files(self) -> list[str]:
        """Names of the memory-mapped files under this segment that changed since mapped."""
        return [f.path.name for f in self.files if f.changed()]

    @property
    def n_docs(self) -> int:
        return len(self.lengths)

    @property
    def n_postings(self) -> int:
        return len(self.docs)

    def postings(self, term: str) -> tuple[np.ndarray, np.ndarray, int, float] | None:
        """(positions, tfs, max tf, min length/tf) of `term`, or None when absent."""
        cache: dict[str, _Info | None] = self.__dict__.setdefault("_info", {})
        found = cache.get(term, _MISSING)  # one atomic read: another thread may clear the cache
        if found is not _MISSING:
            info = cast("_Info | None", found)
        else:
            tid = self.vocab.get(term)
            info = None
            if tid >= 0:
                start, end = self.indptr[tid : tid + 2].tolist()
                info = (start, end, int(self.max_tf[tid]), float(self.min_ratio[tid]))
            if len(cache) >= _INFO_CACHE_MAX:
                cache.clear()
            cache[term] = info
        if info is None:
            return None
        start, end, max_tf, min_ratio = info
        return self.docs[start:end], self.tfs[start:end], max_tf, min_ratio

    def positions_of_docs(self, doc_ids: Sequence[str]) -> np.ndarray:
        """Global positions in this segment whose doc_id is one of `doc_ids` (ascending)."""
        codes: dict[str, int] | None = self.__dict__.get("_doc_codes")
        if codes is None:
            codes = {v: i for i, v in enumerate(self.field_values["doc_id"])}
            self.__dict__["_doc_codes"] = codes
        wanted = [codes[d] for d in doc_ids if d in codes]
        if not wanted or not self.n_docs:
            return np.zeros(0, dtype=np.int64)
        column = self.field_codes[_DOC_ID]
        return np.flatnonzero(np.isin(column, wanted)) + self.first

    def restricted(self) -> np.ndarray | None:
        """Bool per local position: RESTRICTED (`is_restricted` of its label); None when none is."""
        cached = self.__dict__.get("_restricted", _MISSING)
        if cached is _MISSING:
            values = self.field_values["sensitivity"]
            lut = np.fromiter((is_restricted(v) for v in values), dtype=bool, count=len(values))
            cached = lut[self.field_codes[_SENSITIVITY]] if lut.any() and self.n_docs else None
            self.__dict__["_restricted"] = cached
        return cast("np.ndarray | None", cached)

    def restricted_postings(self, term: str) -> np.ndarray:
        """Global positions of the RESTRICTED documents containing `term` (ascending)."""
        mask = self.restricted()
        if mask is None:
            return _NO_POSITIONS
        cache: dict[str, np.ndarray] = self.__dict__.setdefault("_rpost", {})
        found = cache.get(term)
        if found is None:
            hit = self.postings(term)
            found = _NO_POSITIONS if hit is None else hit[0][mask[hit[0] - self.first]]
            if len(cache) >= _INFO_CACHE_MAX:
                cache.clear()
            cache[term] = found
        return found


@dataclass(frozen=True)
class Run:
    """A term-major block of postings whose local term i is global term `term_ids[i]`."""

    term_ids: np.ndarray
    indptr: np.ndarray
    docs: np.ndarray
    tfs: np.ndarray


class SegmentBuilder:
    """Builds one segment from batches of documents (token lists plus their columns).

    >>> b = SegmentBuilder(first=0)
    >>> b.add([["a", "b", "a"], ["b"]], chunk_ids=["x", "y"])
    >>> s = b.finish()
    >>> s.postings("a")[0].tolist(), s.postings("a")[1].tolist(), s.postings("b")[0].tolist()
    ([0], [2], [0, 1])
    """

    def __init__(self, first: int = 0) -> None:
        self.first = first
        self._ids: dict[str, int] = {}
        self._runs: list[Run] = []
        self._lengths: list[np.ndarray] = []
        self._row_ids: list[np.ndarray] = []
        self._chunk_ids: list[str] = []
        self._values: dict[str, dict[str, int]] = {f: {} for f in INDEXED_FIELDS}
        self._codes: list[np.ndarray] = []
        self._n = 0

    def add(
        self,
        token_lists: Sequence[Sequence[str]],
        *,
        chunk_ids: Sequence[str],
        row_ids: Sequence[int] | None = None,
        fields: Sequence[Sequence[str]] | None = None,
    ) -> None:
        """Append documents; `fields[i]` holds document i's values in INDEXED_FIELDS order."""
        nb = len(token_lists)
        if len(chunk_ids) != nb or (row_ids is not None and len(row_ids) != nb):
            raise ValueError("token_lists, chunk_ids and row_ids differ in length")
        start = self.first + self._n
        lengths = np.fromiter(map(len, token_lists), dtype=np.int64, count=nb)
        flat = list(chain.from_iterable(token_lists))
        ids = self._ids
        for term in dict.fromkeys(flat):  # first-occurrence order keeps ids deterministic
            if term not in ids:
                ids[term] = len(ids)
        if flat:
            term_of = np.fromiter(map(ids.__getitem__, flat), dtype=np.int64, count=len(flat))
            keys = term_of * nb + np.repeat(np.arange(nb, dtype=np.int64), lengths)
            unique, counts = np.unique(keys, return_counts=True)
            terms_in, local_docs = np.divmod(unique, nb)
            term_ids, first_idx = np.unique(terms_in, return_index=True)
            indptr = np.append(first_idx, len(unique)).astype(np.int64)
            self._runs.append(Run(term_ids, indptr, (local_docs + start).astype(np.int32), counts))
        self._lengths.append(lengths.astype(np.int32))
        self._row_ids.append(
            np.arange(start, start + nb, dtype=np.int64)
            if row_ids is None
            else np.asarray(row_ids, dtype=np.int64)
        )
        self._chunk_ids.extend(chunk_ids)
        codes = np.zeros((len(INDEXED_FIELDS), nb), dtype=np.int32)
        if fields is not None:
            for j, name in enumerate(INDEXED_FIELDS):
                table = self._values[name]
                codes[j] = [table.setdefault(row[j], len(table)) for row in fields]
        else:
            for j, name in enumerate(INDEXED_FIELDS):
                codes[j] = self._values[name].setdefault("", len(self._values[name]))
        self._codes.append(codes)
        self._n += nb

    def finish(self) -> Segment:
        """The segment of everything added (the builder must not be reused)."""
        terms = StringColumn(list(self._ids))
        indptr, docs, tfs = concat_runs(self._runs, len(terms))
        self._runs = []
        lengths = _cat(self._lengths, np.int32)
        return make_segment(
            first=self.first,
            terms=terms,
            vocab=DictVocab(terms),
            indptr=indptr,
            docs=docs,
            tfs=tfs,
            lengths=lengths,
            row_ids=_cat(self._row_ids, np.int64),
            chunk_ids=StringColumn(self._chunk_ids),
            field_values={f: list(v) for f, v in self._values.items()},
            field_codes=(
                np.concatenate(self._codes, axis=1)
                if self._codes
                else np.zeros((len(INDEXED_FIELDS), 0), dtype=np.int32)
            ),
        )


def make_segment(
    *,
    first: int,
    terms: StringColumn,
    vocab: DictVocab | HashedVocab,
    indptr: np.ndarray,
    docs: np.ndarray,
    tfs: np.ndarray,
    lengths: np.ndarray,
    row_ids: np.ndarray,
    chunk_ids: StringColumn,
    field_values: dict[str, list[str]],
    field_codes: np.ndarray,
    name: str = "",
) -> Segment:
    """A segment with its per-term bounds computed from the postings."""
    max_tf, min_ratio = term_bounds(indptr, docs, tfs, lengths, first)
    return Segment(
        first, terms, vocab, indptr, docs, tfs, max_tf, min_ratio,
        lengths, row_ids, chunk_ids, field_values, field_codes, name,
    )  # fmt: skip


def concat_runs(runs: Sequence[Run], n_terms: int) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Term-major (indptr, docs, tfs) of runs given in position order: each term's postings
    are the runs' postings of that term, concatenated in run order (so positions ascend)."""
    counts = np.zeros(n_terms, dtype=np.int64)
    max_tf = 0
    for run in runs:
        counts[run.term_ids] += np.diff(run.indptr)
        if len(run.tfs):
            max_tf = max(max_tf, int(run.tfs.max()))
    indptr = np.zeros(n_terms + 1, dtype=np.int64)
    np.cumsum(counts, out=indptr[1:])
    total = int(indptr[-1])
    docs = np.empty(total, dtype=np.int32)
    tfs = np.empty(total, dtype=np.uint16 if max_tf <= np.iinfo(np.uint16).max else np.uint32)
    fill = indptr[:-1].copy()
    for run in runs:
        run_counts = np.diff(run.indptr)
        starts = fill[run.term_ids]
        dest = np.repeat(starts - run.indptr[:-1], run_counts) + np.arange(len(run.docs))
        docs[dest] = run.docs
        tfs[dest] = run.tfs
        fill[run.term_ids] = starts + run_counts
    return indptr, docs, tfs


def term_bounds(
    indptr: np.ndarray, docs: np.ndarray, tfs: np.ndarray, lengths: np.ndarray, first: int
) -> tuple[np.ndarray, np.ndarray]:
    """(max tf, min length / tf) of every term; every term must have a posting."""
    n_terms = len(indptr) - 1
    if n_terms == 0:
        return np.zeros(0, dtype=tfs.dtype), np.zeros(0, dtype=np.float64)
    max_tf = np.maximum.reduceat(tfs, indptr[:-1])
    min_ratio = np.full(n_terms, np.inf)
    total = int(indptr[-1])
    for start in range(0, total, _RATIO_BLOCK):
        end = min(total, start + _RATIO_BLOCK)
        ratio = lengths[docs[start:end] - first] / tfs[start:end]
        t0 = int(np.searchsorted(indptr, start, side="right")) - 1
        t1 = int(np.searchsorted(indptr, end - 1, side="right")) - 1
        local = np.clip(indptr[t0 : t1 + 1], start, end) - start
        mins = np.minimum.reduceat(ratio, local)
        np.minimum(min_ratio[t0 : t1 + 1], mins, out=min_ratio[t0 : t1 + 1])
    return max_tf, min_ratio


def _cat(parts: list[np.ndarray], dtype: type) -> np.ndarray:
    return np.concatenate(parts).astype(dtype) if parts else np.zeros(0, dtype=dtype)
