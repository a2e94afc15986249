"""The dense channel reading pgvector (issue 13 item 6): replicas over one PostgreSQL database
share the vectors (each chunk embedded once, by whoever wrote it), rank exactly as the embedded
default does, and the settings (RAGSPINE_VECTOR_STORE=pgvector) route ingest, search and
`ragspine embed` there. A real PostgreSQL with pgvector (tests/server/conftest.py)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from click.testing import CliRunner

from ragspine.cli import main
from ragspine.retrieval.link.narrative_link import build_narrative_retriever
from ragspine.retrieval.model import DocumentMeta
from ragspine.retrieval.vector.dense.chunk_vectors import ChunkVectors
from ragspine.retrieval.vector.embeddings.deterministic import DeterministicEmbeddingBackend
from ragspine.retrieval.vector.stores.pgvector import PgVectorStore
from ragspine.settings.config import load_settings
from ragspine.workspace import Workspace

CORPUS = [(f"d{i}", f"Report {i}: {['revenue fell', 'exports rose', 'margin grew', 'costs cut'][i % 4]} "
           f"in region {i % 3}, quarter {i % 5}.") for i in range(30)]  # fmt: skip
QUERIES = ["revenue fell in region 1", "exports rose", "margin quarter 3"]


class CountingBackend(DeterministicEmbeddingBackend):
    """The deterministic backend, counting the texts it embeds (chunks and queries apart)."""

    def __init__(self) -> None:
        super().__init__(dim=32)
        self.chunk_texts = 0
        self.query_texts = 0

    def embed_texts(self, texts: list[str]) -> list[list[float]]:
        self.chunk_texts += len(texts)
        return super().embed_texts(texts)

    def embed_queries(self, texts: list[str]) -> list[list[float]]:
        self.query_texts += len(texts)
        return DeterministicEmbeddingBackend.embed_texts(self, texts)


def _ranking(retriever: Any) -> list[list[tuple[str, float | None]]]:
    return [[(r.chunk.chunk_id, r.vector_score) for r in retriever.index.retrieve(q, top_k=8)] for q in QUERIES]


def test_replicas_share_vectors_and_rank_like_the_embedded_default(pg_url: str) -> None:
    writer_backend, reader_backend = CountingBackend(), CountingBackend()
    writer, writer_store = build_narrative_retriever(
        pg_url, embedding_backend=writer_backend,
        vectors=PgVectorStore(pg_url, "chunk_vectors", 32, writer_backend.model_id),
    )  # fmt: skip
    for doc_id, text in CORPUS:
        writer.index.ingest(text, DocumentMeta(doc_id, title=doc_id))
    assert writer_backend.chunk_texts == len(CORPUS)
    reader, reader_store = build_narrative_retriever(
        pg_url, embedding_backend=reader_backend,
        vectors=PgVectorStore(pg_url, "chunk_vectors", 32, reader_backend.model_id),
    )  # fmt: skip
    got = _ranking(reader)
    assert reader_backend.chunk_texts == 0  # the second replica embeds no chunk: it reads them
    assert got == _ranking(writer)
    local, local_store = build_narrative_retriever(":memory:", embedding_backend=CountingBackend())
    assert isinstance(local.index.dense.vectors, ChunkVectors)  # type: ignore[union-attr]
    for doc_id, text in CORPUS:
        local.index.ingest(text, DocumentMeta(doc_id, title=doc_id))
    assert got == _ranking(local)
    assert all(score is not None for run in got for _, score in run[:3])
    for retriever, store in ((writer, writer_store), (reader, reader_store), (local, local_store)):
        retriever.index.close()
        store.close()


def test_settings_route_the_dense_channel_to_pgvector(pg_url: str, tmp_path: Path) -> None:
    db = str(tmp_path / "chunks.db")
    env = {"RAGSPINE_DB": db, "RAGSPINE_EMBEDDING": "deterministic", "RAGSPINE_RETRIEVAL_MODE": "hybrid",
           "RAGSPINE_VECTOR_STORE": "pgvector", "RAGSPINE_VECTOR_URL": pg_url,
           "RAGSPINE_VECTOR_COLLECTION": "team_vectors"}  # fmt: skip
    settings = load_settings(env=env)
    with Workspace.from_settings(settings) as ws:
        for doc_id, text in CORPUS[:6]:
            ws.ingest_text(text, doc_id=doc_id)
        hits = ws.search("revenue fell in region 1")
        assert hits and isinstance(hits[0]["scores"]["vector"], float)
        assert ws.stats()["index"]["dense"]["stored_vectors"] == 6
    assert not list(tmp_path.glob("*.vectors.sqlite"))  # nothing beside the store
    store = PgVectorStore(pg_url, "team_vectors", 256, DeterministicEmbeddingBackend().model_id)
    assert store.count() == 6
    store.delete(store.ids()[:2])
    store.close()
    result = CliRunner().invoke(main, ["embed", "--db", db], env=env)
    assert result.exit_code == 0, result.output
    assert "embedded 2 chunk(s)" in result.output and "already embedded: 4" in result.output
    refused = CliRunner().invoke(main, ["embed", "--db", db, "--reembed"], env=env)
    assert refused.exit_code != 0 and "RAGSPINE_VECTOR_COLLECTION" in refused.output


class QueryCounting(PgVectorStore):
    """PgVectorStore counting its ranked queries (`query`); everything else is the real store."""

    queries = 0

    def query(self, *args: Any, **kwargs: Any) -> list[tuple[str, float]]:
        QueryCounting.queries += 1
        return super().query(*args, **kwargs)


def test_a_selective_filter_goes_down_as_ids_and_ranks_exactly(pg_url: str, monkeypatch: Any) -> None:
    import ragspine.retrieval.vector.dense.channel as channel

    monkeypatch.setattr(channel, "EXACT_IDS_MAX", 8)  # so that 30 chunks are "many"
    backend = CountingBackend()
    shared, shared_store = build_narrative_retriever(
        pg_url, embedding_backend=backend, vectors=QueryCounting(pg_url, "ids_vectors", 32, backend.model_id)
    )
    local, local_store = build_narrative_retriever(":memory:", embedding_backend=CountingBackend())
    for doc_id, text in CORPUS:
        for retriever in (shared, local):
            retriever.index.ingest(text, DocumentMeta(doc_id, title=doc_id, entity=f"E{int(doc_id[1:]) % 6}"))

    def ranked(retriever: Any, where: Any) -> list[tuple[str, float | None]]:
        return [(r.chunk.chunk_id, r.vector_score) for r in retriever.index.retrieve(QUERIES[0], top_k=8, where=where)]

    selective = {"entity": "E1"}  # 5 chunks: at most EXACT_IDS_MAX allowed
    QueryCounting.queries = 0
    got = ranked(shared, selective)
    assert QueryCounting.queries == 0 and got == ranked(local, selective) and len(got) == 5
    broad = {"entity": {"in": ["E1", "E2", "E3"]}}  # 15 chunks: the store ranks
    assert ranked(shared, broad) == ranked(local, broad) and QueryCounting.queries >= 1
    for retriever, store in ((shared, shared_store), (local, local_store)):
        retriever.index.close()
        store.close()
