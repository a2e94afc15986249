"""Contextual Retrieval (RAGSPINE_CONTEXTUAL=header) through the product path, and parent
expansion into prompt_text (issue 15)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from ragspine.answer import ask, build_answer_prompt
from ragspine.assembly import build_retriever, ingest_files, load_settings
from ragspine.retrieval.chunking.contextual import ContextHeader
from ragspine.retrieval.chunking.factory import make_chunker, make_index_text_fn
from ragspine.retrieval.lexical.index.identity import IndexSettingsMismatch
from ragspine.retrieval.link.narrative_link import build_narrative_retriever
from ragspine.retrieval.model import DocumentMeta
from ragspine.retrieval.vector.embeddings.deterministic import DeterministicEmbeddingBackend

LONG = " ".join(f"Sentence {i} reports that exports fell in the northern region." for i in range(20))


class Recording(DeterministicEmbeddingBackend):
    """The deterministic backend, remembering every text it was asked to embed."""

    def __init__(self) -> None:
        super().__init__(dim=16)
        self.seen: list[str] = []

    def embed_texts(self, texts: list[str]) -> list[list[float]]:
        self.seen.extend(texts)
        return super().embed_texts(texts)


def _ingest(retriever: Any, text: str, meta: DocumentMeta) -> None:
    retriever.index.ingest(text, meta)


def test_header_is_indexed_and_embedded_but_never_cited(tmp_path: Path) -> None:
    backend = Recording()
    db = str(tmp_path / "c.db")
    retriever, store = build_narrative_retriever(
        db, embedding_backend=backend, chunker=make_chunker("layout"), index_text=make_index_text_fn("header"),
        query_rewriter=None,
    )
    try:
        _ingest(retriever, f"Quarterly risk memo\n\n{LONG}", DocumentMeta("memo", title="ACME memo", entity="ACME"))
        chunks = list(store.iter_chunks())
        assert len(chunks) > 1
        # Every chunk was embedded with its header; the stored text is the source's.
        assert sorted(backend.seen) == sorted(ContextHeader()(c) for c in chunks)
        assert all(t.startswith("ACME memo · ACME · Quarterly risk memo\n\n") for t in backend.seen)
        # A word only the header carries finds the later chunks (BM25 and dense both index it)...
        snippets = retriever.retrieve("ACME memo", top_k=10)
        assert {s["chunk_id"] for s in snippets} == {c.chunk_id for c in chunks}
        assert all(s["scores"]["bm25"] > 0 for s in snippets)  # BM25 itself matched each (dense returns all)
        for snippet in snippets:
            stored = next(c for c in chunks if c.chunk_id == snippet["chunk_id"])
            assert snippet["text"] == stored.text and "ACME memo ·" not in snippet["text"]
        assert (tmp_path / "c.db.ctx-header-v1.vectors.sqlite").is_file()
        assert not (tmp_path / "c.db.vectors.sqlite").exists()
    finally:
        retriever.index.close()
        store.close()


def test_without_the_header_a_title_word_finds_only_the_chunk_that_holds_it(tmp_path: Path) -> None:
    retriever, store = build_narrative_retriever(":memory:", chunker=make_chunker("layout"), query_rewriter=None)
    try:
        _ingest(retriever, f"Quarterly risk memo\n\n{LONG}", DocumentMeta("memo", title="ACME memo"))
        assert len(list(store.iter_chunks())) > 1
        assert len(retriever.retrieve("quarterly", top_k=10)) == 1
    finally:
        store.close()


def _files(tmp_path: Path) -> Path:
    folder = tmp_path / "docs"
    folder.mkdir()
    (folder / "law.txt").write_text((Path(__file__).parent / "fixtures/chunking/law_zh.txt").read_text("utf-8"), "utf-8")
    (folder / "memo.md").write_text(f"# Quarterly risk memo\n\n{LONG}\n", "utf-8")
    return folder


def test_changing_the_header_scheme_is_refused_then_rebuilt_and_reembedded(tmp_path: Path) -> None:
    folder = _files(tmp_path)
    base = {"RAGSPINE_DB": str(tmp_path / "s.db"), "RAGSPINE_EMBEDDING": "deterministic",
            "RAGSPINE_RETRIEVAL_MODE": "hybrid", "RAGSPINE_CHUNKER": "auto"}  # fmt: skip
    plain = load_settings({**base, "RAGSPINE_CONTEXTUAL": "none"})
    report, _ = ingest_files([folder], plain, progress=False)
    assert report.embedding is not None and report.embedding.embedded > 0
    contextual = load_settings({**base, "RAGSPINE_CONTEXTUAL": "header"})
    with pytest.raises(IndexSettingsMismatch, match=r"RAGSPINE_CONTEXTUAL: none -> header.*--rebuild"):
        ingest_files([folder], contextual, progress=False)
    with pytest.raises(IndexSettingsMismatch, match="RAGSPINE_CONTEXTUAL"):
        build_retriever(contextual)
    report, withdrawn = ingest_files([folder], contextual, rebuild=True, progress=False)
    assert withdrawn == [] and report.embedding is not None
    assert report.embedding.embedded > 0
    assert report.embedding.present == 0  # every chunk re-embedded with its header, in its own file
    assert (tmp_path / "s.db.ctx-header-v1.vectors.sqlite").is_file()
    retriever, store = build_retriever(contextual)
    try:
        hits = retriever.retrieve("数据样例保护法 第四条", top_k=3)
        assert hits and hits[0]["heading"].endswith("第四条")
        assert "中华人民共和国数据样例保护法 ·" not in hits[0]["text"]
        both = retriever.retrieve("数据样例 exports", top_k=20)
        assert {h["doc_id"] for h in both} == {"law.txt", "memo.md"}
        laws = retriever.retrieve("数据样例 exports", where={"chunker": "laws"}, top_k=20)
        assert laws and {h["doc_id"] for h in laws} == {"law.txt"}  # auto's choice is filterable
        lexical = retriever.index.lexical_index
        assert lexical.folder is not None and "index_text" in str(lexical._identity)
    finally:
        retriever.index.close()
        store.close()


def test_parent_expansion_is_prompt_text_only_and_merges_duplicates(tmp_path: Path) -> None:
    retriever, store = build_narrative_retriever(
        ":memory:", chunker=make_chunker("parent_child", max_chars=120, overlap_chars=0), query_rewriter=None
    )
    try:
        text = "# Exports\n\n" + " ".join(f"Exports fell {i} percent in the north." for i in range(8))
        _ingest(retriever, text, DocumentMeta("r", title="Report"))
        _ingest(retriever, "# Secret\n\nExports fell in the secret plan.", DocumentMeta("s", sensitivity="RESTRICTED"))
        snippets = retriever.retrieve("exports fell north", top_k=10)
        assert snippets and all(s["doc_id"] == "r" for s in snippets)  # RESTRICTED never comes out
        chunks = {c.chunk_id: c for c in store.iter_chunks()}
        carriers = [s for s in snippets if "parent_in" not in s["lineage"]]
        assert len(carriers) == 1  # one parent, carried once
        assert carriers[0]["prompt_text"] == chunks[carriers[0]["chunk_id"]].window_text
        for snippet in snippets:
            stored = chunks[snippet["chunk_id"]]
            assert snippet["text"] == stored.text and snippet["source_locator"] == stored.source_locator
            assert stored.text in snippet["prompt_text"]
            if snippet is not carriers[0]:
                assert snippet["prompt_text"] == stored.text
                assert snippet["lineage"]["parent_in"] == carriers[0]["chunk_id"]
        prompt = build_answer_prompt("why?", snippets)
        assert prompt.count("Exports fell 0 percent") == 1  # the parent once, never repeated
    finally:
        store.close()


class RecordingProvider:
    """Stands in for the user's LLM server: records the prompt, answers citing [1]."""

    def __init__(self) -> None:
        self.messages: list[dict[str, str]] = []

    def chat(self, messages: list[dict[str, str]], **options: Any) -> str:
        self.messages = messages
        return "Exports fell [1]."


