"""Merging segments: one segment from several, optionally dropping positions.

Invariant: the merged segment's postings are exactly the inputs' (in position order), less the
dropped positions, renumbered in order; terms left without postings are dropped; per-position
columns follow their positions.
"""

from __future__ import annotations

from collections.abc import Sequence
from itertools import chain
from typing import TypedDict

import numpy as np

from ragspine.retrieval.model import INDEXED_FIELDS
from ragspine.retrieval.lexical.index.segment import Segment, Run, concat_runs, make_segment
from ragspine.retrieval.lexical.index.strings import DictVocab, StringColumn


def merge_segments(
    segments: Sequence[Segment], keep: np.ndarray | None = None, *, first: int | None = None
) -> Segment:
    """One segment holding `segments` (given in position order). With `keep` (a bool mask over
    global positions), positions not kept are dropped and the rest renumbered from `first`
    in order; terms left without postings are dropped."""
    if not segments:
        raise ValueError("merge_segments needs at least one segment")
    base = segments[0]
    first = base.first if first is None else first
    union: list[str] = base.terms.to_list()
    index = {t: i for i, t in enumerate(union)} if isinstance(base.vocab, DictVocab) else None
    extra: dict[str, int] = {}
    remap = None
    if keep is not None:
        remap = np.cumsum(keep, dtype=np.int64) - 1 + first
    runs: list[Run] = []
    for seg in segments:
        term_ids = _union_ids(seg, base, index, extra, len(union))
        docs, tfs, indptr = seg.docs, seg.tfs, seg.indptr
        if keep is not None and remap is not None:
            kept = keep[docs]
            per_term = (
                np.add.reduceat(kept.astype(np.int64), indptr[:-1])
                if len(docs)
                else np.zeros(len(indptr) - 1, dtype=np.int64)
            )
            indptr = np.zeros(len(indptr), dtype=np.int64)
            np.cumsum(per_term, out=indptr[1:])
            docs, tfs = remap[docs[kept]].astype(np.int32), tfs[kept]
        runs.append(Run(term_ids, indptr, docs, tfs))
    union.extend(extra)
    indptr, docs, tfs = concat_runs(runs, len(union))
    counts = np.diff(indptr)
    if (counts == 0).any():
        present = counts > 0
        union = [t for t, p in zip(union, present.tolist(), strict=True) if p]
        indptr = np.concatenate([[0], np.cumsum(counts[present])]).astype(np.int64)
    terms = StringColumn(union)
    columns = _merged_columns(segments, keep)
    return make_segment(first=first, terms=terms, vocab=DictVocab(terms), indptr=indptr,
                        docs=docs, tfs=tfs, **columns)  # fmt: skip


def _union_ids(
    seg: Segment,
    base: Segment,
    index: dict[str, int] | None,
    extra: dict[str, int],
    n_base: int,
) -> np.ndarray:
    if seg is base:
        return np.arange(len(seg.terms), dtype=np.int64)
    out = np.empty(len(seg.terms), dtype=np.int64)
    for i, term in enumerate(seg.terms.to_list()):
        tid = index.get(term, -1) if index is not None else base.vocab.get(term)
        if tid < 0:
            tid = extra.setdefault(term, n_base + len(extra))
        out[i] = tid
    return out


class _Columns(TypedDict):
    """The per-document columns of a merged segment (keyword arguments of `make_segment`)."""

    lengths: np.ndarray
    row_ids: np.ndarray
    chunk_ids: StringColumn
    field_values: dict[str, list[str]]
    field_codes: np.ndarray


def _merged_columns(segments: Sequence[Segment], keep: np.ndarray | None) -> _Columns:
    values: dict[str, dict[str, int]] = {f: {} for f in INDEXED_FIELDS}
    codes = []
    for seg in segments:
        mapped = np.empty_like(seg.field_codes)
        for j, name in enumerate(INDEXED_FIELDS):
            table = values[name]
            lut = np.array(
                [table.setdefault(v, len(table)) for v in seg.field_values[name]] or [0],
                dtype=np.int32,
            )
            mapped[j] = lut[seg.field_codes[j]] if seg.n_docs else seg.field_codes[j]
        codes.append(mapped)
    lengths = np.concatenate([s.lengths for s in segments])
    row_ids = np.concatenate([s.row_ids for s in segments])
    field_codes = np.concatenate(codes, axis=1)
    chunk_ids = list(chain.from_iterable(s.chunk_ids.to_list() for s in segments))
    if keep is not None:
        lo = segments[0].first
        mask = keep[lo : lo + len(lengths)]
        lengths, row_ids, field_codes = lengths[mask], row_ids[mask], field_codes[:, mask]
        chunk_ids = [c for c, k in zip(chunk_ids, mask.tolist(), strict=True) if k]
    return {
        "lengths": lengths.astype(np.int32),
        "row_ids": row_ids.astype(np.int64),
        "chunk_ids": StringColumn(chunk_ids),
        "field_values": {f: list(v) for f, v in values.items()},
        "field_codes": field_codes.astype(np.int32),
    }
