"""The HTTP service with the dense channel on (the deterministic backend, a real server)."""

from __future__ import annotations

import time
from pathlib import Path
from typing import Any

from service_helpers import ADMIN, doc


def test_hybrid_search_and_stats_over_http(serve: Any) -> None:
    served = serve(embedding="deterministic")
    client = served.client
    for body in (doc("en", "Borealis gross margin fell because of a recall."),
                 doc("cn", "营收下滑的原因是出口订单减少。", entity="ACME_CN")):  # fmt: skip
        assert client.post("/documents", json=body).status_code == 201
    stats = client.get("/stats", headers=ADMIN).json()
    assert stats["index"]["retrieval"] == "hybrid"
    assert stats["index"]["embedding_model"] == "deterministic:blake2b-tokens-v1;dim=256"
    assert stats["index"]["embedding_device"] == "cpu" and stats["channels"]["devices"].startswith("embedding cpu")
    assert stats["index"]["dense"]["stored_vectors"] == 2
    assert stats["channels"]["retrieval_mode"] == "auto -> hybrid" and stats["channels"]["dense"] == "deterministic"

    found = client.post("/search", json={"query": "gross margin recall", "top_k": 2}).json()
    assert found["mode"] == "hybrid" and found["snippets"][0]["doc_id"] == "en"
    assert all(isinstance(s["scores"]["vector"], float) for s in found["snippets"])
    assert client.get("/stats", headers=ADMIN).json()["index"]["dense"] == {
        "stored_vectors": 2, "active": 2, "with_vector": 2, "lexical_only": 0, "missing": 0,
        "damaged": 0, "problem": None, "healthy": True, "note": None,
    }  # fmt: skip

    refused = client.post("/search", json={"query": "margin", "mode": "bm25"})
    assert refused.status_code == 400 and "runs hybrid retrieval" in refused.json()["message"]
    assert client.post("/search", json={"query": "margin", "mode": "hybrid"}).json()["mode"] == "hybrid"


def test_economy_service_reports_no_dense_channel(serve: Any) -> None:
    served = serve(embedding="deterministic", retrieval_mode="economy")
    served.client.post("/documents", json=doc("en", "Borealis margin fell."))
    stats = served.client.get("/stats", headers=ADMIN).json()
    assert stats["index"]["retrieval"] == "bm25" and stats["index"]["embedding_model"] is None
    assert stats["index"]["dense"] is None and stats["channels"]["dense"] == "none"
    found = served.client.post("/search", json={"query": "margin"}).json()
    assert found["mode"] == "bm25" and found["snippets"][0]["scores"]["vector"] is None


def test_damaged_vectors_file_never_fails_a_request(tmp_path: Any) -> None:
    """Issue 14 item 12: a vectors file whose bytes were overwritten (found when the server
    starts); search, upload and /stats answer (BM25), /stats says the vectors are not healthy,
    and `ragspine embed` moves the file aside and embeds every chunk again."""
    import httpx
    from click.testing import CliRunner

    import ragspine
    from ragspine.cli import main
    from ragspine.retrieval.vector.dense.chunk_vectors import VECTORS_SUFFIX
    from ragspine.service import running_server
    from service_helpers import AUTH, BM25_ENV, ROLE_KEYS

    folder = tmp_path / "ws"
    with ragspine.open(folder, env=BM25_ENV, embedding="deterministic") as ws:
        for i in range(3):
            ws.ingest_text(f"Borealis margin note {i} about recalls.", doc_id=f"d{i}")
        db = str(ws.store.db_path)
        vectors = ws.retriever.index.dense.vectors.path  # type: ignore[union-attr]
    assert vectors.endswith(VECTORS_SUFFIX)
    with open(vectors, "r+b") as f:
        f.write(b"\xa5" * 100)  # the header: SQLite can no longer read the file
    with ragspine.open(folder, env=BM25_ENV, embedding="deterministic", api_keys=ROLE_KEYS) as ws, \
            running_server(ws) as url, httpx.Client(base_url=url, headers=AUTH, timeout=30) as client:  # fmt: skip
        found = client.post("/search", json={"query": "margin recalls"})
        assert found.status_code == 200 and found.json()["snippets"]
        added = client.post("/documents", json=doc("d9", "Borealis margin fell after the recall."))
        assert added.status_code == 201
        assert client.post("/search", json={"query": "margin recall"}).status_code == 200
        dense = client.get("/stats", headers=ADMIN).json()["index"]["dense"]
        assert dense["healthy"] is False and "unreadable" in dense["problem"]
    result = CliRunner().invoke(main, ["embed", "--db", db], env={**BM25_ENV, "RAGSPINE_EMBEDDING": "deterministic",
                                                                  "RAGSPINE_RETRIEVAL_MODE": "hybrid"})
    assert result.exit_code == 0, result.output
    assert "moved aside" in result.output and "embedded 4 chunk(s)" in result.output
    with ragspine.open(folder, env=BM25_ENV, embedding="deterministic") as ws:
        ws.search("margin recall")
        assert ws.stats()["index"]["dense"]["healthy"] is True


