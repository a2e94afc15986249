"""HybridRetriever: metadata pre-filter → channels (BM25, dense vectors, extras) per query variant → fusion.

The channels are the slot of `retrieval.pipeline.channels`: `LexicalChannel` and `DenseSlot` are
built in; `extra_channels` (RAGSPINE_EXTRA_CHANNELS) are ranked over the same allowed positions
and fused with their `weight` beside them (not in channels="vector", which is the dense channel
alone); their scores come back in `RetrievalResult.channel_scores`.

Invariants: the metadata filter is applied before any scoring or embedding, and both channels
rank exactly the positions it allows; BM25 statistics are over every chunk given to the
retriever (or every active chunk of the store) that is not RESTRICTED, the filter only restricts
which are scored;
chunk vectors come from a `DenseChannel` (persisted per chunk and model, never recomputed per
query: only the query is embedded, every variant in one backend call, each distinct text once);
a retriever built from a list with only an `embedding_backend` embeds lazily: per query, only
the chunks its metadata filter allows that have no vector yet, kept by chunk_id for later
queries (the store-backed index, `over_snapshot`, embeds at ingest); rankings are combined by
`Fusion`: by default their scores as z-scores (`fusion.zscore`), else weighted RRF (plain
`rrf_fuse` when every weight is 1); without a dense channel, and in channels="vector", always
RRF (one channel: its own order); ties break by (-fused_score, chunk_id); without an embedding
backend a chunk that shares no token with any query variant is never returned.
channels="vector" ranks by the dense channel alone (BM25 scores are still reported). When a
chunk among the dense channel's top 3 is in another language than the query, the query counts
as one BM25 did not match (`match` 0 for the adaptive fusion): BM25 cannot find a translation.
The fusion reads one `QuerySignals` per query (`fusion.signals`), built from what the two
channels already returned; the learned fusion's features come only from it.
RESTRICTED chunks are masked out of the candidate set before any scoring, as a filter is
(`IndexSnapshot.visible`): they never take a rank, a score or a top_k slot, and the BM25
statistics and the dense channel's language centring are over the other chunks only, so every
result is the same whether or not RESTRICTED chunks exist; the two exits (rerank, link) stay as
defence in depth. `include_restricted=True` ranks them too (what the exits are tested on; never
on a caller-facing path). BM25 is served by an inverted index (`lexical.index`), so a query
costs time in proportion to the postings it touches.
"""

from __future__ import annotations

import dataclasses
import math
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field, replace
from typing import Any, TypedDict, Unpack

import numpy as np

from ragspine.retrieval.model import (RESERVED_FIELDS, Chunk, FieldFilters, field_filters, index_field_values,
                                      offered_metadata)  # fmt: skip
from ragspine.retrieval.filters import CORE_FIELDS, Filter, fields_of, parse_filter
from ragspine.retrieval.lexical.bm25 import DEFAULT_BM25_B, DEFAULT_BM25_K1, bm25_idf
from ragspine.retrieval.fusion.exact import exact_terms, lift_exact
from ragspine.retrieval.fusion.rrf import DEFAULT_RRF_K, TIE_WEIGHT, Fusion
from ragspine.retrieval.fusion.signals import CROSS_DEPTH, QuerySignals, top_overlap
from ragspine.retrieval.fusion.zscore import WINDOW
from ragspine.retrieval.lexical.index.scoring import best_k
from ragspine.retrieval.lexical.index.segment import SegmentBuilder
from ragspine.retrieval.lexical.index.snapshot import IndexSnapshot
from ragspine.retrieval.types import ChunkSource, EmbeddingBackend, QueryRewriter, RetrievalResult
from ragspine.retrieval.lexical.tokenize import tokenize
from ragspine.retrieval.pipeline.channels import (
    Channel,
    ChannelQuery,
    ChannelRanking,
    DenseRanker,
    DenseSlot,
    LexicalChannel,
)
from ragspine.retrieval.pipeline.feedback import Feedback, feedback_texts, relevance_model, rm3_ranking, rocchio_vector
from ragspine.retrieval.pipeline.stages import check_query
from ragspine.retrieval.pipeline.trace import Trace
from ragspine.retrieval.vector.dense.channel import DenseChannel, DenseRanking

