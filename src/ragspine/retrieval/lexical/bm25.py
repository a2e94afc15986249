"""Okapi BM25: the reference scoring function, and `InvertedBM25` over the inverted index.

`bm25_scores` is the specification: pure Python, one pass per query token, the index package
(`lexical.index`) must agree with it. Invariant: for the same set of documents,
`InvertedBM25.scores` equals `bm25_scores` (to float rounding) for every document that shares a
term with the query (others score 0 and are not returned). Statistics (N, df, avgdl) are always
over the whole indexed set; `allowed` only restricts which documents are scored, never the
statistics (as Lucene does with a filter).
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Container, Sequence

# idf is one pure function shared with the index (defined there, so the index never imports this)
from ragspine.retrieval.lexical.index.scoring import bm25_idf as bm25_idf

DEFAULT_BM25_K1 = 1.5
DEFAULT_BM25_B = 0.75


def bm25_scores(
    query_tokens: Sequence[str],
    docs_tokens: Sequence[Sequence[str]],
    k1: float = DEFAULT_BM25_K1,
    b: float = DEFAULT_BM25_B,
) -> list[float]:
    """Okapi BM25 of each document for the query (a repeated query token counts each time)."""
    n_docs = len(docs_tokens)
    if n_docs == 0:
        return []
    counts = [Counter(doc) for doc in docs_tokens]
    avgdl = sum(len(doc) for doc in docs_tokens) / n_docs
    df: Counter[str] = Counter()
    for doc_counts in counts:
        df.update(doc_counts.keys())
    scores = [0.0] * n_docs
    if avgdl == 0:
        return scores
    for term in query_tokens:
        if not df[term]:
            continue
        idf = bm25_idf(n_docs, df[term])
        for i, doc_counts in enumerate(counts):
            tf = doc_counts.get(term, 0)
            if tf:
                norm = k1 * (1.0 - b + b * len(docs_tokens[i]) / avgdl)
                scores[i] += idf * tf * (k1 + 1.0) / (tf + norm)
    return scores


class InvertedBM25:
    """Term → postings over a fixed list of token lists; query cost follows the postings.

    >>> index = InvertedBM25([["a", "b"], ["b"]])
    >>> {d: round(s, 3) for d, s in index.scores(["b", "a"]).items()}
    {0: 0.761, 1: 0.214}
    """

    def __init__(
        self,
        docs_tokens: Sequence[Sequence[str]],
        *,
        k1: float = DEFAULT_BM25_K1,
        b: float = DEFAULT_BM25_B,
    ) -> None:
        from ragspine.retrieval.lexical.index.segment import SegmentBuilder
        from ragspine.retrieval.lexical.index.snapshot import IndexSnapshot

        self.k1, self.b = k1, b
        self.n_docs = len(docs_tokens)
        builder = SegmentBuilder(first=0)
        builder.add(docs_tokens, chunk_ids=[str(i) for i in range(self.n_docs)])
        self._index = IndexSnapshot([builder.finish()])
        self.avgdl = self._index.avgdl

    def scores(
        self, query_tokens: Sequence[str], allowed: Container[int] | None = None
    ) -> dict[int, float]:
        """BM25 of every (allowed) document containing at least one query token."""
        positions, scores = self._index.scores(query_tokens, k1=self.k1, b=self.b)
        out = dict(zip(positions.tolist(), scores.tolist(), strict=True))
        if allowed is not None:
            out = {doc: score for doc, score in out.items() if doc in allowed}
        return out
