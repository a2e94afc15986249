"""The pipeline's stage slots: one Protocol, one registry factory, one setting and one conformance
suite per stage; empty slots give the pipeline without that stage; filled slots run in the product
path (`ragspine.open`, which builds through `ragspine.assembly`)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

import ragspine
from ragspine.assembly import build_retriever, load_settings
from ragspine.registry import Entry, Registry
from ragspine.retrieval.chunking.factory import CHUNKERS, INDEX_TEXTS, ParagraphChunker, make_chunker
from ragspine.retrieval.fusion.rrf import FUSION_METHODS
from ragspine.retrieval.link.narrative_link import build_narrative_retriever
from ragspine.retrieval.link.routers import ROUTERS
from ragspine.retrieval.model import Chunk, DocumentMeta
from ragspine.retrieval.postprocess import POSTPROCESSORS, PostprocessorError, make_postprocessor
from ragspine.retrieval.query.factory import QUERY_REWRITERS
from ragspine.retrieval.rerank.cross_encoder import RERANKERS, make_reranker
from ragspine.retrieval.rerank.llm_judge import ProviderListwiseJudge
from ragspine.retrieval.types import RetrievalResult
from ragspine.settings import config
from ragspine.settings.config import ConfigError
from ragspine.testing.chunker import ChunkerSuite
from ragspine.testing.postprocessor import PostprocessorSuite
from ragspine.testing.reranker import RerankerSuite

DOCS = {
    "r1": ("营收下滑的原因是出口订单减少，海外需求疲软。", "PUBLIC"),
    "r2": ("Revenue fell because export orders dropped and overseas demand was weak.", "PUBLIC"),
    "r3": ("营收下滑 revenue fell: the CEO salary and layoffs plan (confidential memo).", "RESTRICTED"),
    "r4": ("Revenue grew in the domestic market thanks to new products.", "INTERNAL"),
}
QUERY = "营收下滑 revenue fell"


# -- implementations a user would write (reached by dotted path) ------------------------------
class ReverseReranker:
    """Reverses the order it is given; records every text it saw."""

    seen: list[str] = []

    def rerank(self, query: str, candidates: list[str]) -> list[int]:
        ReverseReranker.seen.extend(candidates)
        return list(range(len(candidates)))[::-1]


class KeepTwo:
    """Keeps the first two results, best last."""

    def process(self, query: str, results: list[RetrievalResult]) -> list[RetrievalResult]:
        return results[:2][::-1]


class Inventor:
    """Breaks the contract: returns a result it was not given."""

    def process(self, query: str, results: list[RetrievalResult]) -> list[RetrievalResult]:
        fake = Chunk("made-up", "x", 0, "invented", "x#0")
        return [*results, RetrievalResult(fake, 0.0, None, 1.0)]


class NotAReranker:
    pass


class EchoProvider:
    """Stands in for an LLM endpoint (a user would never run it): always answers "[2] > [1]"."""

    def chat(self, messages: list[dict[str, str]], **options: Any) -> str:
        return "[2] > [1]"


# -- conformance suites on the shipped implementations ---------------------------------------
class TestParagraphChunker(ChunkerSuite):
    @pytest.fixture
    def chunker(self) -> ParagraphChunker:
        return ParagraphChunker(max_chars=200, overlap_chars=40)


class TestProviderJudge(RerankerSuite):
    @pytest.fixture
    def reranker(self) -> ProviderListwiseJudge:
        return ProviderListwiseJudge(EchoProvider())


class TestUserReranker(RerankerSuite):
    @pytest.fixture
    def reranker(self) -> Any:
        return make_reranker("test_spine:ReverseReranker")


class TestUserPostprocessor(PostprocessorSuite):
    @pytest.fixture
    def postprocessor(self) -> Any:
        return make_postprocessor("test_spine:KeepTwo")


# -- registries and settings -----------------------------------------------------------------
@pytest.mark.parametrize(
    ("choices", "registry"),
    [(config.CHUNKERS, CHUNKERS), (config.INDEX_TEXTS, INDEX_TEXTS), (config.RERANKERS, RERANKERS),
     (config.POSTPROCESSORS, POSTPROCESSORS), (config.ROUTERS, ROUTERS),
     (config.QUERY_REWRITERS, QUERY_REWRITERS)],  # fmt: skip
    ids=["chunker", "index_text", "reranker", "postprocessor", "router", "query_rewriter"],
)
def test_each_setting_accepts_exactly_its_registry_names(choices: tuple[str, ...], registry: Registry[Any]) -> None:
    assert list(choices) == registry.names


def test_fusion_setting_names_the_fusion_methods() -> None:
    assert config.FUSION_METHODS == FUSION_METHODS


def test_registry_errors_come_from_the_registry() -> None:
    registry: Registry[Any] = Registry("widget", {"a": Entry(dict), "b": Entry(list)})
    with pytest.raises(ValueError, match=r"unknown widget 'c'; valid: a, b, or a dotted path"):
        registry.make("c")
    with pytest.raises(ValueError, match=r"chunker 'paragraph': unknown option\(s\) size; valid: max_chars, overlap_chars"):
        make_chunker("paragraph", size=3)
    with pytest.raises(TypeError, match="does not implement the Reranker protocol"):
        make_reranker("test_spine:NotAReranker")
    with pytest.raises(ImportError, match="no attribute 'Missing'"):
        make_reranker("test_spine:Missing")
    with pytest.raises(ValueError, match="max_chars"):
        make_chunker("paragraph", max_chars=0)


def test_settings_take_names_or_dotted_paths_and_refuse_the_rest(tmp_path: Path) -> None:
    settings = load_settings({"RAGSPINE_RERANKER": "test_spine:ReverseReranker", "RAGSPINE_CHUNKER": "PARAGRAPH",
                              "RAGSPINE_POSTPROCESSOR": "none"})  # fmt: skip
    assert (settings.reranker, settings.chunker) == ("test_spine:ReverseReranker", "paragraph")
    with pytest.raises(ConfigError, match=r"RAGSPINE_CHUNKER='sentences' \(from environment\).*paragraph"):
        load_settings({"RAGSPINE_CHUNKER": "sentences"})
    with pytest.raises(ConfigError, match="RAGSPINE_RERANKER='llm' needs an LLM"):
        load_settings({"RAGSPINE_RERANKER": "llm"})
    with pytest.raises(ConfigError, match="RAGSPINE_ROUTER='llm' needs an LLM"):
        load_settings({"RAGSPINE_ROUTER": "llm"})


# -- the pipeline ----------------------------------------------------------------------------
def _ingest(retriever: Any) -> None:
    for doc_id, (text, label) in DOCS.items():
        retriever.index.ingest(text, DocumentMeta(doc_id, sensitivity=label))


def test_empty_slots_give_the_pipeline_without_those_stages() -> None:
    settings = load_settings({"RAGSPINE_DB": ":memory:", "RAGSPINE_RETRIEVAL_MODE": "bm25"})
    assembled, store_a = build_retriever(settings)
    plain, store_b = build_narrative_retriever(":memory:")
    try:
        assert assembled.postprocessor is None and assembled.index.reranker is None
        _ingest(assembled)
        _ingest(plain)
        assert assembled.retrieve(QUERY) == plain.retrieve(QUERY)
        assert [s["doc_id"] for s in plain.retrieve(QUERY)][:3] == ["r1", "r2", "r4"][: len(plain.retrieve(QUERY))]
    finally:
        store_a.close()
        store_b.close()


def test_the_specifications_second_example_shape_runs_with_a_reranker_and_a_chain() -> None:
    ReverseReranker.seen = []
    retriever, store = build_narrative_retriever(
        ":memory:",
        EchoProvider(),  # a judge is configured too: the reranker takes precedence
        reranker=make_reranker("test_spine:ReverseReranker"),
        postprocessor=make_postprocessor("test_spine:KeepTwo"),
    )
    try:
        _ingest(retriever)
        # Exit #1 in depth: the unmasked candidates (by default r3 is masked before scoring).
        fused = [r.chunk.doc_id for r in retriever.index.retrieve(QUERY, rerank=False, include_restricted=True)]
        reranked = [r.chunk.doc_id for r in retriever.index.retrieve(QUERY, include_restricted=True)]
        open_fused = [d for d in fused if d != "r3"]
        assert [d for d in reranked if d != "r3"] == open_fused[::-1]
        assert reranked.index("r3") == fused.index("r3")  # RESTRICTED keeps its fused slot
        assert not any("CEO salary" in t for t in ReverseReranker.seen)
        snippets = retriever.retrieve(QUERY)
        open_reranked = [d for d in reranked if d != "r3"]
        assert [s["doc_id"] for s in snippets] == open_reranked[:2][::-1]
    finally:
        store.close()


def test_a_post_processor_that_adds_a_result_is_refused() -> None:
    retriever, store = build_narrative_retriever(":memory:", postprocessor=make_postprocessor("test_spine:Inventor"))
    try:
        _ingest(retriever)
        with pytest.raises(PostprocessorError, match="Inventor returned results it was not given"):
            retriever.retrieve(QUERY)
    finally:
        store.close()


def test_settings_fill_the_slots_in_the_product_path(tmp_path: Path) -> None:
    ReverseReranker.seen = []
    with ragspine.open(tmp_path / "ws", retrieval_mode="bm25", reranker="test_spine:ReverseReranker",
                       postprocessor="test_spine:KeepTwo") as ws:  # fmt: skip
        for doc_id, (text, label) in DOCS.items():
            ws.ingest(text, doc_id=doc_id, sensitivity=label)
        hits = ws.search(QUERY)
        assert len(hits) == 2 and "r3" not in {h["doc_id"] for h in hits}
        assert ReverseReranker.seen and not any("CEO salary" in t for t in ReverseReranker.seen)
        stages = ws.stats()["channels"]
        assert (stages["reranker"], stages["postprocessor"]) == ("test_spine:ReverseReranker", "test_spine:KeepTwo")


def test_a_chunker_named_in_settings_cuts_what_ragspine_open_ingests(tmp_path: Path) -> None:
    with ragspine.open(tmp_path / "ws", retrieval_mode="bm25", chunker="test_spine:Sentences") as ws:
        ws.ingest("营收下滑。出口减少。", doc_id="d", sensitivity="PUBLIC")
        assert [c["text"] for c in ws.chunks("d")] == ["营收下滑。", "出口减少。"]


class Sentences:
    """One chunk per sentence ending in 。 (a user's chunker, for the test above)."""

    def chunk(self, text: str, meta: DocumentMeta) -> list[Chunk]:
        out, start = [], 0
        for end in [i + 1 for i, ch in enumerate(text) if ch == "。"]:
            out.append(Chunk(f"{meta.doc_id}:{len(out)}", meta.doc_id, len(out), text[start:end],
                             f"{meta.doc_id}@{start}-{end}", sensitivity=meta.sensitivity))  # fmt: skip
            start = end
        return out


class Upper:
    """A user's rewriter: the query, then the query upper-cased; records what it was asked."""

    asked: list[str] = []

    def rewrite(self, query: str) -> list[str]:
        Upper.asked.append(query)
        return [query, query.upper()]


def test_the_query_rewriter_slot(tmp_path: Path) -> None:
    assert [s.query_rewriter for s in (load_settings({}), load_settings({"RAGSPINE_QUERY_REWRITER": "NONE"}))] == [
        "glossary", "none"]  # fmt: skip
    with ragspine.open(tmp_path / "a", retrieval_mode="bm25", query_rewriter="none") as ws:
        assert ws.retriever.index.query_rewriter is None
        assert ws.stats()["channels"]["query_rewriter"] == "none"
    Upper.asked = []
    with ragspine.open(tmp_path / "b", retrieval_mode="bm25", query_rewriter="test_spine:Upper") as ws:
        ws.ingest("Revenue fell.", doc_id="d", sensitivity="PUBLIC")
        assert [h["doc_id"] for h in ws.search("revenue")] == ["d"] and Upper.asked == ["revenue"]
    with ragspine.open(tmp_path / "c", retrieval_mode="bm25") as ws:
        assert type(ws.retriever.index.query_rewriter).__name__ == "GlossaryQueryRewriter"
