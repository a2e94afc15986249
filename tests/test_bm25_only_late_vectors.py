"""A workspace opened on a BM25-only store gets vectors later (review 5 finding 5): MMR's
similarity resolves the store's vectors at each search, so once `Workspace.embed_pending` (or
`ragspine embed` elsewhere) made them MMR compares chunk vectors, not token overlap, without a
restart; and `Workspace.close` closes the embedding backend (a remote one's HTTP client) whether
or not the store has a dense channel. Real Workspace and SQLite files; the deterministic backend
(hashed tokens) stands in for e5."""

from __future__ import annotations

from pathlib import Path

import numpy as np

import ragspine
from ragspine.retrieval.link.narrative_link import build_narrative_retriever
from ragspine.retrieval.postprocess.mmr import MMR, TokenOverlap
from ragspine.retrieval.vector.embeddings.deterministic import DeterministicEmbeddingBackend
from ragspine.settings.load import load_settings
from ragspine.workspace import Workspace

QUERY = "harbour crane outage"


def _bm25_only_store(tmp_path: Path) -> Path:
    db = tmp_path / "store" / "s.db"
    with ragspine.open(db, embedding="none") as ws:
        for i in range(6):
            ws.ingest(f"Unit {i} reported a harbour crane outage in week {i}; repairs took {i + 2} days.", doc_id=f"n{i}")
    assert not list(db.parent.glob("*vectors*"))
    return db


def test_mmr_uses_the_vectors_an_embed_made_after_the_workspace_opened(tmp_path: Path) -> None:
    db = _bm25_only_store(tmp_path)
    with ragspine.open(db, embedding="deterministic", postprocessor="mmr") as ws:
        index = ws.retriever.index
        chain = ws.retriever.postprocessor
        assert chain is not None
        (mmr,) = [m for m in chain.members if isinstance(m, MMR)]
        assert ws.search(QUERY) and index.dense is None
        results = index.rank(QUERY, top_k=6)
        ids = [r.chunk.chunk_id for r in results]
        assert mmr.vectors is not None and not mmr.vectors(ids)[1].any()  # none yet: token overlap
        assert isinstance(getattr(mmr.similarity(results), "__self__", None), TokenOverlap)
        assert not list(db.parent.glob("*vectors*"))  # the lookup made no file

        report = ws.embed_pending(progress=False)
        assert report is not None and index.dense is not None
        rows, present = mmr.vectors(ids)
        assert present.all() and rows.shape == (len(ids), index.dense.vectors.dim)
        similarity = mmr.similarity(results)
        assert not isinstance(getattr(similarity, "__self__", None), TokenOverlap)  # cosine now
        unit = rows / np.linalg.norm(rows, axis=1, keepdims=True)
        assert np.allclose(similarity(0), unit @ unit[0])
        assert ws.search(QUERY)


class _Remote(DeterministicEmbeddingBackend):
    """A backend that says it is remote (an HTTP client to close) and records its close."""

    is_remote = True

    def __init__(self) -> None:
        super().__init__()
        self.closed = 0

    def close(self) -> None:
        self.closed += 1


def test_close_closes_a_remote_backend_of_a_store_without_vectors(tmp_path: Path) -> None:
    db = _bm25_only_store(tmp_path)
    backend = _Remote()
    retriever, store = build_narrative_retriever(db, embedding_backend=backend)
    assert retriever.index.dense is None  # BM25-only: the backend, no channel
    ws = Workspace(load_settings({"RAGSPINE_DB": str(db)}), retriever, store, None)
    assert ws.search(QUERY)
    ws.close()
    assert backend.closed == 1
    assert not list(db.parent.glob("*vectors*"))
