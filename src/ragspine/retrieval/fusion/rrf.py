"""Reciprocal Rank Fusion: score(d) = Σ 1 / (k + rank_d), ranks counted from 1."""

from __future__ import annotations

from collections.abc import Hashable, Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import TypeVar

from ragspine import catalog
from ragspine.retrieval.fusion.learned import LearnedFusion, load_model
from ragspine.retrieval.fusion.signals import QuerySignals
from ragspine.retrieval.fusion.zscore import WINDOW, zscore_fuse

DEFAULT_RRF_K = 60
K = TypeVar("K", bound=Hashable)
TIE_WEIGHT = 1e-6  # stands in for a fusion weight of 0
#: One channel's run as fusion reads it: per query variant, the ranked ids (best first) and scores.
Run = tuple[Sequence[Sequence[K]], Sequence[Mapping[K, float]]]


def rrf_fuse(rankings: Iterable[Sequence[K]], k: int = DEFAULT_RRF_K) -> dict[K, float]:
    """Fuse ranked id lists; an id absent from a list gets nothing from it.

    >>> rrf_fuse([["a", "b"], ["b"]], k=60) == {"a": 1 / 61, "b": 1 / 62 + 1 / 61}
    True
    """
    if k < 0:
        raise ValueError(f"RRF k must be >= 0, got {k}")
    fused: dict[K, float] = {}
    for ranking in rankings:
        for rank, item in enumerate(ranking, start=1):
            fused[item] = fused.get(item, 0.0) + 1.0 / (k + rank)
    return fused


def weighted_rrf(rankings: Iterable[tuple[Sequence[K], float]], k: int = DEFAULT_RRF_K) -> dict[K, float]:
    """RRF with a weight per ranking: score(d) = Σ w / (k + rank_d). All weights 1.0 is `rrf_fuse`.

    >>> weighted_rrf([(["a", "b"], 1.0), (["b"], 0.5)], k=60) == {"a": 1 / 61, "b": 1 / 62 + 0.5 / 61}
    True
    """
    if k < 0:
        raise ValueError(f"RRF k must be >= 0, got {k}")
    fused: dict[K, float] = {}
    for ranking, weight in rankings:
        if weight < 0:
            raise ValueError(f"RRF weights must be >= 0, got {weight}")
        for rank, item in enumerate(ranking, start=1):
            fused[item] = fused.get(item, 0.0) + weight / (k + rank)
    return fused


FUSION_METHODS = catalog.FUSION_METHODS  # declared with the setting's Literal, ragspine.catalog
# zscore's dense share, chosen by `python -m bench.fusion_learn lodo` on every shared set's
# train/dev records (never test): the share whose worst set is best against that set's BM25
# order and its plain RRF (docs/benchmarks.md, "Score fusion"). 0.45 with BM25 at k1 1.5;
# re-chosen with BM25 at DEFAULT_LEXICAL_K1 (docs/benchmarks.md, "BM25's k1 under score fusion").
DEFAULT_DENSE_SHARE = 0.5
# BM25's k1 for the lexical scores zscore standardises (the lexical channel's k1 under zscore;
# BM25 alone keeps the specification's 1.5). A lower k1 saturates term frequency sooner, so a
# chunk repeating one query word no longer stands out in z. Chosen with `bench.fusion_k1` on
# the train/dev splits, at DEFAULT_DENSE_SHARE and at the share chosen before it (0.45): 0.4 both
# times (docs/benchmarks.md, "BM25's k1 under score fusion").
DEFAULT_LEXICAL_K1 = 0.4


def _ramp(value: float, high: float, low: float) -> float:
    """1.0 at or below `low`, 0.0 at or above `high`, linear in between."""
    if value >= high:
        return 0.0
    if value <= low:
        return 1.0
    return (high - value) / (high - low)