def test_ask_sends_prompt_text_and_cites_exactly_text() -> None:
    retriever, store = build_narrative_retriever(":memory:", chunker=make_chunker("sentence_window"), query_rewriter=None)
    try:
        _ingest(retriever, "Sales rose. Exports fell sharply. Costs were flat. Staff grew.", DocumentMeta("r"))
        provider = RecordingProvider()
        answer = ask(retriever, "exports sharply", provider=provider, top_k=1)
        cited = answer.citations[0]
        assert cited["text"] == "Exports fell sharply."  # the citation is the sentence itself
        assert cited["prompt_text"] == "Sales rose. Exports fell sharply. Costs were flat. Staff grew."
        assert cited["prompt_text"] in provider.messages[-1]["content"]
    finally:
        store.close()


def test_default_loop_snippets_are_unchanged() -> None:
    retriever, store = build_narrative_retriever(":memory:")
    try:
        retriever.index.ingest("营收下滑的原因是出口减少。", DocumentMeta("r1", entity="ACME_CN"))
        (snippet,) = retriever.retrieve("营收")
        assert set(snippet) == {"text", "doc_id", "title", "source_locator", "chunk_id", "topic", "entity",
                                "geography", "period", "language", "sensitivity", "version", "valid_as_of",
                                "scores", "relevance", "lineage"}  # fmt: skip
        assert retriever.index.index_text is None
    finally:
        store.close()


def test_settings_pick_the_chunker_and_header_and_semantic_needs_a_backend() -> None:
    from ragspine.assembly import index_settings_for, make_chunker_for, make_index_text_for
    from ragspine.settings.config import ConfigError

    settings = load_settings({"RAGSPINE_CHUNKER": "laws", "RAGSPINE_CONTEXTUAL": "header", "RAGSPINE_CHUNK_CHARS": "300"})
    assert repr(make_chunker_for(settings)) == "LawsChunker(max_chars=300, overlap_chars=80)"
    assert isinstance(make_index_text_for(settings), ContextHeader)
    assert "RAGSPINE_CONTEXTUAL=header" in index_settings_for(settings).describe()
    with pytest.raises(ConfigError, match="RAGSPINE_CHUNKER=semantic.*RAGSPINE_EMBEDDING"):
        load_settings({"RAGSPINE_CHUNKER": "semantic", "RAGSPINE_RETRIEVAL_MODE": "bm25"})
    semantic = load_settings({"RAGSPINE_CHUNKER": "semantic", "RAGSPINE_EMBEDDING": "deterministic",
                              "RAGSPINE_RETRIEVAL_MODE": "hybrid"})  # fmt: skip
    assert "model=" in repr(make_chunker_for(semantic))
