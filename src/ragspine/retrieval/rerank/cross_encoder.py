"""The specification's path for `make_reranker` and `CrossEncoderReranker` (bodies:
`retrieval.rerank.factory`, `retrieval.rerank.onnx_cross_encoder`).

    from ragspine.retrieval.rerank.cross_encoder import make_reranker
    reranker = make_reranker("cross_encoder")   # RAGSPINE_RERANKER_MODEL (folder or hub id), else ms-marco MiniLM
    reranker = make_reranker("splade")          # SPLADE-tiny, out of the box
"""

from __future__ import annotations

from ragspine.retrieval.rerank.factory import RERANKERS, make_reranker
from ragspine.retrieval.rerank.onnx_cross_encoder import CrossEncoderReranker
from ragspine.retrieval.rerank.protocol import Reranker

__all__ = ["RERANKERS", "CrossEncoderReranker", "Reranker", "make_reranker"]
