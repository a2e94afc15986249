"""What the local model rerankers share: the model folder, an ONNX model with its tokenizer, and
scores → order (`ScoredReranker`).

Invariants: the model is a folder or a hub id `ORG/NAME[@REVISION]` resolved by
`ragspine.models.resolve_model` (cached; fetched on first use unless HF_HUB_OFFLINE, then one
line naming `ragspine models pull`); `model_dir=None` falls back to RAGSPINE_RERANKER_MODEL (read
by `spec_from_env`), then to the slot's default hub id (the cross-encoder's is the
specification's ms-marco MiniLM); a missing model or file is an error naming the setting.
`order_by_scores` breaks ties by the incoming position, so equal scores keep the fused order;
a NaN score is an error (the guard then keeps the fused order).
"""

from __future__ import annotations

import math
from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import Any

import numpy as np

from ragspine.extras import require
from ragspine.models.resolve import resolve_model
from ragspine.registry import spec_from_env
from ragspine.retrieval.vector.arrays import batches
from ragspine.models.device import onnx_session, session_device
from ragspine.retrieval.vector.embeddings.onnx import load_tokenizer, model_feed, pad_id, padded_feed

MODEL_SETTING = "RAGSPINE_RERANKER_MODEL"


def order_by_scores(scores: Sequence[float]) -> list[int]:
    """Indexes by descending score, ties in the given order.

    >>> order_by_scores([0.1, 0.9, 0.1])
    [1, 0, 2]
    """
    values = [float(s) for s in scores]
    if any(math.isnan(v) for v in values):
        raise ValueError("the model returned NaN scores")
    return sorted(range(len(values)), key=lambda i: (-values[i], i))


class ScoredReranker:
    """The base of a reranker that scores each candidate: `rerank` is the order of its `scores`,
    best first, ties in the given order (`order_by_scores`)."""

    def scores(self, query: str, candidates: list[str]) -> list[float]:
        """One relevance score per candidate (each subclass says how)."""
        raise NotImplementedError(f"{type(self).__name__} must define scores()")

    def rerank(self, query: str, candidates: list[str]) -> list[int]:
        return order_by_scores(self.scores(query, candidates))


def model_folder(model_dir: str | Path | None, *, what: str, holds: str, default: str | None = None) -> str:
    """What names the model: `model_dir`, else RAGSPINE_RERANKER_MODEL, else `default` (a hub
    id); a clear error when none is given."""
    given = str(model_dir) if model_dir is not None else spec_from_env((MODEL_SETTING,), "") or (default or "")
    if not given:
        raise ValueError(
            f"{what} needs a model ({holds}): pass model_dir= or set {MODEL_SETTING} to a folder or a "
            "hub id ORG/NAME[@REVISION]"
        )
    return given


class OnnxModel:
    """An ONNX model (a folder or a hub id, see `ragspine.models.resolve_model`: the graph +
    tokenizer.json) on ONNX Runtime, on `device` (auto, cpu, cuda: `ragspine.models.device`);
    `default` is the hub id used when neither `model_dir` nor RAGSPINE_RERANKER_MODEL names one."""

    def __init__(
        self, model_dir: str | Path | None, *, what: str, extra: str, max_length: int, batch_size: int,
        threads: int | None, default: str | None = None, device: str = "auto",
    ) -> None:  # fmt: skip
        if max_length < 4 or batch_size < 1:
            raise ValueError(f"max_length must be at least 4 and batch_size at least 1, got {max_length}, {batch_size}")
        ort = require("onnxruntime", extra=extra, purpose=what)
        tokenizers = require("tokenizers", extra=extra, purpose=what)
        named = model_folder(model_dir, what=what, holds="model.onnx + tokenizer.json", default=default)
        resolved = resolve_model(named, slot="onnx", what=what, setting=MODEL_SETTING)
        assert resolved.onnx is not None
        self.name, self.folder, self.model_path, self.batch_size = named, resolved.folder, resolved.onnx, batch_size
        model = resolved.onnx
        self.tokenizer = load_tokenizer(tokenizers, resolved.tokenizer, max_length)
        self.pad = pad_id(self.tokenizer)
        self.session = onnx_session(ort, model, device=device, threads=threads, what=what)
        self.device = session_device(self.session)
        self.inputs = [i.name for i in self.session.get_inputs()]
        self.output = self.session.get_outputs()[0].name

    def run_batches(self, inputs: list[Any]) -> Iterator[tuple[list[int], np.ndarray, np.ndarray]]:
        """Tokenize `inputs` (texts or (text, text) pairs) and run them batched by length:
        (the inputs' indexes, the first output as float32, the attention mask) per batch."""
        encodings = self.tokenizer.encode_batch(inputs)
        order = sorted(range(len(inputs)), key=lambda i: len(encodings[i].ids))
        for batch in batches(order, self.batch_size):
            feed = padded_feed([encodings[i] for i in batch], self.pad)
            (out, *_) = self.session.run([self.output], model_feed(feed, self.inputs, self.model_path))
            yield list(batch), np.asarray(out, dtype=np.float32), feed["attention_mask"]
