"""RAGSPINE_VECTOR_STORE / _URL / _COLLECTION: refused combinations, and the dense channel kept
in a Qdrant collection (Qdrant's local mode, a folder) through the one assembly path."""

from __future__ import annotations

from pathlib import Path

import pytest

from ragspine.settings.config import ConfigError, load_settings
from ragspine.workspace import Workspace


@pytest.mark.parametrize(
    ("env", "message"),
    [
        ({"RAGSPINE_VECTOR_URL": "postgresql://u@h/db"}, "RAGSPINE_VECTOR_STORE='in_process' keeps vectors beside"),
        ({"RAGSPINE_VECTOR_COLLECTION": "x"}, "RAGSPINE_VECTOR_STORE='in_process' keeps vectors beside"),
        ({"RAGSPINE_VECTOR_STORE": "pgvector"}, "needs a PostgreSQL database: set RAGSPINE_VECTOR_URL"),
        ({"RAGSPINE_VECTOR_STORE": "qdrant"}, "needs RAGSPINE_VECTOR_URL"),
        ({"RAGSPINE_VECTOR_STORE": "qdrant", "RAGSPINE_VECTOR_URL": "/tmp/q",
          "RAGSPINE_VECTOR_COLLECTION": "Bad-Name"}, "lower-case letters"),
    ],
)
def test_refused_combinations_say_what_to_do(env: dict[str, str], message: str) -> None:
    with pytest.raises(ConfigError, match=message):
        load_settings(env={"RAGSPINE_DB": "x.db", **env})


def test_dense_channel_in_a_qdrant_collection(tmp_path: Path) -> None:
    pytest.importorskip("qdrant_client")
    db = str(tmp_path / "chunks.db")
    env = {"RAGSPINE_DB": db, "RAGSPINE_EMBEDDING": "deterministic", "RAGSPINE_RETRIEVAL_MODE": "hybrid",
           "RAGSPINE_VECTOR_STORE": "qdrant", "RAGSPINE_VECTOR_URL": str(tmp_path / "qdrant")}  # fmt: skip
    texts = {"a": "Borealis gross margin fell after the recall.", "b": "Lotus exports rose in 2024.",
             "c": "营收下滑的原因是出口订单减少。"}  # fmt: skip
    with Workspace.from_settings(load_settings(env=env)) as ws:
        for doc_id, text in texts.items():
            ws.ingest_text(text, doc_id=doc_id)
        hits = ws.search("gross margin recall")
        assert hits[0]["doc_id"] == "a" and isinstance(hits[0]["scores"]["vector"], float)
        dense = ws.stats()["index"]["dense"]
        assert dense["stored_vectors"] == 3 and dense["with_vector"] == 3 and dense["healthy"]
    assert not list(tmp_path.glob("*.vectors.sqlite"))  # nothing beside the store
    with Workspace.from_settings(load_settings(env=env)) as again:  # a new process reads them back
        assert [h["chunk_id"] for h in again.search("gross margin recall")] == [h["chunk_id"] for h in hits]
