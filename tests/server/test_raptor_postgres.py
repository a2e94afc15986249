"""The RAPTOR tree of a PostgreSQL store lives in that store's schema (tables raptor_cluster,
raptor_meta and raptor_leaf), so every replica over the database reads the one tree: built by
one, served by all; an update from a changed document touches only its clusters; a replica
holding an older tree re-reads it once the store's version is the new tree's. A real PostgreSQL
with pgvector (tests/server/conftest.py)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import psycopg
from click.testing import CliRunner

from ragspine.cli import main
from ragspine.settings.config import load_settings
from ragspine.workspace import Workspace
from ragspine.retrieval.link.narrative_link import build_narrative_retriever
from ragspine.retrieval.model import DocumentMeta
from ragspine.retrieval.raptor import RaptorConfig, RaptorRetriever, RaptorTree, make_raptor_retriever
from ragspine.retrieval.vector.embeddings.deterministic import DeterministicEmbeddingBackend
from ragspine.retrieval.vector.stores.pgvector import PgVectorStore

THEMED = json.loads((Path(__file__).parents[1] / "fixtures" / "raptor" / "themes.json").read_text("utf-8"))
CONFIG = RaptorConfig(threshold=0.2)  # as tests/test_raptor.py: the token-hashing backend's cosines are low


def _replica(pg_url: str) -> tuple[RaptorRetriever, Any]:
    backend = DeterministicEmbeddingBackend(dim=128)
    base, store = build_narrative_retriever(
        pg_url, embedding_backend=backend, query_rewriter=None,
        vectors=PgVectorStore(pg_url, "chunk_vectors", 128, backend.model_id),
    )  # fmt: skip
    return make_raptor_retriever(base, mode="nodes", config=CONFIG), store


def _close(*pairs: tuple[RaptorRetriever, Any]) -> None:
    for raptor, store in pairs:
        raptor.close()
        raptor.index.close()
        store.close()


def test_the_tree_is_stored_in_postgres_and_shared_by_replicas(pg_url: str) -> None:
    writer = _replica(pg_url)
    raptor = writer[0]
    try:
        for doc in THEMED["documents"]:
            raptor.index.ingest(doc["text"], DocumentMeta(doc["id"], title=doc["id"], sensitivity="PUBLIC"))
        for doc in THEMED["restricted"]:
            raptor.index.ingest(doc["text"], DocumentMeta(doc["id"], title=doc["id"], sensitivity="RESTRICTED"))
        report = raptor.build()
        assert report.full and report.nodes[1] >= 4
        assert raptor.tree.path is not None and raptor.tree.path.startswith("postgresql://")
        status = raptor.status()
        assert status["path"].startswith("postgresql://") and "raptor_cluster" in status["path"]
        assert status["bytes"] > 0 and not status["stale"] and status["behind"] == 0
        with psycopg.connect(pg_url) as conn:  # the rows are in the store's own schema
            (rows,) = conn.execute("SELECT count(*) FROM raptor_cluster WHERE summary IS NOT NULL").fetchone()
            (schema,) = conn.execute("SELECT table_schema FROM information_schema.tables WHERE table_name = 'raptor_cluster'").fetchone()
            (chunks_schema,) = conn.execute("SELECT table_schema FROM information_schema.tables WHERE table_name = 'narrative_chunk'").fetchone()
            summaries = [s for (s,) in conn.execute("SELECT summary FROM raptor_cluster WHERE summary IS NOT NULL")]
        assert rows == len(raptor.tree.nodes) and schema == chunks_schema
        markers = [doc["marker"] for doc in THEMED["restricted"]]
        assert summaries and not any(m in s for m in markers for s in summaries)

        reader = _replica(pg_url)  # another process over the same database: reads the tree, builds nothing
        try:
            assert {k: (n.summary, n.members, n.leaves) for k, n in reader[0].tree.nodes.items()} == {
                k: (n.summary, n.members, n.leaves) for k, n in raptor.tree.nodes.items()
            }
            question = THEMED["questions"]["hiring"][0]
            (top,) = reader[0].retrieve(question, top_k=1)
            assert top["is_synthesis"] and {d.split("-")[0] for d in top["lineage"]["doc_ids"]} == {"hiring"}

            before = {k: n.summary for k, n in raptor.tree.nodes.items()}
            raptor.index.ingest("Software engineers were hired in Shenzhen and Wuhan. Hiring of engineers grew.",
                                DocumentMeta("hiring-en-2", title="hiring-en-2", sensitivity="PUBLIC"))  # fmt: skip
            assert reader[0].status()["stale"] and reader[0].status()["behind"] == 1
            (stale,) = reader[0].retrieve(question, top_k=1)
            assert not stale.get("is_synthesis") and "stale" in stale["lineage"]["raptor"]
            update = raptor.build()
            assert not update.full and 0 < update.summarised < len(before)
            changed = {k for k in before.keys() | raptor.tree.nodes.keys()
                       if before.get(k) != (raptor.tree.nodes[k].summary if k in raptor.tree.nodes else None)}  # fmt: skip
            assert all({leaf.doc_id.split("-")[0] for leaf in raptor.tree.nodes[k].leaves} == {"hiring"}
                       for k in changed if k in raptor.tree.nodes)  # fmt: skip
            (fresh,) = reader[0].retrieve(question, top_k=1)  # the reader re-reads the rebuilt tree
            assert fresh["is_synthesis"] and fresh["lineage"]["tree_data_version"] == raptor.visible_version()
            assert "Wuhan" in " ".join(m["text"] for m in fresh["members"]) or "hiring-en-2" not in fresh["lineage"]["doc_ids"]
        finally:
            _close(reader)
        again = RaptorTree(pg_url)
        try:
            assert again.data_version == raptor.index.store.data_version() and again.clusters == raptor.tree.clusters
        finally:
            again.close()
    finally:
        _close(writer)


def test_cli_builds_and_reports_the_tree_of_a_postgres_store(pg_url: str) -> None:
    env = {"RAGSPINE_EMBEDDING": "deterministic", "RAGSPINE_VECTOR_STORE": "pgvector", "RAGSPINE_VECTOR_URL": pg_url,
           "RAGSPINE_RAPTOR_THRESHOLD": "0.2"}  # fmt: skip
    with Workspace.from_settings(load_settings(env={**env, "RAGSPINE_DB": pg_url})) as ws:
        for doc in THEMED["documents"][:12]:
            ws.ingest_text(doc["text"], doc_id=doc["id"])
    runner = CliRunner()
    built = runner.invoke(main, ["raptor", "build", "--db", pg_url], env=env)
    assert built.exit_code == 0, built.output
    assert "built RAPTOR tree" in built.output and "tree: postgresql://" in built.output
    status = json.loads(runner.invoke(main, ["raptor", "status", "--db", pg_url, "--json"], env=env).output)
    assert status["built"] and not status["stale"] and status["nodes"]["1"] >= 2 and status["bytes"] > 0