@dataclass(frozen=True)
class Fusion:
    """How the lexical and dense rankings are combined.

    - zscore (the default): score fusion, not RRF. Each ranking's own scores (BM25, cosines)
      become z-scores over that ranking and are summed with weights 2 · (1 − `dense_share`) for
      the lexical rankings and 2 · `dense_share` for the dense ones (`zscore.zscore_fuse`). A
      query whose dense head holds a chunk in another language than the query is ranked by the
      vectors alone (BM25 cannot see a translation; it then only orders what they did not rank).
      A clear BM25 winner stands far above the other BM25 scores and keeps its place; a close
      BM25 race (many chunks that contain every query word) leaves the vectors to decide.
      The BM25 scores it standardises are computed with k1 = `lexical_k1` (0.4; BM25 alone
      keeps the specification's 1.5), so term repetition counts for less than which words match.
    Every other method is weighted RRF over the ranks:
    - learned: the weights a logistic model gives this query from its `QuerySignals`
      (`learned.LearnedFusion`; `model`, else the one shipped with the package).
    - rrf: every ranking weight 1.0 (`rrf_fuse`).
    - weighted: lexical rankings weigh `lexical_weight`, dense rankings `dense_weight`.
    - adaptive: the weights follow two facts about this query's BM25 result, both read from
      the lexical index already in memory (deterministic, no extra search):
      `match` = best BM25 score / Σ idf of the query's tokens (a token the corpus lacks counts
      with an unseen term's idf), clipped to [0, 1]: how much of the query the best lexical hit
      covers; `gap` = (best − second best BM25 score) / best: how clearly BM25 picked a winner.
      With t_match = 1 at match <= match_low, 0 at match >= match_high (linear between) and
      t_gap = 1 at gap 0, 0 at gap >= gap_high:
        dense  = d + t_match · (dense_high − d), where d = dense_low + t_gap · (dense_mid − dense_low)
        lexical = lexical_weight + t_match · (lexical_low − lexical_weight)
      A query the corpus vocabulary covers, with a clear BM25 winner (a Chinese question quoting
      a Chinese passage) leans on BM25; a close BM25 race lets the vectors break it; a query the
      vocabulary does not cover (a Chinese question over English text) leans on the vectors,
      and BM25's matches on common words stop outvoting them.
    """

    method: str = "zscore"
    k: int = DEFAULT_RRF_K
    lexical_weight: float = 1.0
    dense_weight: float = 1.0
    # Defaults chosen by `python -m bench.fusion_tune grid` on SciFact train, CMRC2018 dev and
    # DRCD dev (never test): every set >= +0.001 nDCG@10 over BM25, then the best mean gain.
    # dense_high and lexical_low act only on queries BM25 barely matches, and on cross-language
    # queries (match counts as 0 when a chunk in the dense top 3 is in another language),
    # both rare in those sets: set on principle (there BM25 ranks common-word matches: the vectors
    # alone decide; RRF is so flat near the top that even a 0.1 BM25 weight reorders them),
    # then checked on bench/data/crosslingual.
    dense_low: float = 0.0
    dense_mid: float = 0.4
    dense_high: float = 2.0
    match_low: float = 0.15
    match_high: float = 0.35
    gap_high: float = 0.15
    lexical_low: float = 0.0
    model: LearnedFusion | None = None  # learned only; None: the shipped model
    dense_share: float = DEFAULT_DENSE_SHARE  # zscore only
    lexical_k1: float = DEFAULT_LEXICAL_K1  # zscore only: BM25's k1 for the scores it fuses

    def __post_init__(self) -> None:
        if self.method not in FUSION_METHODS:
            raise ValueError(f"unknown fusion method {self.method!r}; valid: {', '.join(FUSION_METHODS)}")
        if self.k < 0:
            raise ValueError(f"RRF k must be >= 0, got {self.k}")
        weights = (self.lexical_weight, self.dense_weight, self.dense_low, self.dense_mid, self.dense_high, self.lexical_low)
        if min(weights) < 0:
            raise ValueError("fusion weights must be >= 0")
        if not 0.0 <= self.match_low < self.match_high <= 1.0:
            raise ValueError(
                f"need 0 <= match_low < match_high <= 1, got {self.match_low} and {self.match_high}"
            )
        if not 0.0 < self.gap_high <= 1.0:
            raise ValueError(f"need 0 < gap_high <= 1, got {self.gap_high}")
        if not 0.0 <= self.dense_share <= 1.0:
            raise ValueError(f"need 0 <= dense_share <= 1, got {self.dense_share}")
        if not 0.0 < self.lexical_k1 < float("inf"):
            raise ValueError(f"need a finite lexical_k1 > 0, got {self.lexical_k1}")

    @property
    def reads_signals(self) -> bool:
        """Whether the weights depend on the query (zscore, adaptive, learned): only then does
        the retriever compute its `QuerySignals`; rrf and weighted have fixed weights."""
        return self.method in ("zscore", "adaptive", "learned")

    @property
    def fuses_scores(self) -> bool:
        """Whether the rankings' scores are fused (zscore) rather than their ranks (RRF)."""
        return self.method == "zscore"

    def weights_for(self, signals: QuerySignals) -> tuple[float, float]:
        """(lexical weight, dense weight) for one query: the learned model's, or `weights` with
        the query's match (0 when a chunk among the dense top `signals.CROSS_DEPTH` is in another
        language than the query: BM25 cannot see a translation) and gap."""
        if self.method == "learned":
            return (self.model or load_model()).weights(signals)
        if self.method == "zscore":
            return (0.0, 2.0) if signals.crossing else self.weights(signals.match)
        return self.weights(0.0 if signals.crossing else signals.match, signals.gap)

    def weights(self, match: float, gap: float = 1.0) -> tuple[float, float]:
        """(lexical weight, dense weight) for a query whose lexical match and gap are given
        (the learned method needs the whole `QuerySignals`: `weights_for`)."""
        if self.method == "learned":
            raise ValueError("the learned fusion reads every query signal: call weights_for(signals)")
        if self.method == "rrf":
            return 1.0, 1.0
        if self.method == "zscore":
            return 2.0 * (1.0 - self.dense_share), 2.0 * self.dense_share
        if self.method == "weighted":
            return self.lexical_weight, self.dense_weight
        t_match = _ramp(match, self.match_high, self.match_low)
        t_gap = _ramp(gap, self.gap_high, 0.0)
        settled = self.dense_low + t_gap * (self.dense_mid - self.dense_low)
        return (
            self.lexical_weight + t_match * (self.lexical_low - self.lexical_weight),
            settled + t_match * (self.dense_high - settled),
        )

    def describe(self) -> str:
        """One line for `config show` and /stats, e.g. "adaptive (k=60; dense weight 0.3-3 ...)"."""
        if self.method == "zscore":
            lexical, dense = self.weights(1.0)
            return (
                f"zscore (dense share {self.dense_share:g}: z-scores of each channel's scores, lexical "
                f"{lexical:g} + dense {dense:g}, BM25 at k1 {self.lexical_k1:g}; the vectors alone "
                "when their head is in another language)"
            )
        if self.method == "learned":
            return f"learned (k={self.k}; per-query weights from the shipped logistic model, docs/dense.md)"
        if self.method == "rrf":
            return f"rrf (k={self.k}; every ranking weight 1)"
        if self.method == "weighted":
            return f"weighted (k={self.k}; lexical {self.lexical_weight:g}, dense {self.dense_weight:g})"
        return (
            f"adaptive (k={self.k}; lexical {self.lexical_low:g}, dense {self.dense_high:g} at BM25 "
            f"match <= {self.match_low:g}; at match >= {self.match_high:g}: lexical "
            f"{self.lexical_weight:g}, dense {self.dense_low:g} at gap >= {self.gap_high:g} up to "
            f"{self.dense_mid:g} at gap 0)"
        )

    def fuse(
        self,
        lexical: Run[K],
        dense: Run[K] | None,
        extra: Sequence[tuple[float, Run[K]]],
        weights: tuple[float, float],
        *,
        vector_only: bool = False,
        window: int = WINDOW,
    ) -> dict[K, float]:
        """The fused score of every id some ranking returned: the one place rankings are combined.

        `lexical`, `dense` (None: no dense channel ran) and each extra channel's run (with its
        weight) give one ranking per query variant; `weights` are (lexical, dense) for this
        query (`weights_for`). `vector_only`: the dense rankings alone, by RRF. A zero weight
        becomes `TIE_WEIGHT`: that channel then only orders the ids the others did not rank (a
        chunk without a vector still comes back, behind the rest). zscore fuses the rankings'
        scores over each one's best `window` (an extra channel's score map may hold ids it did
        not rank: only the ranked ones are fused); every other method, or zscore without a
        dense channel, fuses ranks (weighted RRF).
        """
        w_lexical, w_dense = weights
        if vector_only:
            return weighted_rrf([(r, w_dense) for r in (dense[0] if dense else [])], k=self.k)
        w_lexical, w_dense = max(w_lexical, TIE_WEIGHT), max(w_dense, TIE_WEIGHT)
        if self.fuses_scores and dense is not None:
            scored = [(sc, w_lexical, window) for sc in lexical[1]]
            scored += [(sc, w_dense, window) for sc in dense[1]]
            scored += [({p: scores[p] for p in ranking}, weight, window)
                       for weight, (rankings, all_scores) in extra
                       for ranking, scores in zip(rankings, all_scores, strict=True)]  # fmt: skip
            return zscore_fuse(scored)
        runs = [(r, w_lexical) for r in lexical[0]]
        runs += [(r, w_dense) for r in (dense[0] if dense is not None else [])]
        runs += [(r, weight) for weight, (rankings, _) in extra for r in rankings]
        return weighted_rrf(runs, k=self.k)  # positions stand in for chunk ids
