"""The one way to pick a visual embedder: `make_visual_embedder(spec, **options)`
(RAGSPINE_VISUAL_EMBEDDER).

    from ragspine.retrieval.visual.factory import make_visual_embedder
    make_visual_embedder("none")                                   # None: no visual channel (default)
    make_visual_embedder("colpali", model_dir="models/colpali-v1.3", device="cuda")   # [colpali]
    make_visual_embedder("colqwen2", model_dir="models/colqwen2-v1.0")  # the more permissive licence
    make_visual_embedder("tiny")                                   # random weights: tests, benchmarks
    make_visual_embedder("my_pkg.visual:MyEmbedder")               # a class implementing VisualEmbedder

Invariants: names and errors come from the VISUAL_EMBEDDERS registry
(`ragspine.catalog.VISUAL_EMBEDDERS`, whose names RAGSPINE_VISUAL_EMBEDDER accepts); whatever is built is checked
against the `VisualEmbedder` Protocol; torch and colpali-engine are imported only when a
colpali / colqwen2 embedder is built.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from ragspine import catalog
from ragspine.registry import Registry
from ragspine.retrieval.visual.colpali import DEFAULT_BATCH_SIZE, ColPaliEmbedder  # torch: when built
from ragspine.retrieval.visual.protocol import VisualEmbedder


def colpali(
    model_dir: str | Path, *, device: str = "auto", batch_size: int = DEFAULT_BATCH_SIZE, dtype: str = "auto"
) -> VisualEmbedder:
    """ColPali (PaliGemma backbone) from a local folder [colpali]."""
    return ColPaliEmbedder(model_dir, family="colpali", device=device, batch_size=batch_size, dtype=dtype)


def colqwen2(
    model_dir: str | Path, *, device: str = "auto", batch_size: int = DEFAULT_BATCH_SIZE, dtype: str = "auto"
) -> VisualEmbedder:
    """ColQwen2 (Qwen2-VL backbone, Apache-2.0 adapter) from a local folder [colpali]."""
    return ColPaliEmbedder(model_dir, family="colqwen2", device=device, batch_size=batch_size, dtype=dtype)


VISUAL_EMBEDDERS: Registry[VisualEmbedder] = catalog.VISUAL_EMBEDDERS.bind(VisualEmbedder)


def make_visual_embedder(spec: str = "none", **options: Any) -> VisualEmbedder | None:
    """The visual embedder `spec` names, built with `options`; None for "none".

    >>> make_visual_embedder("none") is None
    True
    >>> make_visual_embedder("tiny", seed=3).model_id
    'tiny-visual:dim=32:grid=8:patch=8:seed=3'
    >>> try:
    ...     make_visual_embedder("colpaly")
    ... except ValueError as exc:
    ...     print(exc)
    unknown visual embedder 'colpaly'; valid: none, colpali, colqwen2, tiny, or a dotted path package.module:Class
    """
    return VISUAL_EMBEDDERS.make(spec, **options)
