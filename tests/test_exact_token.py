"""An exact token is always findable (issue 40, item 4): in a store of Chinese and English
documents, an identifier only one document holds finds that document first in hybrid search,
although the query's vector neighbours are in another language (the cross-language rule, which
otherwise ranks such a query by the vectors alone). Real SQLite store through the one ingest
path (`IngestPipeline`) and the one query path (`NarrativeIndexRetriever.retrieve`); the
embedding is a multilingual-model stand-in that, like a real one, does not see product codes."""

from __future__ import annotations

import re
from collections.abc import Iterator
from pathlib import Path

import pytest

from ragspine.ingest.pipeline import IngestPipeline
from ragspine.retrieval.fusion.exact import exact_terms, identifier_like
from ragspine.retrieval.link.narrative_link import NarrativeIndexRetriever, build_narrative_retriever
from ragspine.retrieval.model import DocumentMeta
from ragspine.retrieval.pipeline.trace import Trace
from ragspine.retrieval.vector.embeddings.deterministic import DeterministicEmbeddingBackend

ZH = ["营收下滑的原因是出口订单减少，公司第{n}季度利润率下降。", "董事会批准了第{n}号分红方案，现金流保持稳定。",
      "新工厂第{n}期投产后产能提升，原材料成本上升。", "监管机构发布第{n}号通知，要求加强信息披露。"]  # fmt: skip
EN = ["Gross margin fell in quarter {n} because of a product recall.",
      "The board approved dividend plan {n} after a strong year."]  # fmt: skip


class CodeBlind(DeterministicEmbeddingBackend):
    """Hashed words, blind to codes as an embedding model is: a token holding a digit carries
    nothing in a passage, and in a query it lands near an unrelated Chinese phrase (so a code's
    vector neighbours are Chinese passages, as in the issue)."""

    def embed_texts(self, texts: list[str]) -> list[list[float]]:
        return super().embed_texts([re.sub(r"\S*\d\S*", " ", t) for t in texts])

    def embed_queries(self, texts: list[str]) -> list[list[float]]:
        return super().embed_texts([re.sub(r"[A-Za-z]*\d\w*", "现金流", t) for t in texts])


def _corpus() -> dict[str, str]:
    """200 documents, four in five Chinese; d0004 (Chinese) alone holds the code zmk0004."""
    docs = {f"d{i:04d}": (EN[i % 2] if i % 5 == 4 else ZH[i % 4]).format(n=i) for i in range(200)}
    docs["d0004"] = "备件 zmk0004 随水泵套件一同发货，可向仓库订购。"
    return docs


@pytest.fixture
def retriever(tmp_path: Path) -> Iterator[NarrativeIndexRetriever]:
    retriever, store = build_narrative_retriever(tmp_path / "chunks.db", embedding_backend=CodeBlind())
    with IngestPipeline(retriever.index) as pipeline:
        for doc_id, text in _corpus().items():
            pipeline.ingest_document(text, DocumentMeta(doc_id=doc_id, title=doc_id))
    yield retriever
    store.close()


def test_an_identifier_finds_its_one_document_first(retriever: NarrativeIndexRetriever) -> None:
    trace = Trace()
    found = [s["doc_id"] for s in retriever.retrieve_run("zmk0004", top_k=10, trace=trace).snippets]
    assert trace.of("fusion")[0].decisions["signals"]["crosses_language"] is True  # the rule's case
    assert found[0] == "d0004", found
    # in a question too, with the other passages still after it
    mixed = [s["doc_id"] for s in retriever.retrieve("which depot stocks part zmk0004", top_k=10)]
    assert mixed[0] == "d0004", mixed
    assert len(mixed) == 10


def test_a_code_no_passage_holds_leaves_the_rule_as_it_was(retriever: NarrativeIndexRetriever) -> None:
    """No passage holds the code: the cross-language rule is as before (the vectors decide)."""
    trace = Trace()
    found = [s["doc_id"] for s in retriever.retrieve_run("zmk0005", top_k=5, trace=trace).snippets]
    fusion = trace.of("fusion")[0].decisions
    assert fusion["signals"]["crosses_language"] is True
    assert fusion["weights"] == {"lexical": 0.0, "dense": 2.0}
    assert "exact" not in fusion and "d0004" not in found


@pytest.mark.parametrize(
    ("token", "expected"),
    [("zmk0004", True), ("2023", True), ("a1", True), ("covid19", True), ("q4", True), ("19", False),
     ("384", False), ("7", False), ("12th", False), ("3rd", False), ("margin", False), ("营收", False)],
)  # fmt: skip
def test_identifier_like(token: str, expected: bool) -> None:
    assert identifier_like(token) is expected


def test_exact_terms_are_rare_identifiers_of_the_query() -> None:
    df = {"zmk0004": 1, "2023": 40, "margin": 2, "q4": 3}
    assert exact_terms(["zmk0004", "2023", "margin", "q4", "zmk0004"], lambda t: df.get(t, 0)) == ["zmk0004", "q4"]
    assert exact_terms(["zmk0004"], lambda t: 0) == []  # a token the corpus lacks matches nothing