CHANNELS = ("hybrid", "vector")
__all__ = ["CHANNELS", "DEFAULT_RANK_DEPTH", "DEFAULT_TOP_K", "TIE_WEIGHT", "HybridRetriever", "ListChunks",
           "RetrievalResult", "check_query", "cosine"]  # fmt: skip

DEFAULT_TOP_K = 50
DEFAULT_RANK_DEPTH = 100


@dataclass(frozen=True)
class _Plan:
    """One search's shape: the variants, how many results, how deep each channel ranks, BM25's
    k1, and whether one ranking alone is the answer."""

    variants: list[str]
    k: int
    depth: int
    k1: float
    single: bool


@dataclass
class _Runs:
    """What the channels returned for one search (the dense fields stay None without a dense channel)."""

    tokens: list[list[str]]
    lexical: ChannelRanking
    dense: ChannelRanking | None = None
    view: DenseRanking | None = None
    query_vectors: list[Any] = field(default_factory=list)
    vector_scores: dict[int, float] | None = None
    extra: list[tuple[str, float, ChannelRanking]] = field(default_factory=list)
    signals: QuerySignals | None = None  # set when the fusion's weights read them
    exact: list[str] = field(default_factory=list)  # the query's exact terms (`fusion.exact`) that lifted chunks
    fed_lexical: ChannelRanking | None = None  # the rankings fusion reads after feedback (None: the first pass)
    fed_dense: ChannelRanking | None = None
    feedback: dict[str, Any] = field(default_factory=dict)  # what the feedback did (the trace's)

    def ranked(self) -> set[int]:
        """Every position some channel ranked."""
        found = {p for r in self.lexical.rankings for p in r}
        for run in ([self.dense] if self.dense is not None else []) + [run for _, _, run in self.extra]:
            found.update(p for r in run.rankings for p in r)
        return found


def _fusion_inputs(runs: _Runs, weights: tuple[float, float], chunk_id: Callable[[int], str]) -> dict[str, Any]:
    """Everything the fusion read, by chunk id: per variant, each built-in channel's ranking and
    scores; the query's signals (None when the weights read none) and the weights."""

    def by_id(run: ChannelRanking | None) -> dict[str, Any]:
        if run is None:
            return {"rankings": [], "scores": []}
        return {"rankings": [[chunk_id(p) for p in ranking] for ranking in run.rankings],
                "scores": [{chunk_id(p): float(v) for p, v in scores.items()} for scores in run.scores]}  # fmt: skip

    return {"lexical": by_id(runs.lexical), "dense": by_id(runs.dense), "weights": weights,
            "signals": dataclasses.asdict(runs.signals) if runs.signals is not None else None}  # fmt: skip


def _signal_summary(signals: QuerySignals) -> dict[str, Any]:
    """What the fusion read about the query: BM25's match and coverage, the two heads' overlap,
    and whether the vectors' head is in another language (then the vectors alone rank)."""
    return {"match": signals.match, "covered": signals.covered, "overlap": signals.overlap,
            "crosses_language": signals.crossing}  # fmt: skip


def _ms_since(started: float) -> float:
    return (time.perf_counter() - started) * 1000


