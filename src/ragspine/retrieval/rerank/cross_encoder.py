"""The specification's path for `make_reranker` (body: `retrieval.rerank.factory`).

Local cross-encoder, ColBERT and SPLADE rerankers plug into the same registry (issue 17).
"""

from __future__ import annotations

from ragspine.retrieval.rerank.factory import RERANKERS, make_reranker
from ragspine.retrieval.rerank.protocol import Reranker

__all__ = ["RERANKERS", "Reranker", "make_reranker"]
