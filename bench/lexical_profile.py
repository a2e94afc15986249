"""The figures behind the lexical per-query work (issue 37, item 4), for
`python -m bench.lexical_compare --profile`: where a query's postings are, what the ASCII path
of `tokenize` saves, and what the per-query data-version read costs.

- postings: per query (the corpus's test queries, `tokenize`d), the postings of its distinct
  terms, and the share and number of those terms that the small-index scan adds densely
  (`scoring.is_dense`: in at least 1/DENSE_SHARE of the positions).
- tokenize: `tokenize` against `unicode_tokens` (the general path, the same tokens) over the
  queries, best of 5 runs of every query; the ratio is general ÷ ASCII path.
- data_version: `ChunkStore.data_version()` (one SQLite read, made by every search), median
  and p90 of single calls.
"""

from __future__ import annotations

import json
import statistics
import time
import timeit
from pathlib import Path
from typing import Any

from bench.engines import _open


def profile(folder: Path) -> dict[str, Any]:
    from ragspine.retrieval.lexical.index.scoring import is_dense
    from ragspine.retrieval.lexical.tokenize import tokenize, unicode_tokens

    queries = json.loads((folder / "queries.json").read_text())
    store, index = _open(folder)
    index.refresh()
    snapshot = index.lexical_index.snapshot()
    postings, dense_share, dense_terms, n_terms = [], [], [], []
    for q in queries:
        terms = snapshot.query_terms(tokenize(q), k1=1.5, b=0.75)
        total = sum(t.n_postings for t in terms)
        dense = [t.n_postings for t in terms if is_dense(t, snapshot.n_positions)]
        postings.append(total)
        dense_share.append(sum(dense) / total if total else 0.0)
        dense_terms.append(len(dense))
        n_terms.append(len(terms))
    ascii_s = min(timeit.repeat(lambda: [tokenize(q) for q in queries], number=1, repeat=5))
    general_s = min(timeit.repeat(lambda: [unicode_tokens(q) for q in queries], number=1, repeat=5))
    reads = []
    for _ in range(2000):
        t = time.perf_counter()
        store.data_version()
        reads.append(time.perf_counter() - t)
    store.close()
    reads.sort()
    return {
        "queries": len(queries), "positions": snapshot.n_positions,
        "postings_per_query_mean": statistics.fmean(postings),
        "terms_per_query_mean": statistics.fmean(n_terms),
        "dense_terms_per_query_mean": statistics.fmean(dense_terms),
        "dense_share_of_postings": sum(p * s for p, s in zip(postings, dense_share, strict=True)) / sum(postings),
        "tokenize_general_over_ascii": general_s / ascii_s,
        "tokenize_us_per_query": {"ascii": ascii_s / len(queries) * 1e6, "general": general_s / len(queries) * 1e6},
        "data_version_us": {"p50": reads[len(reads) // 2] * 1e6, "p90": reads[int(len(reads) * 0.9)] * 1e6},
    }  # fmt: skip