class RetrieverOptions(TypedDict, total=False):
    """`HybridRetriever`'s keyword options (their defaults are `HybridRetriever._setup`'s): the
    embedding backend (None: BM25 alone), the query rewriter, BM25's k1 and b, RRF's k, how deep
    each channel ranks, the analyzer (the index's and the queries'), the fusion, `channels`
    ("hybrid" or "vector": the dense channel alone), a `DenseChannel` to keep vectors across
    snapshots, whether RESTRICTED chunks are ranked (never on a caller-facing path) and the
    extra channels."""

    embedding_backend: EmbeddingBackend | None
    query_rewriter: QueryRewriter | None
    k1: float
    b: float
    rrf_k: int
    rank_depth: int
    analyzer: Callable[[str], list[str]]
    fusion: Fusion | None
    channels: str
    dense: DenseChannel | None
    include_restricted: bool
    extra_channels: Sequence[Channel]
    feedback: Feedback


class ListChunks:
    """Positions are indexes into a list."""

    def __init__(self, chunks: Sequence[Chunk]) -> None:
        self.chunks = list(chunks)

    def chunks_at(self, positions: Sequence[int]) -> list[Chunk]:
        return [self.chunks[i] for i in positions]


class HybridRetriever:
    """Ranks a fixed list of chunks (or a store's active chunks, see `over_snapshot`).

    >>> from ragspine.retrieval.chunking.chunking import Chunk
    >>> r = HybridRetriever([Chunk("a:0", "a", 0, "营收下滑", "a#p1@0-4")])
    >>> [x.chunk.chunk_id for x in r.search("营收")]
    ['a:0']
    """

    def __init__(self, chunks: Sequence[Chunk], **options: Unpack[RetrieverOptions]) -> None:
        chunks = list(chunks)
        ids = [c.chunk_id for c in chunks]
        if len(set(ids)) != len(ids):
            raise ValueError("HybridRetriever needs unique chunk_ids (pass only active chunks)")
        analyzer = options.get("analyzer", tokenize)
        builder = SegmentBuilder(first=0)
        builder.add(
            [analyzer(c.text) for c in chunks],
            chunk_ids=ids,
            fields=[index_field_values(c) for c in chunks],
        )
        # a list given with only a backend embeds lazily: per query, what its filter allows
        lazy = options.get("dense") is None
        self._setup(IndexSnapshot([builder.finish()]), ListChunks(chunks), lazy=lazy, **options)

    @classmethod
    def over_snapshot(
        cls, snapshot: IndexSnapshot, source: ChunkSource, **options: Unpack[RetrieverOptions]
    ) -> HybridRetriever:
        """A retriever over an existing index whose positions `source` resolves to chunks
        (the index must have been built with the same `analyzer`). `dense`, when given, keeps
        the chunk vectors across snapshots (else one is made for `embedding_backend`)."""
        self = cls.__new__(cls)
        self._setup(snapshot, source, lazy=False, **options)
        return self

    def _setup(
        self,
        snapshot: IndexSnapshot,
        source: ChunkSource,
        *,
        lazy: bool,
        embedding_backend: EmbeddingBackend | None = None,
        query_rewriter: QueryRewriter | None = None,
        k1: float = DEFAULT_BM25_K1,
        b: float = DEFAULT_BM25_B,
        rrf_k: int = DEFAULT_RRF_K,
        rank_depth: int = DEFAULT_RANK_DEPTH,
        analyzer: Callable[[str], list[str]] = tokenize,
        fusion: Fusion | None = None,
        channels: str = "hybrid",
        dense: DenseChannel | None = None,
        include_restricted: bool = False,
        extra_channels: Sequence[Channel] = (),
        feedback: Feedback = Feedback(),
    ) -> None:
        if channels not in CHANNELS:
            raise ValueError(f"unknown channels {channels!r}; valid: {', '.join(CHANNELS)}")
        if dense is not None and embedding_backend is None:
            embedding_backend = dense.backend
        if channels == "vector" and embedding_backend is None:
            raise ValueError("channels='vector' needs an embedding backend")
        # Every search, and the dense channel, sees only what a caller may (RESTRICTED masked).
        self.index = snapshot if include_restricted else snapshot.visible()
        self._source = source
        self.embedding_backend = embedding_backend
        self.query_rewriter = query_rewriter
        self.k1, self.b = k1, b
        self.fusion = fusion if fusion is not None else Fusion(k=rrf_k)
        self.rrf_k = self.fusion.k
        self.channels = channels
        self.rank_depth = rank_depth
        self.analyzer = analyzer  # the same function tokenizes chunks and queries
        # The channels, attached to this snapshot. lazy (a list given with only a backend): chunk
        # vectors are made per query, for the positions its filter allows, and kept by chunk_id
        # in the DenseChannel; else all at once (the store-backed index: at ingest).
        self.lexical = LexicalChannel(k1=k1, b=b, analyzer=analyzer).attach(self.index, source)
        if embedding_backend is not None and dense is None:
            dense = DenseChannel(embedding_backend)
        self._dense: DenseRanker | None = None
        if dense is not None:
            # The persisted vectors cover every chunk (their coverage counts RESTRICTED ones
            # too); a query still ranks only the positions `allowed` lets through.
            self._dense = DenseSlot(dense, lazy=lazy).attach(self.index if lazy else snapshot, source)
        self.dense: DenseRanking | None = self._dense.view if self._dense is not None else None
        self.extra_channels = [(c.name, c.weight, c.attach(self.index, source)) for c in extra_channels]
        self.feedback = feedback

    @property
    def chunks(self) -> list[Chunk]:
        """Every chunk this retriever ranks, in index order (RESTRICTED ones are not ranked:
        masked before scoring, unless `include_restricted`)."""
        return self._source.chunks_at(self.index.active_positions().tolist())

    def chunks_of_docs(self, doc_ids: Sequence[str]) -> list[Chunk]:
        """The chunks of these documents this retriever ranks (as `chunks`), in index order."""
        return self._source.chunks_at(self.index.active_positions_of_docs(doc_ids).tolist())

    def search(
        self,
        query: str,
        *,
        top_k: int | None = None,
        where: Filter | Mapping[str, Any] | None = None,
        variants: Sequence[str] | None = None,
        trace: Trace | None = None,
        **fields: Unpack[FieldFilters],
    ) -> list[RetrievalResult]:
        """The best `top_k` (default DEFAULT_TOP_K) chunks for `query` among those matching every
        given metadata field (`topic`, `entity`, `geography`, `period`, `language`: exact
        matches) and the typed filter `where` (a Filter or its dict form, see
        `ragspine.retrieval.filters`). `variants`: the query texts to search, `query` first,
        already screened by the caller (the link's security gate); None: the rewriter's.
        `trace`: receives the channels and fusion steps."""
        check_query(query)
        typed = self.check_where(where)
        k = DEFAULT_TOP_K if top_k is None else top_k
        if k <= 0:
            raise ValueError(f"top_k must be a positive integer, got {top_k}")
        filters = field_filters(fields, caller="search")
        if variants is None:
            variants = self.query_rewriter.rewrite(query) if self.query_rewriter else [query]
        elif not variants or variants[0] != query:
            raise ValueError("variants must start with the query itself")
        plan = self._plan(list(variants), k)
        request = ChannelQuery(self.index, plan.variants, plan.depth, filters, typed)
        started = time.perf_counter()
        runs = self._rank_channels(request, plan)
        plan = self._settle(plan, runs)
        if trace is not None:
            trace.add("channels", went_out=len(runs.ranked()), ms=_ms_since(started), **self._channels_decisions(runs, plan))
        started = time.perf_counter()
        fused, order, weights = self._fuse(query, runs, plan, request)
        if trace is not None:
            step = trace.add("fusion", came_in=len(fused), went_out=len(order), ms=_ms_since(started),
                             method="rrf (one ranking)" if plan.single else self.fusion.method, top_k=plan.k,
                             weights={"lexical": weights[0], "dense": weights[1]}, bm25_k1=plan.k1,
                             **({"signals": _signal_summary(runs.signals)} if runs.signals is not None else {}),
                             **({"exact": runs.exact} if runs.exact else {}),
                             top=[self.index.chunk_id(i) for i in order[:5]])  # fmt: skip
            if trace.detail:
                step.data = _fusion_inputs(runs, weights, self.index.chunk_id)
        return self._results(order, fused, runs, plan.k1)

    def _plan(self, variants: list[str], k: int) -> _Plan:
        """How deep each channel ranks and at which k1, for `k` results of these variants."""
        # One ranking alone: RRF keeps its order, so its first k are the answer.
        single = self._dense is None and not self.extra_channels and len(variants) == 1
        # score fusion reads each ranking's statistics over its best WINDOW, whatever k is
        fuses_scores = self._dense is not None and self.channels != "vector" and self.fusion.fuses_scores
        depth = k if single else max(k, self.rank_depth, WINDOW if fuses_scores else 0)
        # one k1 for every BM25 score of this query: ranked, fused, read as a signal, reported
        k1 = self.fusion.lexical_k1 if fuses_scores else self.k1
        return _Plan(variants, k, depth, k1, single)

    def _settle(self, plan: _Plan, runs: _Runs) -> _Plan:
        """`plan`, single after all when the extra channels ranked nothing (the lexical bridge on
        a same-language query) and BM25 alone is left: an extra channel that stays silent
        changes no result, as if it were not configured."""
        if plan.single or self._dense is not None or len(plan.variants) != 1:
            return plan
        silent = not any(ranking for _, _, run in runs.extra for ranking in run.rankings)
        return replace(plan, single=True) if silent else plan

    def _rank_channels(self, request: ChannelQuery, plan: _Plan) -> _Runs:
        """Every channel's rankings of every variant over the positions `request` allows."""
        ahead = self._dense.embed_ahead(request) if self._dense is not None else None  # while BM25 ranks
        try:
            tokens = [self.analyzer(variant) for variant in plan.variants]
            lexical = self.lexical.rank_tokens(tokens, request, k1=plan.k1)
        except BaseException:
            if ahead is not None:
                ahead.abandon()  # the search failed: its query vectors are not wanted
            raise
        runs = _Runs(tokens, lexical)
        if self._dense is not None:
            runs.view = self._dense.view_for(request)
            runs.dense, runs.query_vectors = self._dense.rank_with(runs.view, request, ahead)
            runs.vector_scores = runs.dense.best_scores()
        fused_extra = [] if self.channels == "vector" else self.extra_channels  # vector: the dense channel alone
        runs.extra = [(name, weight, ranker.rank(request)) for name, weight, ranker in fused_extra]
        if self.feedback.rm3 and self.channels != "vector":
            self._rm3(request, plan, runs)
        if self.feedback.rocchio and runs.dense is not None and runs.view is not None:
            self._rocchio(request, runs)
        return runs

    def _rm3(self, request: ChannelQuery, plan: _Plan, runs: _Runs) -> None:
        """RM3 on the query's own BM25 ranking (`feedback`): its second pass replaces it in fusion."""
        fb, first, scores = self.feedback, runs.lexical.rankings[0], runs.lexical.scores[0]
        top = first[: fb.depth]
        if not top:
            return
        texts = feedback_texts(self._source, top)
        expansion = relevance_model(texts, [scores[p] for p in top], self.analyzer, runs.tokens[0], fb.terms)
        if not expansion:
            return

        def search(tokens: list[str]) -> list[tuple[int, float]]:
            return self.index.search(tokens, plan.depth, k1=plan.k1, b=self.b, filters=request.filters, where=request.where)

        ranked, fed = rm3_ranking(self.index, runs.tokens[0], expansion, first, search, k1=plan.k1, b=self.b,
                                  weight=fb.lexical_weight, depth=plan.depth)  # fmt: skip
        runs.fed_lexical = ChannelRanking([ranked, *runs.lexical.rankings[1:]], [fed, *runs.lexical.scores[1:]])
        runs.feedback["rm3"] = {"passages": len(top), "terms": [[t, round(w, 4)] for t, w in expansion]}

    def _rocchio(self, request: ChannelQuery, runs: _Runs) -> None:
        """Rocchio on the query's own dense ranking (`feedback`): its second pass replaces it in fusion."""
        assert runs.dense is not None and runs.view is not None
        top = runs.dense.rankings[0][: self.feedback.depth]
        vectors_at = getattr(runs.view, "vectors_at", None)
        passages = vectors_at(top) if top and vectors_at is not None else np.zeros((0, 0))
        if not len(passages):
            return
        moved = rocchio_vector(runs.query_vectors[0], passages, self.feedback.dense_weight)
        ranked, fed = runs.view.rank(moved, request.allowed, request.depth)
        runs.fed_dense = ChannelRanking([ranked, *runs.dense.rankings[1:]], [fed, *runs.dense.scores[1:]])
        runs.feedback["rocchio"] = {"passages": len(passages), "weight": self.feedback.dense_weight}

    def _fuse(
        self, query: str, runs: _Runs, plan: _Plan, request: ChannelQuery
    ) -> tuple[dict[int, float], list[int], tuple[float, float]]:
        """(fused score per position, the best `plan.k` positions by (-fused, chunk_id), weights).
        The chunks holding one of the query's exact terms (`fusion.exact`) are lifted above the
        rest, whatever the weights (the cross-language rule included), except in
        channels="vector" (the dense channel alone)."""
        fed_lexical = runs.fed_lexical or runs.lexical
        lexical = fed_lexical.rankings
        if plan.single:
            order = lexical[0][: plan.k]
            return {p: 1.0 / (self.rrf_k + r) for r, p in enumerate(order, start=1)}, order, (1.0, 0.0)
        weights = self._weights(query, runs, plan.k1)
        fed_dense = runs.fed_dense or runs.dense
        dense = (fed_dense.rankings, fed_dense.scores) if fed_dense is not None else None
        extra = [(weight, (run.rankings, run.scores)) for _, weight, run in runs.extra]
        fused = self.fusion.fuse((lexical, fed_lexical.scores), dense, extra, weights,
                                 vector_only=self.channels == "vector", window=WINDOW)  # fmt: skip
        if self.channels != "vector":
            runs.exact = exact_terms(runs.tokens[0], self.index.df)
            if runs.exact:
                held, _ = self.index.scores(runs.exact, k1=plan.k1, b=self.b, filters=request.filters, where=request.where)
                fused = lift_exact(fused, held.tolist())
        positions = np.fromiter(fused, dtype=np.int64, count=len(fused))
        values = np.fromiter(fused.values(), dtype=np.float64, count=len(fused))
        order = [i for i, _ in best_k(positions, values, plan.k, self.index.chunk_id)]  # by (-fused, chunk_id)
        return fused, order, weights

    def _weights(self, query: str, runs: _Runs, k1: float) -> tuple[float, float]:
        """(lexical, dense) fusion weights for this query."""
        if self.channels == "vector":
            return 0.0, 1.0  # the dense rankings alone, whatever the fusion
        if runs.view is None:
            return 1.0, 0.0
        if self.fusion.reads_signals:
            first = (runs.tokens[0], runs.lexical.scores[0])
            dense = runs.dense.rankings if runs.dense is not None else []
            runs.signals = self._signals(query, first, runs.lexical.rankings[0], dense, runs.vector_scores, runs.view, k1)
            return self.fusion.weights_for(runs.signals)
        return self.fusion.weights(1.0)  # fixed weights (rrf, weighted): no signal is computed

    def _results(self, order: list[int], fused: dict[int, float], runs: _Runs, k1: float) -> list[RetrievalResult]:
        """The ranked positions as results, each with its best BM25 score and cosine over the
        variants (computed for positions a channel did not rank) and the extra channels' scores."""
        bm25 = self._best_bm25(order, list(zip(runs.tokens, runs.lexical.scores, strict=True)), k1)
        vector_scores = runs.vector_scores
        if runs.view is not None and vector_scores is not None:
            unscored = [i for i in order if i not in vector_scores]
            for query_vector in runs.query_vectors if unscored else []:
                for i, score in runs.view.scores_at(query_vector, unscored).items():
                    vector_scores[i] = max(score, vector_scores.get(i, -1.0))
        chunks = self._source.chunks_at(order)
        extra_scores = [(name, run.best_scores()) for name, _, run in runs.extra]
        if vector_scores is None and not extra_scores:  # BM25 alone: nothing more to look up
            return [RetrievalResult.lexical(chunk, bm25[i], fused[i]) for i, chunk in zip(order, chunks, strict=True)]
        return [
            RetrievalResult(
                chunk=chunk,
                bm25_score=bm25[i],
                vector_score=vector_scores.get(i) if vector_scores is not None else None,
                fused_score=fused[i],
                channel_scores=tuple((name, best[i]) for name, best in extra_scores if i in best),
            )
            for i, chunk in zip(order, chunks, strict=True)
        ]

    def _channels_decisions(self, runs: _Runs, plan: _Plan) -> dict[str, Any]:
        """What the channels step records: per channel, how many positions each variant ranked
        and the first ids of the query's own ranking."""
        chunk_id = self.index.chunk_id
        channels = [("lexical", runs.lexical)] + ([("dense", runs.dense)] if runs.dense is not None else [])
        channels += [(name, run) for name, _, run in runs.extra]
        decisions: dict[str, Any] = {
            "variants": plan.variants,
            "depth": plan.depth,
            **({"feedback": runs.feedback} if runs.feedback else {}),
            **{name: {"ranked": [len(r) for r in run.rankings],
                      "top": [chunk_id(p) for p in (run.rankings[0][:5] if run.rankings else [])], **run.notes}
               for name, run in channels},
        }  # fmt: skip
        rows = getattr(runs.view, "rows", None)  # a DenseView: each position's vector row (< 0: none)
        if "dense" in decisions and rows is not None:  # searchable before embedding ends: say how far
            shown = self.index.active_positions()  # what the caller may see: RESTRICTED never counted
            vectors = {"with_vector": int(np.count_nonzero(rows[shown] >= 0)), "active": int(len(shown))}
            decisions["dense"] = {"vectors": vectors, **decisions["dense"]}
        return decisions

    def lexical_match(self, tokens: Sequence[str], best_score: float) -> float:
        """How well the lexical channel matched: best BM25 score / Σ idf over the query's tokens
        (a token the corpus lacks counts with an unseen term's idf), clipped to [0, 1]."""
        return self._lexical_coverage(tokens, best_score, self.k1)[0]

    def _lexical_coverage(self, tokens: Sequence[str], best_score: float, k1: float) -> tuple[float, float]:
        """(`lexical_match`, share of the query's distinct tokens the visible corpus has). Σ idf
        does not depend on `k1`; the search's k1 is passed so its prepared terms are reused."""
        index = self.index
        if not tokens or not index.n_active:
            return 0.0, 0.0
        terms = index.query_terms(tokens, k1=k1, b=self.b)
        seen = {t.term: t for t in terms}
        unseen_idf = bm25_idf(index.n_active, 0)
        total = 0.0
        for token in tokens:
            term = seen.get(token)
            total += term.w1 / (k1 + 1.0) if term is not None else unseen_idf
        covered = sum(1 for t in set(tokens) if t in seen) / len(set(tokens))
        return (min(1.0, best_score / total) if total > 0 else 0.0), covered

    def _signals(
        self,
        query: str,
        first: tuple[list[str], dict[int, float]],
        lexical: list[int],
        dense: list[list[int]],
        vector_scores: dict[int, float] | None,
        view: DenseRanking,
        k1: float,
    ) -> QuerySignals:
        """What the fusion reads about this query: the first variant's BM25 match, gap and
        coverage, the dense channel's best cosines, the two top-10 lists' agreement, and
        whether the vectors' best answers are in another language (BM25 cannot see them).
        While some visible chunks have no vector yet (searching while embedding runs), the
        vectors' head is only the embedded part's: it never counts as crossing, so BM25 keeps
        its weight instead of the few embedded chunks ranking alone."""
        tokens, top = first
        best = sorted(top.values(), reverse=True)[:2]
        match, covered = self._lexical_coverage(tokens, best[0] if best else 0.0, k1)
        ranked = dense[0] if dense else []
        cosines = vector_scores or {}
        crossing = view.languages_crossed(query, ranked[:CROSS_DEPTH])
        if any(crossing) and not self._vectors_complete():
            crossing = []
        return QuerySignals(
            query=query,
            tokens=len(tokens),
            covered=covered,
            match=match,
            lexical_top=tuple(best),
            dense_top=tuple(cosines[p] for p in ranked[:2] if p in cosines),
            overlap=top_overlap(lexical, ranked),
            crosses=bool(crossing) and crossing[0],
            cross_share=sum(crossing) / len(crossing) if crossing else 0.0,
        )

    def _vectors_complete(self) -> bool:
        """Whether every chunk the dense channel may embed has its vector (`DenseCoverage.missing`,
        kept by the channel per attach: no per-query scan). RESTRICTED chunks a remote backend
        never sees are `lexical_only`, not missing, so they never change this; a lazy slot
        embeds what a query allows, so it is complete."""
        ranker = self._dense
        return ranker is None or ranker.view is None or ranker.dense.coverage().missing <= 0

    def check_where(self, where: Filter | Mapping[str, Any] | None) -> Filter | None:
        """Parse `where` and check every field it names can be filtered on here."""
        typed = parse_filter(where)
        names = fields_of(typed)
        unknown = sorted(n for n in names if n not in CORE_FIELDS)
        if unknown:
            blocked = [n for n in unknown if n in RESERVED_FIELDS]
            if blocked:
                raise ValueError(
                    f"cannot filter on {', '.join(blocked)}; filterable fields: "
                    f"{', '.join(CORE_FIELDS)} and user metadata"
                )
            known = self.index.metadata_keys()
            missing = [n for n in unknown if n not in known]
            if missing:
                listed = ", ".join(offered_metadata(known)) or "none"
                raise ValueError(
                    f"unknown filter field(s) {', '.join(missing)}: not one of "
                    f"{', '.join(CORE_FIELDS)}, and no document carries it as metadata "
                    f"(metadata fields present: {listed})"
                )
        return typed

    def _best_bm25(
        self, order: list[int], scored: list[tuple[list[str], dict[int, float]]], k1: float
    ) -> dict[int, float]:
        """Each ranked position's best BM25 score (at `k1`) over the query variants (0.0 when none)."""
        if len(scored) == 1 and scored[0][1].keys() >= set(order):  # one variant ranked them all
            return scored[0][1]
        best = {i: 0.0 for i in order}
        for tokens, top in scored:
            missing = [i for i in order if i not in top]
            if missing:
                top = {**top, **self.index.score_positions(tokens, missing, k1=k1, b=self.b)}
            for i in order:
                best[i] = max(best[i], top.get(i, 0.0))
        return best


def cosine(a: Sequence[float], b: Sequence[float]) -> float:
    """Cosine similarity; 0.0 when either vector is all zeros."""
    if len(a) != len(b):
        raise ValueError(f"vector dimensions differ: {len(a)} vs {len(b)}")
    dot = sum(x * y for x, y in zip(a, b))
    norm = math.sqrt(sum(x * x for x in a)) * math.sqrt(sum(y * y for y in b))
    return dot / norm if norm else 0.0
