"""The one way to pick a reranker: `make_reranker(spec, **options)` (RAGSPINE_RERANKER).

    from ragspine.retrieval.rerank.cross_encoder import make_reranker   # the specification's path

    make_reranker("none")                      # None: no second stage (the default)
    make_reranker("splade")                    # SPLADE-tiny, numpy, out of the box [splade]
    make_reranker("cross_encoder")             # RAGSPINE_RERANKER_MODEL, else ms-marco MiniLM [rerank]
    make_reranker("ce", model_dir="BAAI/bge-reranker-v2-m3@main")   # a hub id, pinned (or a folder)
    make_reranker("ce", model_dir="models/bge-reranker-base-onnx")
    make_reranker("auto")                      # cross_encoder when a model folder is set, else None
    make_reranker("colbert", model_dir="models/colbertv2-onnx")                     # [colbert]
    make_reranker("http", url="http://gpu-box:8080/rerank", api="tei")              # a rerank server
    make_reranker("llm", provider=provider)    # the listwise LLM judge
    make_reranker("my_pkg.rerankers:Mine")     # a class of yours implementing Reranker

Invariants: names and errors come from the RERANKERS registry (`ragspine.catalog.RERANKERS`,
whose names RAGSPINE_RERANKER accepts); whatever is built is checked against
the `Reranker` Protocol; a model is loaded only when its name is built (a hub model is fetched
then, once, unless HF_HUB_OFFLINE; `auto` with no model set is None);
every reranker runs behind `guard.rerank_traced` (RESTRICTED exit #1, timeout, fallback, lineage).
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from ragspine import catalog
from ragspine.registry import Registry, spec_from_env
from ragspine.retrieval.rerank.models import MODEL_SETTING
from ragspine.retrieval.rerank.protocol import Reranker


def auto_reranker(model_dir: str | Path | None = None, **options: Any) -> Reranker | None:
    """The cross-encoder when a model folder is given (or RAGSPINE_RERANKER_MODEL is set), else None."""
    if model_dir is None and not spec_from_env((MODEL_SETTING,), ""):
        return None
    from ragspine.retrieval.rerank.onnx_cross_encoder import CrossEncoderReranker

    return CrossEncoderReranker(model_dir, **options)


RERANKERS: Registry[Reranker] = catalog.RERANKERS.bind(Reranker)


def make_reranker(spec: str = "none", **options: Any) -> Reranker | None:
    """The reranker `spec` names, built with `options`; None for "none".

    >>> make_reranker("none") is None
    True
    >>> try:
    ...     make_reranker("colbertish")
    ... except ValueError as exc:
    ...     print(exc)
    unknown reranker 'colbertish'; valid: none, cross_encoder, ce, auto, colbert, splade, llm, http, or a dotted path package.module:Class
    """
    return RERANKERS.make(spec, **options)
