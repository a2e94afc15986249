"""The specification's path for the VectorStore Protocol and InProcessVectorStore
(body: `retrieval.vector.stores.inprocess`)."""

from __future__ import annotations

from ragspine.retrieval.vector.stores.inprocess import (
    SCORE_DECIMALS,
    InProcessVectorStore,
    VectorStore,
    check_upsert,
    top_k,
)

__all__ = ["SCORE_DECIMALS", "InProcessVectorStore", "VectorStore", "check_upsert", "top_k"]