def test_raptor_nodes_over_http_search_ask_and_stats(serve: Any) -> None:
    served = serve(embedding="deterministic", raptor="on", raptor_mode="collapsed", raptor_threshold=0.3,
                   raptor_max_cluster=4)  # fmt: skip
    texts = {"a": "Exports to Europe fell and revenue dropped.", "b": "Revenue dropped as exports to Europe fell.",
             "s": "Exports to Europe fell: secret layoffs planned."}  # fmt: skip
    for doc_id, text in texts.items():
        body = doc(doc_id, text, sensitivity="RESTRICTED" if doc_id == "s" else "PUBLIC")
        assert served.client.post("/documents", json=body).status_code == 201
    assert served.client.get("/stats", headers=ADMIN).json()["raptor"]["built"] is False
    served.ws.retriever.build()  # what `ragspine raptor build` runs
    stats = served.client.get("/stats", headers=ADMIN).json()["raptor"]
    assert stats["built"] and not stats["stale"] and stats["nodes"] == {"1": 1}
    found = served.client.post("/search", json={"query": "exports Europe revenue", "top_k": 3}).json()["snippets"]
    node = next(s for s in found if s.get("is_synthesis"))
    assert node["citable"] is False and set(node["lineage"]["doc_ids"]) == {"a", "b"} and "secret" not in node["text"]
    answer = served.client.post("/ask", json={"question": "exports Europe revenue", "top_k": 3}).json()
    assert answer["citations"] and {c["doc_id"] for c in answer["citations"]} <= {"a", "b"}
    assert not any(c.get("is_synthesis") for c in answer["citations"])


def test_a_posted_document_is_indexed_in_the_background_before_any_search(serve: Any) -> None:
    served = serve(embedding="deterministic")
    assert served.client.post("/documents", json=doc("en", "Borealis gross margin fell.")).status_code == 201
    lexical = served.ws.retriever.index.lexical_index
    deadline = time.monotonic() + 20
    while not lexical.loaded and time.monotonic() < deadline:  # the task runs after the answer
        time.sleep(0.05)
    assert lexical.loaded and lexical.last_action == "built"
    assert list(Path(served.ws.settings.db + ".bm25").glob("*/manifest.json"))  # its files, for the next process
    found = served.client.post("/search", json={"query": "gross margin", "top_k": 1}).json()
    assert found["snippets"][0]["doc_id"] == "en" and lexical.stats["builds"] == 1  # the search built nothing


def test_a_bm25_only_store_stays_so_over_http_until_embedded(serve: Any) -> None:
    """A store whose chunks were written BM25-only (another process, `RAGSPINE_EMBEDDING=none`)
    served with an embedding model: searches rank by BM25, make no vectors file and /stats says
    so; after an embed the same server searches hybrid."""
    from ragspine.retrieval.model import DocumentMeta
    from ragspine.retrieval.pipeline.narrative_index import NarrativeIndex
    from ragspine.retrieval.store.sqlite import ChunkStore

    served = serve(embedding="deterministic")
    db = Path(served.ws.settings.db)
    with ChunkStore(str(db)) as store:  # the BM25-only writer
        NarrativeIndex(store).ingest("Borealis gross margin fell because of a recall.", DocumentMeta("en"))
    for _ in range(2):
        found = served.client.post("/search", json={"query": "gross margin recall", "top_k": 2}).json()
        assert found["snippets"][0]["doc_id"] == "en" and found["snippets"][0]["scores"]["vector"] is None
    dense = served.client.get("/stats", headers=ADMIN).json()["index"]["dense"]
    assert (dense["stored_vectors"], dense["with_vector"], dense["missing"]) == (0, 0, 1)
    assert dense["note"] == "no vectors for this store: ranked by BM25 only; `ragspine embed` adds them"
    assert not list(db.parent.glob("*vectors*"))  # no vectors file (the lexical index is BM25's own)
    report = served.ws.embed_pending(progress=False)
    assert report is not None and report.embedded == 1
    found = served.client.post("/search", json={"query": "gross margin recall", "top_k": 2}).json()
    assert isinstance(found["snippets"][0]["scores"]["vector"], float)
    assert served.client.get("/stats", headers=ADMIN).json()["index"]["dense"]["note"] is None
