"""What a caller is offered to filter on (issue 35): GET /fields, GET /facets and the
unknown-field error name the built-in fields and the user's own metadata, never the metadata the
auto chunker writes on every chunk (`chunker`, `chunker_reason`), which stays stored and readable.
One list decides (`model.offered_metadata`); a real store served by the real HTTP server."""

from __future__ import annotations

from pathlib import Path

import httpx
import pytest

import ragspine
from ragspine.retrieval.filters import CORE_FIELDS, OPERATORS
from ragspine.retrieval.model import SYSTEM_METADATA_KEYS
from ragspine.service import running_server

from service_helpers import API_KEY, AUTH, BM25_ENV

QA_TEXT = "Q: Where do herons nest?\nA: In reed beds.\n\nQ: What do herons eat?\nA: Fish and frogs.\n"


def test_fields_facets_and_errors_offer_user_fields_only(tmp_path: Path) -> None:
    with ragspine.open(tmp_path / "chunks.db", env={**BM25_ENV, "RAGSPINE_CHUNKER": "auto"}, api_keys=[API_KEY]) as ws:
        ws.ingest_text(QA_TEXT, "herons", title="Herons", entity="HERON", metadata={"project": "birds"})
        stored = {key for chunk in ws.store.iter_chunks(doc_id="herons") for key in chunk.metadata}
        assert set(SYSTEM_METADATA_KEYS) <= stored and "project" in stored, stored  # the case is real
        assert ws.metadata_fields() == ["project"]
        with pytest.raises(ValueError, match=r"metadata fields present: project\)$"):
            ws.search("herons", where={"colour": "grey"})
        assert ws.search("herons", where={"chunker": "qa"}), "the stored key still filters when named"
        with running_server(ws) as url, httpx.Client(base_url=url, headers=AUTH, timeout=60) as client:
            fields = client.get("/fields").json()
            facets = client.get("/facets").json()["facets"]
    assert fields == {"fields": list(CORE_FIELDS), "metadata": ["project"], "operators": list(OPERATORS)}
    assert facets["project"] == [{"value": "birds", "count": 1}]
    assert not set(SYSTEM_METADATA_KEYS) & set(facets), sorted(facets)


def test_user_metadata_may_not_take_a_name_ragspine_writes_itself(tmp_path: Path) -> None:
    ws = ragspine.open(tmp_path / "s.db", env=BM25_ENV)
    for key in SYSTEM_METADATA_KEYS:
        with pytest.raises(ValueError, match=f"'{key}' is written by RAGSpine itself"):
            ws.ingest_text("Herons nest in reed beds.", "d", metadata={key: "alice"})
    ws.ingest_text("Herons nest in reed beds.", "d", metadata={"owner": "alice"})
    assert [s["doc_id"] for s in ws.search("herons", where={"owner": "alice"})] == ["d"]
