"""The channel slot: each channel ranks index positions per query variant; fusion combines them.

    from ragspine.retrieval.pipeline.channels import make_channel
    extra = make_channel("my_pkg.channels:SparseChannel")        # a class of your own
    HybridRetriever(chunks, extra_channels=[extra])               # fused beside BM25 (+ dense)

A `Channel` is attached to one index snapshot (`attach(index, source)`, once per snapshot; it
may keep state such as vectors across snapshots) and the attached ranker answers
`rank(ChannelQuery) -> ChannelRanking`.

Invariants (checked for every channel by `ragspine.testing.channel.ChannelSuite`):
- A channel ranks only positions in `query.allowed`: the metadata filter and the RESTRICTED mask
  were applied before it runs, so it can never bring back what the filter or the mask removed.
- It returns one ranking per query variant, in the variants' order; a ranking holds distinct
  positions, best first, at most `query.depth` of them, and every ranked position has a score in
  that variant's score map. Higher scores are better: the default fusion (`zscore`) reads the
  scores of the ranked positions, not only their order (a score map's other entries are shown
  as `channel_scores` and never fused).
- The same query over the same snapshot gives the same rankings (ties broken by position).
The lexical (BM25) and dense channels are built in (`LexicalChannel`, `DenseSlot`); extra
channels (RAGSPINE_EXTRA_CHANNELS, `make_channel`) are fused beside them with their `weight`.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from functools import cached_property
from typing import Any, Protocol, runtime_checkable

import numpy as np

from ragspine import catalog
from ragspine.background import DaemonCall, DaemonPool
from ragspine.registry import Registry
from ragspine.retrieval.filters import Filter
from ragspine.retrieval.lexical.bm25 import DEFAULT_BM25_B, DEFAULT_BM25_K1
from ragspine.retrieval.lexical.index.snapshot import IndexSnapshot
from ragspine.retrieval.lexical.tokenize import tokenize
from ragspine.retrieval.types import ChunkSource
from ragspine.retrieval.vector.dense.channel import DenseChannel, DenseRanking
from ragspine.retrieval.vector.dense.ranking import adopt_recent, recent_state
from ragspine.retrieval.vector.embeddings.support import is_remote

Ahead = DaemonCall[tuple[list[np.ndarray], Any]]  # a query's vectors being made, and the worker's recent state
# Query embeddings started ahead: a daemon worker per search in flight, kept idle between
# searches (no thread start per search; concurrent searches never queue behind one another).
_AHEAD = DaemonPool("ragspine-query-embed")


@dataclass
class ChannelQuery:
    """One search as every channel sees it: the screened query variants (the query first), how
    deep to rank, and the metadata filter; `allowed` is every position the filter and the
    RESTRICTED mask let through, ascending (computed on first use)."""

    index: IndexSnapshot
    variants: Sequence[str]
    depth: int
    filters: Mapping[str, str] = field(default_factory=dict)
    where: Filter | None = None

    @cached_property
    def allowed(self) -> np.ndarray:
        return self.index.allowed_positions(self.filters, self.where)


@dataclass(frozen=True)
class ChannelRanking:
    """Per query variant: the ranked positions (best first) and their scores; `notes`: what the
    channel wants the trace's channels step to show (e.g. the lexical bridge's terms)."""

    rankings: list[list[int]]
    scores: list[dict[int, float]]
    notes: dict[str, Any] = field(default_factory=dict)

    def best_scores(self) -> dict[int, float]:
        """Each ranked position's best score over the variants."""
        best: dict[int, float] = {}
        for scores in self.scores:
            for position, score in scores.items():
                if position not in best or score > best[position]:
                    best[position] = score
        return best


@runtime_checkable
class AttachedChannel(Protocol):
    """A channel bound to one index snapshot."""

    def rank(self, query: ChannelQuery) -> ChannelRanking: ...


@runtime_checkable
class Channel(Protocol):
    """A retrieval channel: `name` (lineage and score keys), `weight` (its fusion weight as an
    extra channel) and `attach`, called once per index snapshot."""

    name: str
    weight: float

    def attach(self, index: IndexSnapshot, source: ChunkSource) -> AttachedChannel: ...


class LexicalChannel:
    """BM25 over the snapshot's inverted index (the analyzer must be the one it was built with)."""

    name = "lexical"
    weight = 1.0

    def __init__(
        self,
        *,
        k1: float = DEFAULT_BM25_K1,
        b: float = DEFAULT_BM25_B,
        analyzer: Callable[[str], list[str]] = tokenize,
    ) -> None:
        self.k1, self.b, self.analyzer = k1, b, analyzer

    def attach(self, index: IndexSnapshot, source: ChunkSource) -> LexicalRanker:
        return LexicalRanker(self, index)


