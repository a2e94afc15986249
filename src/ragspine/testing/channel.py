"""The conformance suite every retrieval channel runs: allowed positions only, one ranking per
variant, distinct and scored, deterministic, fused beside BM25 without surfacing RESTRICTED.

Subclass `ChannelSuite` in a `Test*` class and give it a `channel` fixture (a `Channel`).
"""

from __future__ import annotations

from typing import Any

from ragspine.retrieval.model import Chunk
from ragspine.retrieval.pipeline.channels import AttachedChannel, Channel, ChannelQuery
from ragspine.retrieval.pipeline.hybrid import HybridRetriever, ListChunks
from ragspine.testing.suite import required_fixture

CHUNKS = [
    Chunk("a:0", "a", 0, "营收下滑的原因是出口订单减少。", "a#0", topic="revenue", language="zh"),
    Chunk("b:0", "b", 0, "Revenue fell because export orders dropped.", "b#0", topic="revenue", language="en"),
    Chunk("c:0", "c", 0, "The board approved a new dividend policy.", "c#0", topic="governance", language="en"),
    Chunk("d:0", "d", 0, "Revenue fell: the confidential layoffs memo.", "d#0", topic="revenue",
          sensitivity="RESTRICTED", language="en"),  # fmt: skip
    Chunk("e:0", "e", 0, "海外需求疲软，出口下降，营收减少。", "e#0", topic="revenue", language="zh"),
]
VARIANTS = ["revenue fell 营收下滑", "export orders 出口订单"]
RESTRICTED_POSITION = 3


def attached(channel: Channel) -> tuple[AttachedChannel, HybridRetriever]:
    """`channel` attached to the suite's corpus (RESTRICTED masked, as HybridRetriever does)."""
    retriever = HybridRetriever(CHUNKS)
    return channel.attach(retriever.index, ListChunks(CHUNKS)), retriever


class ChannelSuite:
    """Tests every channel must pass."""

    channel = required_fixture("channel", "ChannelSuite")

    def test_satisfies_the_protocol(self, channel: Any) -> None:
        assert isinstance(channel, Channel)
        assert isinstance(channel.name, str) and channel.name.strip()
        assert isinstance(channel.weight, (int, float)) and channel.weight >= 0
        ranker, _ = attached(channel)
        assert isinstance(ranker, AttachedChannel)

    def test_one_ranking_per_variant_distinct_scored_and_within_depth(self, channel: Any) -> None:
        ranker, retriever = attached(channel)
        run = ranker.rank(ChannelQuery(retriever.index, VARIANTS, 2))
        assert len(run.rankings) == len(VARIANTS) == len(run.scores)
        for ranking, scores in zip(run.rankings, run.scores, strict=True):
            assert len(ranking) == len(set(ranking)) <= 2
            assert all(p in scores and isinstance(scores[p], float) for p in ranking)

    def test_ranks_only_allowed_positions(self, channel: Any) -> None:
        ranker, retriever = attached(channel)
        for filters in ({}, {"topic": "governance"}, {"language": "zh"}, {"topic": "absent"}):
            query = ChannelQuery(retriever.index, VARIANTS, 10, filters)
            allowed = set(query.allowed.tolist())
            assert RESTRICTED_POSITION not in allowed
            for ranking in ranker.rank(query).rankings:
                assert set(ranking) <= allowed, (filters, ranking, allowed)

    def test_is_deterministic(self, channel: Any) -> None:
        ranker, retriever = attached(channel)
        first = ranker.rank(ChannelQuery(retriever.index, VARIANTS, 5))
        again = ranker.rank(ChannelQuery(retriever.index, VARIANTS, 5))
        assert first == again

    def test_fused_beside_bm25_never_surfaces_restricted(self, channel: Any) -> None:
        retriever = HybridRetriever(CHUNKS, extra_channels=[channel])
        results = retriever.search(VARIANTS[0], top_k=10)
        assert all(r.chunk.sensitivity != "RESTRICTED" for r in results)
        assert all(name == channel.name for r in results for name, _ in r.channel_scores)