class LexicalRanker:
    """BM25 rankings over one snapshot; `rank_tokens` takes already tokenised variants."""

    def __init__(self, channel: LexicalChannel, index: IndexSnapshot) -> None:
        self.channel, self.index = channel, index

    def rank(self, query: ChannelQuery) -> ChannelRanking:
        return self.rank_tokens([self.channel.analyzer(v) for v in query.variants], query)

    def rank_tokens(
        self, tokens: Sequence[Sequence[str]], query: ChannelQuery, *, k1: float | None = None
    ) -> ChannelRanking:
        """BM25 rankings of each token list; `k1` replaces the channel's for this call."""
        rankings: list[list[int]] = []
        scores: list[dict[int, float]] = []
        k1 = self.channel.k1 if k1 is None else k1
        for variant_tokens in tokens:
            top = self.index.search(
                variant_tokens, query.depth, k1=k1, b=self.channel.b,
                filters=query.filters, where=query.where,
            )  # fmt: skip
            rankings.append([p for p, _ in top])
            scores.append(dict(top))
        return ChannelRanking(rankings, scores)


class DenseSlot:
    """The dense channel in the slot: cosine over chunk vectors (`DenseChannel`), every query
    variant embedded in one backend call, each distinct text once. `lazy`: the vectors of the
    allowed chunks that have none yet are made per query (a list given with only a backend)."""

    name = "dense"
    weight = 1.0

    def __init__(self, dense: DenseChannel, *, lazy: bool = False) -> None:
        self.dense, self.lazy = dense, lazy

    def attach(self, index: IndexSnapshot, source: ChunkSource) -> DenseRanker:
        view = None if self.lazy else self.dense.attach(index, source)
        return DenseRanker(self.dense, index, source, view)


class DenseRanker:
    """Dense rankings over one snapshot; `view_for` is the view a query ranks on (also used for
    the fusion's language check and for scoring positions the channel did not rank)."""

    ahead = True  # embed the query while BM25 ranks (`embed_ahead`); False: one after the other

    def __init__(
        self, dense: DenseChannel, index: IndexSnapshot, source: ChunkSource, view: DenseRanking | None
    ) -> None:
        self.dense, self.index, self.source, self.view = dense, index, source, view

    def view_for(self, query: ChannelQuery) -> DenseRanking:
        if self.view is not None:
            return self.view
        return self.dense.view_over(self.index, self.source, query.allowed)

    def rank(self, query: ChannelQuery) -> ChannelRanking:
        return self.rank_with(self.view_for(query), query)[0]

    def embed_ahead(self, query: ChannelQuery) -> Ahead | None:
        """`query`'s vectors (`rank_with`'s), being made on a daemon worker thread
        (`background.DaemonPool`: in the caller's context variables; an exiting interpreter
        does not wait for it) while the caller ranks BM25: the encoder (ONNX Runtime, numpy's
        BLAS) releases the GIL, so on two cores the two overlap. None (embedded in
        `rank_with`, as before) when `ahead` is off, the view is made per query (lazy), the
        backend is remote (the query leaves the machine only once the search got that far),
        or no thread can be started. The same vectors either way: one backend call;
        `rank_with` makes the worker's `recent_query_vector` the caller's. A caller that stops
        before `rank_with` calls `abandon` on it."""
        if not self.ahead or self.view is None or is_remote(self.dense.backend):
            return None
        view, variants = self.view, list(query.variants)

        def embed() -> tuple[list[np.ndarray], Any]:
            return view.embed_queries(variants), recent_state()

        try:
            return _AHEAD.submit(embed)
        except RuntimeError:  # no thread to be had (interpreter shutdown, thread limit)
            return None

    def rank_with(
        self, view: DenseRanking, query: ChannelQuery, ahead: Ahead | None = None
    ) -> tuple[ChannelRanking, list[Any]]:
        """The rankings on `view`, and the query vectors (one per variant); `ahead`: those
        vectors from `embed_ahead` (its error, if any, is raised here)."""
        variants = list(query.variants)
        if ahead is not None:
            vectors, recent = ahead.result()
            adopt_recent(recent)
        else:
            vectors = view.embed_queries(variants)  # one batch, each distinct text once
        done: dict[str, tuple[list[int], dict[int, float]]] = {}
        rankings: list[list[int]] = []
        scores: list[dict[int, float]] = []
        for variant, vector in zip(variants, vectors, strict=True):
            if variant not in done:
                done[variant] = view.rank(vector, query.allowed, query.depth)
            ranked, ranked_scores = done[variant]
            rankings.append(ranked)
            scores.append(ranked_scores)
        return ChannelRanking(rankings, scores), vectors


#: Extra channels by name. None ships built in yet beyond the two the pipeline always has;
#: a dotted path names a class of your own (built with no options).
EXTRA_CHANNELS: Registry[Channel] = catalog.EXTRA_CHANNELS.bind(Channel)


def make_channel(spec: str, **options: Any) -> Channel | None:
    """The extra channel `spec` names (None for "none"); errors list the valid names."""
    return EXTRA_CHANNELS.make(spec, **options)


def make_channels(spec: str) -> list[Channel]:
    """Every channel of a comma-separated list ("" or "none": no extra channel), in order;
    a name given twice is an error."""
    names = [part.strip() for part in spec.split(",") if part.strip()]
    channels = [c for c in (make_channel(name) for name in names) if c is not None]
    seen = [c.name for c in channels]
    duplicated = sorted({n for n in seen if seen.count(n) > 1} | ({"lexical", "dense"} & set(seen)))
    if duplicated:
        raise ValueError(
            f"channel name(s) {', '.join(duplicated)} given twice (lexical and dense are always "
            "built in): name each extra channel once"
        )
    return channels
